//! PersistentPodState, apps.kruise.io/v1beta1 (upstream
//! `apis/apps/v1beta1/persistent_pod_state_types.go`) (served; v1alpha1 is stored): v1alpha1 with a
//! topology term's `nodeTopologyKeys` called `keys`. The status is the same in both.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::v1alpha1::TargetReference;

/// Desired state of a PersistentPodState: which workload, and what to record of its Pods.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "PersistentPodState",
    namespaced,
    status = "PersistentPodStateStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PersistentPodState records where each Pod of a StatefulSet ran, so that a recreated Pod returns to the same node topology."
)]
#[serde(rename_all = "camelCase")]
pub struct PersistentPodStateSpec {
    /// The workload whose Pods are recorded: a StatefulSet (apps/v1) or an Advanced
    /// StatefulSet (apps.kruise.io).
    #[serde(rename = "targetRef")]
    pub target_reference: TargetReference,
    /// Pod annotations recorded with each Pod's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persistent_pod_annotations: Vec<PersistentPodAnnotation>,
    /// Node labels a recreated Pod must keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_persistent_topology: Option<NodeTopologyTerm>,
    /// Node labels a recreated Pod prefers to keep, with weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_persistent_topology: Vec<PreferredTopologyTerm>,
    /// `WhenScaled` (default) or `WhenDeleted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_pod_state_retention_policy: Option<String>,
}

/// A weighted preferred topology.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreferredTopologyTerm {
    /// 1-100, as a preferred scheduling term's.
    pub weight: i32,
    /// The node labels.
    pub preference: NodeTopologyTerm,
}

/// Node label keys, e.g. `kubernetes.io/hostname` (v1alpha1's `nodeTopologyKeys`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTopologyTerm {
    /// Node label keys.
    #[serde(default)]
    pub keys: Vec<String>,
}

/// A Pod annotation to record.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PersistentPodAnnotation {
    /// The annotation key.
    pub key: String,
}

/// What has been recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentPodStateStatus {
    /// The generation this status reflects.
    #[serde(default)]
    pub observed_generation: i64,
    /// Pod name → its recorded state (taken when the Pod was Ready on a node).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_states: BTreeMap<String, PodState>,
}

/// One Pod's recorded state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodState {
    /// `spec.nodeName` of the Pod.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// The node's labels among the spec's topology keys (`key → value`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_topology_labels: BTreeMap<String, String>,
    /// The Pod's annotations among `persistentPodAnnotations`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}
