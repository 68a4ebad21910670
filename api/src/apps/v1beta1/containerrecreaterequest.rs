//! ContainerRecreateRequest, apps.kruise.io/v1beta1: ask the node's daemon to restart some
//! containers of a pod (with preStop), without recreating the pod.

use k8s_openapi::api::core::v1::{ContainerPort, ExecAction, HTTPGetAction, TCPSocketAction};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::serde_util::{is_false, is_zero_i32};

/// Desired state of a ContainerRecreateRequest.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
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
    #[schemars(range(min = 0))]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion before the request is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// One container to recreate. Everything but `name` is filled in by the webhook from the pod.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestContainer {
    /// Container name; must exist in the pod.
    pub name: String,
    /// The container's preStop handler, copied from the pod spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_stop: Option<ProbeHandler>,
    /// The container's ports, copied from the pod spec (for httpGet/tcpSocket named ports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ContainerPort>,
    /// The container's status when the request was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_context: Option<ContainerRecreateRequestContainerContext>,
}

/// A preStop action (upstream `CRRProbeHandler`; `ProbeHandler` in v1alpha1, same JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeHandler {
    /// Run a command in the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    /// Send an HTTP GET.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HTTPGetAction>,
    /// Open a TCP connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TCPSocketAction>,
}

/// Container status captured at creation; recreation is done when it changes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestContainerContext {
    /// Container ID (`containerd://…`).
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// Restart count.
    pub restart_count: i32,
}

/// How containers are recreated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestStrategy {
    /// Fail (default) stops at the first failure; Ignore carries on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_policy: Option<ContainerRecreateRequestFailurePolicyType>,
    /// Recreate the next container only after the previous one is back.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ordered_recreate: bool,
    /// Kill the container even if it is still starting.
    #[serde(default, skip_serializing_if = "is_false")]
    pub force_recreate: bool,
    /// Seconds to wait for graceful stop; default the pod's terminationGracePeriodSeconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub termination_grace_period_seconds: Option<i64>,
    /// Seconds the pod is held not-ready before preStop and stop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub unready_grace_period_seconds: Option<i64>,
    /// Seconds a new container must run and be ready to count as recreated.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    #[schemars(range(min = 0))]
    pub min_started_seconds: i32,
}

/// What to do when a container fails to recreate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ContainerRecreateRequestFailurePolicyType {
    /// Stop and fail the request.
    #[default]
    Fail,
    /// Carry on with the next container.
    Ignore,
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
    /// Current container statuses of the pod, kept by the manager while Recreating so the
    /// daemon can tell the new container is up (replaces the v1alpha1 annotation).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_status_snapshot: Vec<ContainerRecreateRequestSyncContainerStatus>,
    /// Conditions; PreRecreateGrace records when the pod was forced not-ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Phase of a request or of one container in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ContainerRecreateRequestPhase {
    /// Not started.
    #[default]
    Pending,
    /// Containers are being recreated.
    Recreating,
    /// Every container was recreated.
    Succeeded,
    /// A container failed to recreate.
    Failed,
    /// Finished otherwise (pod gone, deadline passed).
    Completed,
}

impl ContainerRecreateRequestPhase {
    /// Succeeded, Failed or Completed: nothing more will happen.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Completed)
    }
}

/// Recreation progress of one container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestContainerRecreateState {
    /// Container name.
    pub name: String,
    /// Phase of this container.
    pub phase: ContainerRecreateRequestPhase,
    /// Summary for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The daemon has stopped the old container.
    #[serde(default, skip_serializing_if = "is_false")]
    pub is_killed: bool,
}

/// A container's status as the manager last saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecreateRequestSyncContainerStatus {
    /// Container name.
    pub name: String,
    /// Passed its readiness probe.
    pub ready: bool,
    /// Restart count.
    pub restart_count: i32,
    /// Container ID.
    #[serde(
        rename = "containerID",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub container_id: String,
}

/// The v1alpha1 `crr.apps.kruise.io/sync-container-statuses` annotation holds a JSON list of
/// these; kept so old objects can be read.
pub type ContainerRecreateRequestSyncContainerStatuses =
    Vec<ContainerRecreateRequestSyncContainerStatus>;
