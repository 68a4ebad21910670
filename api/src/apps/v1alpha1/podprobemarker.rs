//! PodProbeMarker and NodePodProbe, apps.kruise.io/v1alpha1 only (upstream
//! `apis/apps/v1alpha1/pod_probe_marker_types.go`, `node_pod_probe_types.go`): custom probes
//! whose results become Pod labels, annotations and conditions instead of restarts.
//!
//! The manager copies each marker's probes into the NodePodProbe of every matched Pod's node
//! (named `<marker>#<probe>`, [`node_probe_name`]); kruise-daemon on that node runs them and
//! writes the results into the NodePodProbe's status; the manager turns the results into the
//! Pod's markers. Beside the types: the wire names the three share.

use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Separates the marker's name from the probe's in a NodePodProbe probe name (upstream's).
pub const NODE_PROBE_NAME_SEPARATOR: char = '#';
/// Event reason when a matched Pod has no container the probe names (Kruise-rs's reason).
pub const REASON_CONTAINER_NOT_FOUND: &str = "ProbeContainerNotFound";
/// Event reason when the manager cannot write a NodePodProbe or a Pod's markers.
pub const REASON_SYNC_FAILED: &str = "PodProbeMarkerSyncFailed";

/// The name of a marker's probe in a NodePodProbe: `<marker>#<probe>`.
pub fn node_probe_name(marker: &str, probe: &str) -> String {
    format!("{marker}{NODE_PROBE_NAME_SEPARATOR}{probe}")
}

/// The marker and probe names of a NodePodProbe probe name, if it has the separator.
pub fn split_node_probe_name(name: &str) -> Option<(&str, &str)> {
    name.split_once(NODE_PROBE_NAME_SEPARATOR)
}

/// Desired state of a PodProbeMarker.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "PodProbeMarker",
    namespaced,
    status = "PodProbeMarkerStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PodProbeMarker runs custom probes in the Pods its selector matches and marks the Pods with the results."
)]
#[serde(rename_all = "camelCase")]
pub struct PodProbeMarkerSpec {
    /// The Pods (in the marker's namespace) to probe. Immutable.
    pub selector: LabelSelector,
    /// The probes; names unique within the marker.
    pub probes: Vec<PodContainerProbe>,
}

/// `spec.probes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodContainerProbe {
    /// The probe's name, unique within the marker, without `#`.
    pub name: String,
    /// The container the probe runs in (exec) or for (tcpSocket, httpGet).
    pub container_name: String,
    /// A Kubernetes probe: exec, tcpSocket or httpGet, with its timing and thresholds.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub probe: Probe,
    /// The labels and annotations to put on the Pod for each state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marker_policy: Vec<ProbeMarkerPolicy>,
    /// A Pod condition type to record the result in (status True when the probe succeeds).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_condition_type: String,
}

/// `spec.probes[].markerPolicy[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeMarkerPolicy {
    pub state: ProbeState,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// A probe's state (upstream's words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ProbeState {
    Succeeded,
    Failed,
    #[default]
    Unknown,
}

impl ProbeState {
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeState::Succeeded => "Succeeded",
            ProbeState::Failed => "Failed",
            ProbeState::Unknown => "Unknown",
        }
    }
}

/// Observed state of a PodProbeMarker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodProbeMarkerStatus {
    /// The generation the controller last acted on.
    #[serde(default)]
    pub observed_generation: i64,
    /// Pods the selector matches.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub matched_pods: i64,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The probes kruise-daemon runs on one node; named after the node.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "NodePodProbe",
    status = "NodePodProbeStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "NodePodProbe lists the custom probes of the Pods on one node and their results."
)]
#[serde(rename_all = "camelCase")]
pub struct NodePodProbeSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_probes: Vec<PodProbe>,
}

/// `spec.podProbes[]`: one Pod's probes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PodProbe {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    /// The Pod's IP, which tcpSocket and httpGet probes connect to (upstream's upper-case key).
    #[serde(rename = "IP", default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ContainerProbe>,
}

/// `spec.podProbes[].probes[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbe {
    /// `<marker>#<probe>`.
    pub name: String,
    pub container_name: String,
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub probe: Probe,
    /// The marker the probe comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_probe_marker_name: String,
}

/// Results of the node's probes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePodProbeStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_probe_statuses: Vec<PodProbeStatus>,
}

/// `status.podProbeStatuses[]`: one Pod's results.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodProbeStatus {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe_states: Vec<ContainerProbeState>,
}

/// `status.podProbeStatuses[].probeStates[]`: one probe's current state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerProbeState {
    pub name: String,
    pub state: ProbeState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The probe's output when it succeeds, its error when it fails.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_probe_ip_key_is_upper_case_as_upstream() {
        let p = PodProbe {
            name: "p".into(),
            ip: "10.0.0.1".into(),
            ..Default::default()
        };
        let v = serde_json::to_value(&p).expect("serializes");
        assert_eq!(v["IP"], "10.0.0.1");
        assert_eq!(
            split_node_probe_name(&node_probe_name("m", "x")),
            Some(("m", "x"))
        );
    }
}
