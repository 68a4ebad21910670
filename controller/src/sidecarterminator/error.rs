//! The controller's error, with the runner's metric label.

use crate::runner::{KubeError, ReconcileError};

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// The Pod is not bound to a node, so whether it runs on a virtual kubelet is unknown.
    #[error("pod has no spec.nodeName")]
    NoNode,
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
            Error::NoNode => "no_node",
        }
    }
}
