//! The controller's error, with the runner's metric label and conflict test.

use crate::runner::KubeError;

/// Why a reconcile failed; the runner backs off and retries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    /// `targetFilter.replicasPathList` names no integer in the workload.
    #[error(transparent)]
    ReplicasPath(#[from] kruise_api::apps::v1alpha1::ReplicasPathError),
    /// The custom workload whitelist does not parse.
    #[error(transparent)]
    WhiteList(#[from] kruise_api::apps::v1alpha1::WhiteListError),
}

kruise_runtime::reconcile_error!(Error {
    Error::ReplicasPath(_) => "replicas_path";
    Error::WhiteList(_) => "whitelist";
});
