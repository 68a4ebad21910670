//! WorkloadSpread, apps.kruise.io/v1alpha1 (upstream `apis/apps/v1alpha1/workloadspread_types.go`):
//! spreads the Pods of an existing workload over subsets of nodes, each with an optional cap,
//! tolerations and a patch, without changing the workload.
//!
//! Beside the types: the `apps.kruise.io/matched-workloadspread` Pod annotation, which the Pod
//! webhook writes and the controller reads ([`MatchedWorkloadSpread`]), and the cap of a subset
//! ([`WorkloadSpreadSubset::max_replicas_of`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Pod, PreferredSchedulingTerm, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::apps::v1beta1::{
    AdaptiveWorkloadSpreadStrategy, TargetFilter, WorkloadSpreadScheduleStrategy,
};
use crate::keys;
pub use crate::policy::v1alpha1::TargetReference;

/// `scheduleStrategy.type`: Pods stay in the subset the webhook chose (the default).
pub const SCHEDULE_FIXED: &str = "Fixed";
/// `scheduleStrategy.type`: the controller reschedules Pods a subset cannot place.
pub const SCHEDULE_ADAPTIVE: &str = "Adaptive";
/// Subset condition type: whether the subset's nodes can take Pods.
pub const SUBSET_SCHEDULABLE: &str = "Schedulable";

/// Desired state of a WorkloadSpread.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
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
    /// The workload whose Pods are spread.
    #[serde(rename = "targetRef", default, skip_serializing_if = "Option::is_none")]
    pub target_reference: Option<TargetReference>,
    /// Selects, among the workload's Pods, those the WorkloadSpread manages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_filter: Option<TargetFilter>,
    /// The subsets, in the order Pods fill them.
    #[serde(default)]
    pub subsets: Vec<WorkloadSpreadSubset>,
    /// How Pods are placed between subsets.
    #[serde(
        default,
        skip_serializing_if = "WorkloadSpreadScheduleStrategy::is_empty"
    )]
    pub schedule_strategy: WorkloadSpreadScheduleStrategy,
}

/// One subset of nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSubset {
    /// Unique among the subsets.
    pub name: String,
    /// Nodes of the subset (added to the Pod's required node affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_node_selector_term: Option<NodeSelectorTerm>,
    /// Nodes the subset prefers (added to the Pod's preferred node affinity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_node_selector_terms: Vec<PreferredSchedulingTerm>,
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

impl WorkloadSpreadSubset {
    /// The cap against `replicas` (percentages round up, upstream
    /// `GetScaledValueFromIntOrPercent(.., true)`); `None` when the subset has no cap or the
    /// value is malformed (the webhook refuses those).
    pub fn max_replicas_of(&self, replicas: i32) -> Option<i32> {
        let v = self.max_replicas.as_ref()?;
        crate::policy::v1alpha1::pubcontrol::scaled_round_up(v, replicas).ok()
    }
}

/// Observed state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadStatus {
    /// The generation this status reflects.
    #[serde(default)]
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
    #[serde(default)]
    pub replicas: i32,
    /// Conditions (`Schedulable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<WorkloadSpreadSubsetCondition>,
    /// Pods the subset may still take; `-1` when it has no cap.
    #[serde(default)]
    pub missing_replicas: i32,
    /// Pods (by name, or a generated id) the webhook placed here and the controller has not
    /// seen yet, with the time of the placement.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub creating_pods: BTreeMap<String, Time>,
    /// Pods whose deletion the webhook admitted and that still exist, with its time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub deleting_pods: BTreeMap<String, Time>,
}

/// A condition of a subset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpreadSubsetCondition {
    /// `Schedulable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl WorkloadSpreadSubsetStatus {
    /// Whether a `Schedulable=False` condition closes the subset.
    pub fn unschedulable(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == SUBSET_SCHEDULABLE && c.status == "False")
    }
}

impl WorkloadSpreadStatus {
    /// The subsets' statuses the webhook reserves in for Pods of `version` (see
    /// [`pod_version`]); empty until the first Pod of that version.
    pub fn versioned(&self, version: &str) -> &[WorkloadSpreadSubsetStatus] {
        self.versioned_subset_statuses
            .get(version)
            .map_or(&[], Vec::as_slice)
    }
}

/// The replicas a subset's percentage cap scales against, from the targeted workload `obj`
/// (upstream `getWorkloadReplicas` and `filterWorkload`): the sum of the integers at
/// `targetFilter.replicasPathList` when it has any (dotted paths from the object's root, a
/// number indexing a list), else a Job's `spec.parallelism` and every other kind's
/// `spec.replicas`, 1 when unset as the API server defaults them.
pub fn workload_replicas(
    kind: &str,
    obj: &serde_json::Value,
    filter: Option<&TargetFilter>,
) -> Result<i32, ReplicasPathError> {
    let paths = filter.map_or(&[][..], |f| f.replicas_path_list.as_slice());
    if paths.is_empty() {
        let field = if kind == "Job" {
            "parallelism"
        } else {
            "replicas"
        };
        let v = obj.get("spec").and_then(|s| s.get(field));
        return Ok(v
            .and_then(serde_json::Value::as_i64)
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(1));
    }
    let mut sum: i64 = 0;
    for path in paths.iter().filter(|p| !p.is_empty()) {
        let mut at = obj;
        for part in path.split('.') {
            let next = match at {
                serde_json::Value::Array(items) => {
                    part.parse::<usize>().ok().and_then(|i| items.get(i))
                }
                other => other.get(part),
            };
            at = next.ok_or_else(|| ReplicasPathError::Missing(path.clone()))?;
        }
        sum += at
            .as_i64()
            .ok_or_else(|| ReplicasPathError::NotAnInteger(path.clone()))?;
    }
    Ok(i32::try_from(sum).unwrap_or(i32::MAX))
}

/// Why `targetFilter.replicasPathList` gave no replicas.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicasPathError {
    #[error("targetFilter.replicasPathList: path {0:?} does not exist in the workload")]
    Missing(String),
    #[error("targetFilter.replicasPathList: the value at {0:?} is not an integer")]
    NotAnInteger(String),
}

/// Whether `targetFilter` lets the WorkloadSpread manage a Pod with these labels (upstream
/// `IsPodSelected`): every Pod without a filter, none when the filter has no selector, else
/// those its selector matches (an empty one matches all).
pub fn selects(filter: Option<&TargetFilter>, labels: Option<&BTreeMap<String, String>>) -> bool {
    let Some(filter) = filter else {
        return true;
    };
    let empty = BTreeMap::new();
    filter
        .selector
        .as_ref()
        .is_some_and(|s| crate::selector::matches(s, labels.unwrap_or(&empty)))
}

/// Whether Pods of a workload of this kind are counted per revision (upstream's default of
/// `--ws-enabled-versioned-status`: Deployments, and so their ReplicaSets).
pub fn versioned_kind(kind: &str) -> bool {
    matches!(kind, "Deployment" | "ReplicaSet")
}

/// The revision a Pod is counted under in `versionedSubsetStatuses` (upstream `GetPodVersion`):
/// for Pods of a ReplicaSet or Deployment their `pod-template-hash` (else the short
/// `controller-revision-hash`), for every other Pod [`keys::WS_VERSION_IGNORED`]. A rollout's
/// new Pods thus fill the subsets in order again instead of finding them full of old Pods.
pub fn pod_version(pod: &Pod) -> String {
    let versioned = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && versioned_kind(&o.kind));
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).filter(|v| !v.is_empty());
    if !versioned {
        return keys::WS_VERSION_IGNORED.to_owned();
    }
    if let Some(v) = label(keys::POD_TEMPLATE_HASH_LABEL) {
        return v.clone();
    }
    match label(keys::CONTROLLER_REVISION_HASH_LABEL) {
        // The hash is the last dash-separated part of the revision's name.
        Some(v) => v.rsplit('-').next().unwrap_or(v).to_owned(),
        None => keys::WS_VERSION_IGNORED.to_owned(),
    }
}

/// The value of [`keys::MATCHED_WORKLOADSPREAD_ANNOTATION`] (upstream `InjectWorkloadSpread`):
/// the WorkloadSpread and subset a Pod was placed in, and the id the webhook generated when
/// the Pod had no name yet.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchedWorkloadSpread {
    pub name: String,
    pub subset: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl MatchedWorkloadSpread {
    /// The annotation of a Pod, if it has a well-formed one.
    pub fn of(annotations: Option<&BTreeMap<String, String>>) -> Option<Self> {
        let raw = annotations?.get(keys::MATCHED_WORKLOADSPREAD_ANNOTATION)?;
        serde_json::from_str(raw).ok()
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The key of the Pod in `creatingPods`: the generated id, else the Pod's name.
    pub fn creating_key<'a>(&'a self, pod_name: &'a str) -> &'a str {
        if self.uid.is_empty() {
            pod_name
        } else {
            &self.uid
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotation_matches_upstreams_json() {
        let m = MatchedWorkloadSpread {
            name: "ws".into(),
            subset: "a".into(),
            uid: String::new(),
        };
        assert_eq!(m.to_annotation(), r#"{"name":"ws","subset":"a"}"#);
        let with_uid = MatchedWorkloadSpread {
            uid: "u1".into(),
            ..m
        };
        assert_eq!(
            with_uid.to_annotation(),
            r#"{"name":"ws","subset":"a","uid":"u1"}"#
        );
    }

    #[test]
    fn percent_caps_round_up() {
        let s = WorkloadSpreadSubset {
            max_replicas: Some(IntOrString::String("50%".into())),
            ..Default::default()
        };
        assert_eq!(s.max_replicas_of(5), Some(3));
        assert_eq!(WorkloadSpreadSubset::default().max_replicas_of(5), None);
    }

    fn pod_of(kind: &str, labels: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        p.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: kind.into(),
                name: "w".into(),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        p
    }

    #[test]
    fn pods_of_replicasets_are_counted_per_template_hash_others_not() {
        let rs = pod_of("ReplicaSet", &[(keys::POD_TEMPLATE_HASH_LABEL, "6f9c7d")]);
        assert_eq!(pod_version(&rs), "6f9c7d");
        let by_revision = pod_of(
            "ReplicaSet",
            &[(keys::CONTROLLER_REVISION_HASH_LABEL, "web-7d4b9c")],
        );
        assert_eq!(pod_version(&by_revision), "7d4b9c");
        assert_eq!(pod_version(&pod_of("ReplicaSet", &[])), "versionIgnored");
        let cs = pod_of(
            "CloneSet",
            &[(keys::CONTROLLER_REVISION_HASH_LABEL, "web-7d4b9c")],
        );
        assert_eq!(pod_version(&cs), "versionIgnored");
        assert_eq!(pod_version(&Pod::default()), "versionIgnored");
    }

    #[test]
    fn replicas_come_from_the_filters_paths_summed_or_the_kinds_field() {
        let obj = serde_json::json!({"spec": {"replicas": 6, "parallelism": 2,
            "pools": [{"size": 3}, {"size": 4}]}});
        assert_eq!(workload_replicas("CloneSet", &obj, None), Ok(6));
        assert_eq!(workload_replicas("Job", &obj, None), Ok(2));
        assert_eq!(
            workload_replicas("Job", &serde_json::json!({}), None),
            Ok(1)
        );
        let filter = TargetFilter {
            replicas_path_list: vec!["spec.pools.0.size".into(), "spec.pools.1.size".into()],
            ..Default::default()
        };
        assert_eq!(workload_replicas("CloneSet", &obj, Some(&filter)), Ok(7));
        let bad = TargetFilter {
            replicas_path_list: vec!["spec.nope".into()],
            ..Default::default()
        };
        assert_eq!(
            workload_replicas("CloneSet", &obj, Some(&bad)),
            Err(ReplicasPathError::Missing("spec.nope".into()))
        );
    }

    #[test]
    fn a_filter_selects_by_its_selector_and_none_without_one() {
        let labels: BTreeMap<String, String> = [("role".to_owned(), "web".to_owned())].into();
        assert!(selects(None, Some(&labels)));
        assert!(!selects(Some(&TargetFilter::default()), Some(&labels)));
        let web = TargetFilter {
            selector: Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                    match_labels: Some([("role".to_owned(), "web".to_owned())].into()),
                    ..Default::default()
                },
            ),
            ..Default::default()
        };
        assert!(selects(Some(&web), Some(&labels)));
        assert!(!selects(Some(&web), None));
    }
}
