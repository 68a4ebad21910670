//! The EphemeralJob controller's error, with the runner's metric label and retry floor.

use crate::runner::{KubeError, ReconcileError};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("serialization: {0}")]
    Serde(#[from] serde_json::Error),
    #[error("EphemeralJob has no namespace or uid")]
    Unnamed,
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
            Error::Serde(_) => "serde",
            Error::Unnamed => "unnamed",
        }
    }
}
