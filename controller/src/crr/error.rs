//! The ContainerRecreateRequest controller's error, with the runner's metric label.

use crate::runner::KubeError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Readiness(#[from] kruise_api::Error),
    #[error("pod {0} kept conflicting")]
    Conflict(String),
    #[error(transparent)]
    Stored(#[from] crate::stored::Error),
}

kruise_runtime::reconcile_error!(Error {
    Error::Readiness(_) => "readiness";
    Error::Conflict(_) => "conflict";
    Error::Stored(_) => "conversion";
});
