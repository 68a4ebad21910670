//! The launch-priority controller's error, with the runner's metric label.

use crate::runner::{KubeError, ReconcileError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("pod {0} has no namespace or UID")]
    Incomplete(String),
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
            Error::Incomplete(_) => "incomplete",
        }
    }
}
