//! The controller's error, with the runner's metric label and conflict test.

use kruise_api::policy::v1alpha1::pubcontrol::BudgetError;

use crate::runner::KubeError;

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("cannot compute the desired available count: {0}")]
    Budget(#[from] BudgetError),
    #[error(transparent)]
    Stored(crate::stored::StatusError),
}

kruise_runtime::reconcile_error!(Error {
    Error::Budget(_) => "budget";
    Error::Stored(_) => "conversion";
});
