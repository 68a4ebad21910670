//! The controller's error, with the runner's metric label and conflict test.

use std::time::Duration;

use crate::revision::RevisionError;
use crate::runner::KubeError;

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

kruise_runtime::reconcile_error!(Error {
    // A spec the allocator or the template refuses only changes with the object, whose
    // change triggers a reconcile by itself.
    Error::Revision(_) => "revision";
    Error::Alloc(_) => "allocation", floor: Duration::from_secs(5);
    Error::Child(_) => "template", floor: Duration::from_secs(5);
    Error::Subsets(_) => "subsets";
});
