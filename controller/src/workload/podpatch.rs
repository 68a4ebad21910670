//! The one Pod write the workloads share: a strategic-merge patch of a Pod or of its status
//! subresource, by name.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;

use super::podutil;
use crate::podcache::PodRead;

/// Which part of a pod a patch writes.
#[derive(Clone, Copy)]
pub enum PodPart {
    Object,
    Status,
}

/// Strategic-merge `patch` into `pod` (or its status subresource), through `api`'s client and
/// namespace. The answer is read without its managedFields ([`PodRead`]).
pub async fn patch_pod(
    api: &Api<Pod>,
    pod: &Pod,
    part: PodPart,
    patch: Value,
) -> Result<Pod, kube::Error> {
    let ns = api.namespace().or(pod.metadata.namespace.as_deref());
    let client = api.clone().into_client();
    let api: Api<PodRead> = match ns {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let (name, params, patch) = (
        podutil::name(pod),
        PatchParams::default(),
        Patch::Strategic(patch),
    );
    let PodRead(written) = match part {
        PodPart::Object => api.patch(name, &params, &patch).await?,
        PodPart::Status => api.patch_status(name, &params, &patch).await?,
    };
    Ok(written)
}
