//! What can go wrong reconciling a SidecarSet, with the runner's metric label and retry floor.

use crate::runner::KubeError;

use super::context::PROGRESS_RESYNC;

/// What can go wrong reconciling a SidecarSet.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// A wire format could not be read or written.
    #[error("{0}")]
    Wire(#[from] kruise_api::Error),
    /// The ControllerRevision flow failed.
    #[error(transparent)]
    Revision(crate::revision::RevisionError),
    /// The status could not be serialized.
    #[error("serializing the status: {0}")]
    Serde(#[from] serde_json::Error),
    /// A Pod's `SidecarSetUpgradable` condition message is not upstream's JSON map.
    #[error("reading the SidecarSetUpgradable condition message: {0}")]
    UpgradableMessage(serde_json::Error),
    /// `patchPodMetadata` could not be applied to a Pod being upgraded.
    #[error(transparent)]
    PatchMetadata(#[from] super::metadata::MergeError),
    /// Some Pods could not be acted on; the others were, and the status says which.
    #[error("{count} matched Pod(s) could not be upgraded: {first}")]
    Blocked {
        /// How many.
        count: usize,
        /// The first one and why.
        first: String,
    },
}

kruise_runtime::reconcile_error!(Error {
    Error::Wire(_) => "wire";
    // Only a change of the Pod (which wakes us by itself) or of the API's mood fixes
    // it; retrying at the backoff's first milliseconds would only repeat the Events.
    Error::Blocked { .. } => "blocked", floor: PROGRESS_RESYNC;
    Error::Revision(_) => "revision";
    Error::Serde(_) => "serde";
    Error::UpgradableMessage(_) => "condition";
    Error::PatchMetadata(_) => "metadata";
});
