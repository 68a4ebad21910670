//! The controller's error, with the runner's metric label and conflict test.

use kruise_api::policy::v1alpha1::pubcontrol::BudgetError;

use crate::runner::ReconcileError;

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cannot compute the desired available count: {0}")]
    Budget(#[from] BudgetError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Budget(_) => "budget",
        }
    }

    fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(e) if crate::runner::is_conflict(e))
    }
}
