//! The Advanced DaemonSet controller's error, with the runner's metric label and retry floor.

use super::plan::BadNumber;
use crate::inplace::ApplyError;
use crate::revision::RevisionError;
use crate::runner::{KubeError, SPEC_ERROR_RETRY};
use crate::workload::lifecycle::WriteError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Revision(#[from] RevisionError),
    #[error("in-place update: {0}")]
    InPlace(#[from] ApplyError),
    #[error("serialization: {0}")]
    Serde(#[from] serde_json::Error),
    #[error(transparent)]
    Spec(#[from] BadNumber),
    #[error("DaemonSet has no namespace or uid")]
    Unnamed,
    #[error("lifecycle: {0}")]
    Lifecycle(#[from] WriteError),
}

kruise_runtime::reconcile_error!(Error {
    Error::Revision(_) => "revision";
    Error::InPlace(_) => "inplace";
    Error::Serde(_) => "serde";
    Error::Spec(_) => "spec", floor: SPEC_ERROR_RETRY;
    Error::Unnamed => "unnamed";
    Error::Lifecycle(_) => "lifecycle";
});
