//! UnitedDeployment, apps.kruise.io/v1alpha1 (upstream `apis/apps/v1alpha1/uniteddeployment_types.go`):
//! one workload per subset of nodes (a CloneSet, Advanced StatefulSet, StatefulSet or
//! Deployment, from one template), with the total replicas split between the subsets and a
//! partition per subset.
//!
//! Beside the types: the replica count of an int-or-percent subset field
//! ([`parse_subset_replicas`], upstream `ParseSubsetReplicas`), which the webhook and the
//! controller both read.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::CloneSetSpec;
use crate::apps::v1beta1;

/// `updateStrategy.type`: partitions are set by hand per subset (the only type).
pub const UD_UPDATE_MANUAL: &str = "Manual";
/// `topology.scheduleStrategy.type`: Pods stay in their subset (the default).
pub const UD_SCHEDULE_FIXED: &str = "Fixed";
/// `topology.scheduleStrategy.type`: Pods a subset cannot schedule move to another subset.
pub const UD_SCHEDULE_ADAPTIVE: &str = "Adaptive";
/// Condition: every subset's workload exists and no stale one is left.
pub const UD_CONDITION_SUBSET_PROVISIONED: &str = "SubsetProvisioned";
/// Condition: every subset's workload was updated.
pub const UD_CONDITION_SUBSET_UPDATED: &str = "SubsetUpdated";
/// Condition: a subset's workload reports a failure.
pub const UD_CONDITION_SUBSET_FAILURE: &str = "SubsetFailure";
/// Condition: the current revision is the update revision.
pub const UD_CONDITION_UPDATED: &str = "UnitedDeploymentUpdated";

/// Desired state of a UnitedDeployment.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "UnitedDeployment",
    namespaced,
    status = "UnitedDeploymentStatus",
    shortname = "ud",
    derive = "PartialEq",
    derive = "Default",
    doc = "UnitedDeployment runs one workload per subset of nodes and splits the replicas between them.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn = r#"{"name":"DESIRED","type":"integer","jsonPath":".spec.replicas","description":"The desired number of pods."}"#,
    printcolumn = r#"{"name":"CURRENT","type":"integer","jsonPath":".status.replicas","description":"The number of currently all pods."}"#,
    printcolumn = r#"{"name":"UPDATED","type":"integer","jsonPath":".status.updatedReplicas","description":"The number of pods updated."}"#,
    printcolumn = r#"{"name":"READY","type":"integer","jsonPath":".status.readyReplicas","description":"The number of pods ready."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentSpec {
    /// Total Pods over all subsets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label query over Pods; must match the template's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The workload every subset runs (exactly one of the four).
    #[serde(default)]
    pub template: SubsetTemplate,
    /// The subsets and how Pods are placed between them.
    #[serde(default)]
    pub topology: Topology,
    /// How a template change rolls out.
    #[serde(default)]
    pub update_strategy: UnitedDeploymentUpdateStrategy,
    /// Old revisions to keep; defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
}

/// The workload of each subset: exactly one is set. Boxed: a template holds whole Pod
/// templates, and a UnitedDeployment is moved around in async reconciles.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubsetTemplate {
    /// An apps/v1 StatefulSet per subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stateful_set_template: Option<Box<K8sTemplateSpec>>,
    /// An Advanced StatefulSet per subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advanced_stateful_set_template: Option<Box<AdvancedStatefulSetTemplateSpec>>,
    /// A CloneSet per subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_set_template: Option<Box<CloneSetTemplateSpec>>,
    /// An apps/v1 Deployment per subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_template: Option<Box<K8sTemplateSpec>>,
}

/// The template of a Kubernetes workload (StatefulSet or Deployment), kept as the API server
/// sent it (upstream's schema is schemaless here too).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct K8sTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub spec: serde_json::Value,
}

/// The template of an Advanced StatefulSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AdvancedStatefulSetTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    pub spec: v1beta1::StatefulSetSpec,
}

/// The template of a CloneSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CloneSetTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    pub spec: CloneSetSpec,
}

/// How a template change rolls out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentUpdateStrategy {
    /// `Manual` (the default and only type).
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// The partitions of `Manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_update: Option<ManualUpdate>,
}

/// Partitions set by hand.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManualUpdate {
    /// Per subset name, the Pods to keep at the old revision.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub partitions: BTreeMap<String, i32>,
}

/// The subsets and how Pods are placed between them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// One workload per subset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subsets: Vec<Subset>,
    /// `Fixed` (default) or `Adaptive`.
    #[serde(
        default,
        skip_serializing_if = "UnitedDeploymentScheduleStrategy::is_empty"
    )]
    pub schedule_strategy: UnitedDeploymentScheduleStrategy,
}

/// One subset of nodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subset {
    /// A DNS label, unique among the subsets; the workload is named `<ud>-<subset>-…`.
    pub name: String,
    /// Nodes of the subset (added to the Pods' required node affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector_term: Option<NodeSelectorTerm>,
    /// Added to the Pods' tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Pods of the subset: a count or a percentage of `spec.replicas`; unset shares the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<IntOrString>,
    /// Fewest Pods of the subset (elastic allocation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<IntOrString>,
    /// Most Pods of the subset (elastic allocation); unset means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<IntOrString>,
    /// A strategic merge patch applied to the Pod template of the subset's workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub patch: Option<serde_json::Value>,
}

/// `Fixed` (default) or `Adaptive`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentScheduleStrategy {
    /// `Fixed`, `Adaptive` or empty (Fixed).
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Parameters of `Adaptive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveUnitedDeploymentStrategy>,
}

impl UnitedDeploymentScheduleStrategy {
    fn is_empty(&self) -> bool {
        self.type_.is_empty() && self.adaptive.is_none()
    }

    /// Whether the strategy is `Adaptive`.
    pub fn is_adaptive(&self) -> bool {
        self.type_ == UD_SCHEDULE_ADAPTIVE
    }
}

/// Parameters of the `Adaptive` strategy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdaptiveUnitedDeploymentStrategy {
    /// Seconds a Pod may stay unschedulable before it is moved (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reschedule_critical_seconds: Option<i32>,
    /// Seconds an unschedulable subset stays marked so (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable_duration: Option<i32>,
    /// Keep unschedulable Pods and run temporary ones elsewhere until they start.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reserve_unschedulable_pods: bool,
}

/// Observed state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentStatus {
    /// The generation this status reflects.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_zero_i64")]
    pub observed_generation: i64,
    /// Ready Pods over all subsets.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_zero_i32")]
    pub ready_replicas: i32,
    /// Pods over all subsets.
    #[serde(default)]
    pub replicas: i32,
    /// Pods at the update revision.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Pods reserved by the Adaptive strategy.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_zero_i32")]
    pub reserved_pods: i32,
    /// Ready Pods at the update revision.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_zero_i32")]
    pub updated_ready_replicas: i32,
    /// Bumped on a revision name collision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// The revision every Pod ran before the latest template change.
    #[serde(default)]
    pub current_revision: String,
    /// Per subset, the replicas its workload was given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub subset_replicas: BTreeMap<String, i32>,
    /// Per subset, what its workload reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subset_statuses: Vec<UnitedDeploymentSubsetStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<UnitedDeploymentCondition>,
    /// The update revision and the partitions passed down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_status: Option<UpdateStatus>,
    /// The selector as a string (for the scale subresource).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}

/// A condition of a UnitedDeployment.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentCondition {
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The update revision and the partitions passed down.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub updated_revision: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub current_partitions: BTreeMap<String, i32>,
}

/// What one subset's workload reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentSubsetStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "crate::serde_util::is_zero_i32")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "crate::serde_util::is_zero_i32")]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "crate::serde_util::is_zero_i32")]
    pub partition: i32,
    #[serde(default, skip_serializing_if = "crate::serde_util::is_zero_i32")]
    pub reserved_pods: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<UnitedDeploymentSubsetCondition>,
}

/// A condition of a subset (`Schedulable`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentSubsetCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Why a subset's replica field has no count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubsetReplicasError {
    #[error("subset replicas ({0}) should not be less than 0")]
    Negative(i32),
    #[error("subsetReplicas ({0}) should not be string when unitedDeployment replicas is empty")]
    PercentWithoutTotal(String),
    #[error(
        "subset replicas ({0}) only support integer value or percentage value with a suffix '%'"
    )]
    NotPercent(String),
    #[error("subset replicas ({0}) should be correct percentage integer")]
    BadPercent(String),
    #[error("subset replicas ({0}) should be in range [0, 100]")]
    OutOfRange(String),
}

/// The count an int-or-percent subset field stands for against the UnitedDeployment's
/// `replicas` (`-1` when unset): integers as they are, `N%` of the total rounded half up
/// (upstream `ParseSubsetReplicas`).
pub fn parse_subset_replicas(total: i32, v: &IntOrString) -> Result<i32, SubsetReplicasError> {
    match v {
        IntOrString::Int(i) if *i < 0 => Err(SubsetReplicasError::Negative(*i)),
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            if total < 0 {
                return Err(SubsetReplicasError::PercentWithoutTotal(s.clone()));
            }
            let Some(digits) = s.strip_suffix('%') else {
                return Err(SubsetReplicasError::NotPercent(s.clone()));
            };
            let percent: i64 = digits
                .parse()
                .map_err(|_| SubsetReplicasError::BadPercent(s.clone()))?;
            if !(0..=100).contains(&percent) {
                return Err(SubsetReplicasError::OutOfRange(s.clone()));
            }
            let v = (f64::from(total) * percent as f64 / 100.0 + 0.5).floor();
            // At most `total`, so it fits.
            Ok(v as i32)
        }
    }
}

impl UnitedDeployment {
    /// The kind of workload the template asks for, when exactly one template is set.
    pub fn subset_kind(&self) -> Option<SubsetKind> {
        let t = &self.spec.template;
        let kinds = [
            t.stateful_set_template
                .as_ref()
                .map(|_| SubsetKind::StatefulSet),
            t.advanced_stateful_set_template
                .as_ref()
                .map(|_| SubsetKind::AdvancedStatefulSet),
            t.clone_set_template.as_ref().map(|_| SubsetKind::CloneSet),
            t.deployment_template
                .as_ref()
                .map(|_| SubsetKind::Deployment),
        ];
        let mut set = kinds.into_iter().flatten();
        match (set.next(), set.next()) {
            (Some(k), None) => Some(k),
            _ => None,
        }
    }
}

/// The workload kinds a subset can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubsetKind {
    StatefulSet,
    AdvancedStatefulSet,
    CloneSet,
    Deployment,
}

impl SubsetKind {
    /// All four, in upstream's order of precedence.
    pub const ALL: [SubsetKind; 4] = [
        SubsetKind::StatefulSet,
        SubsetKind::AdvancedStatefulSet,
        SubsetKind::CloneSet,
        SubsetKind::Deployment,
    ];

    /// `(group, version, kind, plural)` of the workload.
    pub fn gvk(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            SubsetKind::StatefulSet => ("apps", "v1", "StatefulSet", "statefulsets"),
            SubsetKind::AdvancedStatefulSet => {
                ("apps.kruise.io", "v1beta1", "StatefulSet", "statefulsets")
            }
            SubsetKind::CloneSet => ("apps.kruise.io", "v1alpha1", "CloneSet", "clonesets"),
            SubsetKind::Deployment => ("apps", "v1", "Deployment", "deployments"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_half_up() {
        let p = |s: &str| IntOrString::String(s.into());
        assert_eq!(parse_subset_replicas(3, &p("25%")), Ok(1));
        assert_eq!(parse_subset_replicas(1, &p("25%")), Ok(0));
        assert_eq!(parse_subset_replicas(2, &p("25%")), Ok(1));
        assert_eq!(parse_subset_replicas(10, &p("100%")), Ok(10));
        assert_eq!(parse_subset_replicas(10, &IntOrString::Int(4)), Ok(4));
        assert!(parse_subset_replicas(10, &p("101%")).is_err());
        assert!(parse_subset_replicas(10, &p("5")).is_err());
        assert!(parse_subset_replicas(-1, &p("5%")).is_err());
        assert!(parse_subset_replicas(10, &IntOrString::Int(-1)).is_err());
    }

    #[test]
    fn exactly_one_template_names_the_kind() {
        let mut ud = UnitedDeployment::new("a", UnitedDeploymentSpec::default());
        assert_eq!(ud.subset_kind(), None);
        ud.spec.template.deployment_template = Some(Box::default());
        assert_eq!(ud.subset_kind(), Some(SubsetKind::Deployment));
        ud.spec.template.clone_set_template = Some(Box::default());
        assert_eq!(ud.subset_kind(), None);
    }
}
