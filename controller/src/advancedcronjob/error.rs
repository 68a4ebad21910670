//! The AdvancedCronJob controller's error, with the runner's metric label and retry floor.

use crate::runner::{KubeError, SPEC_ERROR_RETRY};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("serialization: {0}")]
    Serde(#[from] serde_json::Error),
    #[error(transparent)]
    Schedule(#[from] super::plan::Problem),
    #[error("AdvancedCronJob has no namespace or uid")]
    Unnamed,
}

kruise_runtime::reconcile_error!(Error {
    Error::Serde(_) => "serde";
    Error::Schedule(_) => "schedule", floor: SPEC_ERROR_RETRY;
    Error::Unnamed => "unnamed";
});
