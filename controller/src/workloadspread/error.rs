//! The controller's error, with the runner's metric label and conflict test.

use crate::runner::ReconcileError;

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// `targetFilter.replicasPathList` names no integer in the workload.
    #[error(transparent)]
    ReplicasPath(#[from] kruise_api::apps::v1alpha1::ReplicasPathError),
    /// The custom workload whitelist does not parse.
    #[error(transparent)]
    WhiteList(#[from] kruise_api::apps::v1alpha1::WhiteListError),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::ReplicasPath(_) => "replicas_path",
            Error::WhiteList(_) => "whitelist",
        }
    }

    fn is_conflict(&self) -> bool {
        matches!(self, Error::Kube(e) if crate::runner::is_conflict(e))
    }
}
