//! The controller's error, with the runner's metric label and conflict test.

use std::time::Duration;

use crate::revision::RevisionError;
use crate::runner::{KubeError, ReconcileError};

use super::child::ChildError;
use super::plan::AllocError;

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("revision: {0}")]
    Revision(#[from] RevisionError),
    #[error("specified subset replicas is ineffective: {0}")]
    Alloc(#[from] AllocError),
    #[error("subset workload: {0}")]
    Child(#[from] ChildError),
    /// Creating, updating or deleting subset workloads failed (recorded in the conditions).
    #[error("{0}")]
    Subsets(String),
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
            Error::Alloc(_) => "allocation",
            Error::Child(_) => "template",
            Error::Subsets(_) => "subsets",
        }
    }

    /// A spec the allocator or the template refuses only changes with the object, whose
    /// change triggers a reconcile by itself.
    fn retry_floor(&self) -> Duration {
        match self {
            Error::Alloc(_) | Error::Child(_) => Duration::from_secs(5),
            _ => Duration::ZERO,
        }
    }
}
