//! The launch-priority controller's error, with the runner's metric label.

use crate::runner::KubeError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("pod {0} has no namespace or UID")]
    Incomplete(String),
}

kruise_runtime::reconcile_error!(Error {
    Error::Incomplete(_) => "incomplete";
});
