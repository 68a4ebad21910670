//! UnitedDeployment, apps.kruise.io/v1beta1 (upstream `apis/apps/v1beta1/uniteddeployment_types.go`),
//! served (v1alpha1 is stored). Its spec is v1alpha1's but for `template.cloneSetTemplate.spec`, which
//! is a v1beta1 CloneSet spec here (master's shape; v1alpha1 holds a v1alpha1 one, as the
//! release and the CloneSets the controller creates). Its status has `updatedRevision` and per-subset `replicas` and
//! `partition` in `subsetStatuses` where v1alpha1 has `updateStatus` and `subsetReplicas`.
//!
//! The nested types both versions share are defined here; v1alpha1 re-exports them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorTerm, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CloneSetSpec, StatefulSetSpec};
use crate::serde_util::{is_zero_i32, is_zero_i64};

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
/// Subset condition (`subsetStatuses[].conditions`, Adaptive): `False` while Pods of the subset
/// are expected to stay pending, so its replicas go to the other subsets.
pub const UD_SUBSET_CONDITION_SCHEDULABLE: &str = "Schedulable";
/// Reason of `Schedulable=False`: Pods of the subset stayed unschedulable too long.
pub const UD_SUBSET_REASON_RESCHEDULE: &str = "reschedule";
/// Reason of `Schedulable=True` once `unschedulableDuration` has passed.
pub const UD_SUBSET_REASON_RECOVER: &str = "recover";
/// Reason of `Schedulable=False` on a subset added to a UnitedDeployment that reserves
/// unschedulable Pods (its first Pods are reserved until they run).
pub const UD_SUBSET_REASON_CREATED: &str = "created";
/// Pod label (`"true"`/`"false"`) of a UnitedDeployment reserving unschedulable Pods: `true`
/// on a Pod kept in an unschedulable subset while a temporary one runs elsewhere.
pub const UD_RESERVED_POD_LABEL: &str = "apps.kruise.io/united-deployment-reserved-pod";
/// Default of `adaptive.rescheduleCriticalSeconds`.
pub const UD_DEFAULT_RESCHEDULE_CRITICAL_SECONDS: i32 = 30;
/// Default of `adaptive.unschedulableDuration` (seconds).
pub const UD_DEFAULT_UNSCHEDULABLE_DURATION_SECONDS: i32 = 300;

/// Desired state of a UnitedDeployment.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
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
/// templates.
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
    pub spec: StatefulSetSpec,
}

/// The template of a CloneSet, with a v1beta1 CloneSet spec.
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

    /// Whether `Adaptive` keeps unschedulable Pods (`adaptive.reserveUnschedulablePods`).
    pub fn should_reserve_unschedulable_pods(&self) -> bool {
        self.is_adaptive()
            && self
                .adaptive
                .as_ref()
                .is_some_and(|a| a.reserve_unschedulable_pods)
    }

    /// Seconds a Pod may stay unschedulable before its subset is marked so (default 30).
    pub fn reschedule_critical_seconds(&self) -> i64 {
        let s = self
            .adaptive
            .as_ref()
            .and_then(|a| a.reschedule_critical_seconds);
        i64::from(s.unwrap_or(UD_DEFAULT_RESCHEDULE_CRITICAL_SECONDS))
    }

    /// Seconds a subset stays marked unschedulable (default 300).
    pub fn unschedulable_duration_seconds(&self) -> i64 {
        let s = self
            .adaptive
            .as_ref()
            .and_then(|a| a.unschedulable_duration);
        i64::from(s.unwrap_or(UD_DEFAULT_UNSCHEDULABLE_DURATION_SECONDS))
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
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Ready Pods over all subsets.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub ready_replicas: i32,
    /// Pods over all subsets.
    #[serde(default)]
    pub replicas: i32,
    /// Pods at the update revision.
    #[serde(default)]
    pub updated_replicas: i32,
    /// Pods reserved by the Adaptive strategy.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub reserved_pods: i32,
    /// Ready Pods at the update revision.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_ready_replicas: i32,
    /// Bumped on a revision name collision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// The revision every Pod ran before the latest template change.
    #[serde(default)]
    pub current_revision: String,
    /// The latest revision (v1alpha1's `updateStatus.updatedRevision`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub updated_revision: String,
    /// Per subset: its target replicas, partition and what its workload reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subset_statuses: Vec<UnitedDeploymentSubsetStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<UnitedDeploymentCondition>,
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

/// What one subset's workload reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnitedDeploymentSubsetStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub ready_replicas: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub partition: i32,
    #[serde(default, skip_serializing_if = "is_zero_i32")]
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
