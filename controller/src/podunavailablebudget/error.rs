//! The controller's error, with the runner's metric label and conflict test.

use kruise_api::policy::v1alpha1::pubcontrol::BudgetError;

use crate::runner::{KubeError, ReconcileError};

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("cannot compute the desired available count: {0}")]
    Budget(#[from] BudgetError),
}

kruise_runtime::kube_variant!(Error);

impl ReconcileError for Error {
    fn kube(&self) -> Option<&KubeError> {
        match self {
            Error::Kube(e) => Some(e),
            _ => None,
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(e) => e.metric_label(),
            Error::Budget(_) => "budget",
        }
    }
}
