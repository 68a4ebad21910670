//! What can go wrong reconciling a SidecarSet, with the runner's metric label and retry floor.

use std::time::Duration;

use crate::runner::{KubeError, ReconcileError};

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
            Error::Wire(_) => "wire",
            Error::Blocked { .. } => "blocked",
            Error::Revision(_) => "revision",
            Error::Serde(_) => "serde",
            Error::UpgradableMessage(_) => "condition",
            Error::PatchMetadata(_) => "metadata",
        }
    }

    fn retry_floor(&self) -> Duration {
        match self {
            // Only a change of the Pod (which wakes us by itself) or of the API's mood fixes
            // it; retrying at the backoff's first milliseconds would only repeat the Events.
            Error::Blocked { .. } => PROGRESS_RESYNC,
            _ => Duration::ZERO,
        }
    }
}
