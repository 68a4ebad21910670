//! The errors of the ImagePullJob and ImageListPullJob controllers, with the runner's metric
//! labels.

use super::plan::PlanError;
use crate::runner::KubeError;

/// Why an ImagePullJob reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Logic(#[from] PlanError),
    #[error("namespace {0} is being deleted")]
    NamespaceTerminating(String),
    #[error("namespace {0} does not exist")]
    NamespaceMissing(String),
    #[error("NodeImage {0} kept conflicting")]
    Conflict(String),
}

kruise_runtime::reconcile_error!(Error {
    Error::Logic(_) => "invalid";
    Error::NamespaceTerminating(_) | Error::NamespaceMissing(_) => "namespace";
    Error::Conflict(_) => "conflict";
});

/// Why an ImageListPullJob reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("cannot hash the job template: {0}")]
    Hash(String),
}

kruise_runtime::reconcile_error!(ListError {
    ListError::Hash(_) => "hash";
});
