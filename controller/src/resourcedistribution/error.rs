//! The controller's error, with the runner's metric label and conflict test.

use std::time::Duration;

use crate::runner::KubeError;

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// Some namespaces could not be written; the status names them.
    #[error("{count} namespace(s) failed: {first}")]
    Namespaces { count: usize, first: String },
    /// `spec.resource` is not distributable (the webhook refuses it; an object admitted while
    /// the webhook was away is reported until it is fixed).
    #[error("spec.resource: {0}")]
    Resource(#[from] kruise_api::apps::v1alpha1::ResourceError),
}

kruise_runtime::reconcile_error!(Error {
    // A bad resource is fixed only by an edit, which triggers a reconcile anyway.
    Error::Namespaces { .. } => "namespaces";
    Error::Resource(_) => "resource", floor: Duration::from_secs(300);
});
