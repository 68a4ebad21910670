//! ContainerRecreateRequest, apps.kruise.io/v1alpha1. The spec has the same JSON as v1beta1;
//! the status lacks `containerStatusSnapshot` and `conditions` (v1alpha1 kept those in
//! annotations).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::apps::v1beta1::{
    ContainerRecreateRequestContainer, ContainerRecreateRequestContainerContext,
    ContainerRecreateRequestContainerRecreateState, ContainerRecreateRequestFailurePolicyType,
    ContainerRecreateRequestPhase, ContainerRecreateRequestStrategy,
    ContainerRecreateRequestSyncContainerStatus, ContainerRecreateRequestSyncContainerStatuses,
    ProbeHandler,
};

/// Desired state of a ContainerRecreateRequest.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ContainerRecreateRequest",
    namespaced,
    status = "ContainerRecreateRequestStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "crr",
    doc = "ContainerRecreateRequest restarts containers of one pod in place.",
    printcolumn = r#"{"name":"PHASE","type":"string","jsonPath":".status.phase","description":"Phase of this ContainerRecreateRequest."}"#,
    printcolumn = r#"{"name":"POD","type":"string","jsonPath":".spec.podName","description":"Pod name of this ContainerRecreateRequest."}"#,
    printcolumn = r#"{"name":"NODE","type":"string","jsonPath":".metadata.labels.crr\\.apps\\.kruise\\.io/node-name","description":"Node name of this ContainerRecreateRequest."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestSpec {
    /// The pod whose containers are recreated.
    pub pod_name: String,
    /// Containers to recreate, in order.
    pub containers: Vec<ContainerRecreateRequestContainer>,
    /// How to recreate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ContainerRecreateRequestStrategy>,
    /// Seconds after creation before the request is abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion before the request is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// Observed state of a ContainerRecreateRequest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStatus {
    /// Pending, Recreating, Succeeded, Failed or Completed.
    pub phase: ContainerRecreateRequestPhase,
    /// When the request completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Summary for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Per-container progress.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_recreate_states: Vec<ContainerRecreateRequestContainerRecreateState>,
}
