//! WorkloadSpread, apps.kruise.io/v1beta1 (upstream `apis/apps/v1beta1/workloadspread_types.go`),
//! served (v1alpha1 is stored). Its JSON is v1alpha1's but for two renamed subset fields
//! (`requiredNodeSelectorTerm` → `requiredNodeSelector`, `preferredNodeSelectorTerms` →
//! `preferredNodeSelector`) and the subset conditions, which are `metav1.Condition`s. The parts
//! whose JSON is the same (target filter, schedule strategy) are defined here and v1alpha1
//! re-exports them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PreferredSchedulingTerm, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::policy::v1alpha1::TargetReference;
use crate::serde_util::{is_zero_i64, null_as_default};

/// Desired state of a WorkloadSpread.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "WorkloadSpread",
    namespaced,
    status = "WorkloadSpreadStatus",
    shortname = "ws",
    derive = "PartialEq",
    derive = "Default",
    doc = "WorkloadSpread spreads the Pods of a workload over subsets of nodes, with a cap, tolerations and a patch per subset.",
    printcolumn = r#"{"name":"WorkloadName","type":"string","jsonPath":".spec.targetRef.name"}"#,
    printcolumn = r#"{"name":"WorkloadKind","type":"string","jsonPath":".spec.targetRef.kind"}"#,
    printcolumn = r#"{"name":"Adaptive","type":"boolean","jsonPath":".spec.scheduleStrategy.type[?(@ == \"Adaptive\")]","description":"Whether use the adaptive reschedule strategy"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSpec {
    /// The workload whose Pods are spread (required, as upstream).
    #[serde(rename = "targetRef")]
    pub target_reference: TargetReference,
    /// Selects, among the workload's Pods, those the WorkloadSpread manages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_filter: Option<TargetFilter>,
    /// The subsets, in the order Pods fill them (required; Go writes an empty list as `null`).
    #[serde(deserialize_with = "null_as_default")]
    pub subsets: Vec<WorkloadSpreadSubset>,
    /// How Pods are placed between subsets.
    #[serde(
        default,
        skip_serializing_if = "WorkloadSpreadScheduleStrategy::is_empty"
    )]
    pub schedule_strategy: WorkloadSpreadScheduleStrategy,
}

/// Which Pods of the workload count, and where its replicas are read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetFilter {
    /// Pods the selector matches are managed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Paths in the workload whose values sum to the replicas percentages scale against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas_path_list: Vec<String>,
}

/// `Fixed` (default) or `Adaptive`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadScheduleStrategy {
    /// `Fixed`, `Adaptive` or empty (Fixed).
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Parameters of `Adaptive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveWorkloadSpreadStrategy>,
}

impl WorkloadSpreadScheduleStrategy {
    /// Neither a type nor parameters (Go leaves the struct out of the JSON).
    pub(crate) fn is_empty(&self) -> bool {
        self.type_.is_empty() && self.adaptive.is_none()
    }
}

/// Parameters of the `Adaptive` strategy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdaptiveWorkloadSpreadStrategy {
    /// Skip the webhook's simulated scheduling.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disable_simulation_schedule: bool,
    /// How long a Pod may stay unschedulable before it is rescheduled to another subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_critical_seconds: Option<i32>,
}

/// One subset of nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSubset {
    /// Unique among the subsets.
    pub name: String,
    /// Nodes of the subset (v1alpha1 `requiredNodeSelectorTerm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_node_selector: Option<NodeSelectorTerm>,
    /// Nodes the subset prefers (v1alpha1 `preferredNodeSelectorTerms`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_node_selector: Vec<PreferredSchedulingTerm>,
    /// Added to the Pod's tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Most Pods in the subset: a count or a percentage of the workload's replicas; none means
    /// no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<IntOrString>,
    /// A patch applied to the Pod (e.g. labels, resources).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub patch: Option<serde_json::Value>,
}

/// Observed state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadStatus {
    /// The generation this status reflects.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// One entry per subset, in the spec's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subset_statuses: Vec<WorkloadSpreadSubsetStatus>,
    /// Per workload revision, the subsets' statuses (used during rollouts of Deployments).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versioned_subset_statuses: BTreeMap<String, Vec<WorkloadSpreadSubsetStatus>>,
}

/// The observed state of one subset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSubsetStatus {
    /// The subset's name.
    pub name: String,
    /// Active Pods in the subset.
    pub replicas: i32,
    /// Conditions (`Schedulable`), at most one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Pods the subset may still take; `-1` when it has no cap.
    pub missing_replicas: i32,
    /// Pods (by name, or a generated id) the webhook placed here and the controller has not
    /// seen yet, with the time of the placement.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub creating_pods: BTreeMap<String, Time>,
    /// Pods whose deletion the webhook admitted and that still exist, with its time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deleting_pods: BTreeMap<String, Time>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn schema_names_the_fields_as_upstream() {
        let crd = serde_json::to_value(WorkloadSpread::crd()).expect("crd as json");
        let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        let subset = &root["spec"]["properties"]["subsets"]["items"]["properties"];
        assert!(subset.get("requiredNodeSelector").is_some());
        assert!(subset.get("preferredNodeSelector").is_some());
        assert!(subset.get("requiredNodeSelectorTerm").is_none());
        assert_eq!(
            root["spec"]["required"],
            serde_json::json!(["subsets", "targetRef"])
        );
        let ss = &root["status"]["properties"]["subsetStatuses"]["items"];
        assert_eq!(
            ss["required"],
            serde_json::json!(["missingReplicas", "name", "replicas"])
        );
        let conds = &ss["properties"]["conditions"];
        assert_eq!(conds["x-kubernetes-list-type"], "map");
        assert!(
            conds["items"]["required"]
                .as_array()
                .is_some_and(|r| r.contains(&serde_json::json!("lastTransitionTime")))
        );
    }

    #[test]
    fn reads_what_go_writes() {
        let ws: WorkloadSpread = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "WorkloadSpread",
            "metadata": {"name": "ws"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"},
                "subsets": null, "scheduleStrategy": {}},
            "status": {"subsetStatuses": [{"name": "a", "replicas": 1, "missingReplicas": -1,
                "conditions": [{"type": "Schedulable", "status": "True", "reason": "Unknown",
                    "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}]}
        }))
        .expect("typed");
        assert!(ws.spec.subsets.is_empty());
        let st = ws.status.expect("status");
        assert_eq!(st.subset_statuses[0].conditions[0].reason, "Unknown");
    }
}
