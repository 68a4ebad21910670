//! The controller's error, with the runner's metric label.

use crate::runner::KubeError;

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// The Pod is not bound to a node, so whether it runs on a virtual kubelet is unknown.
    #[error("pod has no spec.nodeName")]
    NoNode,
    #[error(transparent)]
    Stored(#[from] crate::stored::Error),
}

kruise_runtime::reconcile_error!(Error {
    Error::NoNode => "no_node";
    Error::Stored(_) => "conversion";
});
