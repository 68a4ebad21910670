//! The EphemeralJob controller's error, with the runner's metric label and retry floor.

use crate::runner::KubeError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("serialization: {0}")]
    Serde(#[from] serde_json::Error),
    #[error("EphemeralJob has no namespace or uid")]
    Unnamed,
}

kruise_runtime::reconcile_error!(Error {
    Error::Serde(_) => "serde";
    Error::Unnamed => "unnamed";
});
