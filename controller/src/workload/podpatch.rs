//! The one Pod write the workloads share: a strategic-merge patch of a Pod or of its status
//! subresource, by name.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::podutil;

/// Which part of a pod a patch writes.
#[derive(Clone, Copy)]
pub enum PodPart {
    Object,
    Status,
}

/// Strategic-merge `patch` into `pod` (or its status subresource).
pub async fn patch_pod(
    api: &Api<Pod>,
    pod: &Pod,
    part: PodPart,
    patch: Value,
) -> Result<Pod, kube::Error> {
    let (name, params, patch) = (
        podutil::name(pod),
        PatchParams::default(),
        Patch::Strategic(patch),
    );
    match part {
        PodPart::Object => api.patch(name, &params, &patch).await,
        PodPart::Status => api.patch_status(name, &params, &patch).await,
    }
}
