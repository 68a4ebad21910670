//! The Advanced DaemonSet controller's error, with the runner's metric label and retry floor.

use std::time::Duration;

use super::plan::BadNumber;
use crate::inplace::ApplyError;
use crate::revision::RevisionError;
use crate::runner::{KubeError, ReconcileError};
use crate::workload::lifecycle::WriteError;

/// The soonest retry of errors only a spec change fixes (that change triggers a reconcile).
const SPEC_ERROR_RETRY: Duration = Duration::from_secs(30);

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
            Error::Revision(_) => "revision",
            Error::InPlace(_) => "inplace",
            Error::Serde(_) => "serde",
            Error::Spec(_) => "spec",
            Error::Unnamed => "unnamed",
            Error::Lifecycle(_) => "lifecycle",
        }
    }

    fn retry_floor(&self) -> Duration {
        match self {
            Error::Spec(_) => SPEC_ERROR_RETRY,
            _ => Duration::ZERO,
        }
    }
}
