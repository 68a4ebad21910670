//! The ContainerRecreateRequest controller's error, with the runner's metric label.

use crate::runner::{KubeError, ReconcileError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Readiness(#[from] kruise_api::Error),
    #[error("pod {0} kept conflicting")]
    Conflict(String),
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
            Error::Readiness(_) => "readiness",
            Error::Conflict(_) => "conflict",
        }
    }
}
