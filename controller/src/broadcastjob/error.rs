//! The BroadcastJob controller's error, with the runner's metric label and retry floor.

use super::plan::BadParallelism;
use crate::runner::{KubeError, SPEC_ERROR_RETRY};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("serialization: {0}")]
    Serde(#[from] serde_json::Error),
    #[error(transparent)]
    Spec(#[from] BadParallelism),
    #[error("BroadcastJob has no namespace or uid")]
    Unnamed,
}

kruise_runtime::reconcile_error!(Error {
    Error::Serde(_) => "serde";
    Error::Spec(_) => "spec", floor: SPEC_ERROR_RETRY;
    Error::Unnamed => "unnamed";
});
