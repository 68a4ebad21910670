//! UnitedDeployment, apps.kruise.io/v1alpha1 (upstream `apis/apps/v1alpha1/uniteddeployment_types.go`):
//! one workload per subset of nodes (a CloneSet, Advanced StatefulSet, StatefulSet or
//! Deployment, from one template), with the total replicas split between the subsets and a
//! partition per subset.
//!
//! Beside the types: the replica count of an int-or-percent subset field
//! ([`parse_subset_replicas`], upstream `ParseSubsetReplicas`), which the webhook and the
//! controller both read.
//!
//! v1beta1 (`crate::apps::v1beta1`; v1alpha1 is the storage version) holds the nested types both versions
//! share. This version's own are its status (`subsetReplicas`, `updateStatus`) and its
//! template: as in the v1.9.0 release, `cloneSetTemplate.spec` is a v1alpha1 CloneSet spec
//! (flat `updateStrategy.partition`, `scaleStrategy.disablePVCReuse`), where v1beta1 (master's
//! shape) has a v1beta1 one.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::CloneSetSpec;

// The nested types whose JSON is the same in both versions live with the storage version.
pub use crate::apps::v1beta1::{
    AdaptiveUnitedDeploymentStrategy, AdvancedStatefulSetTemplateSpec, K8sTemplateSpec,
    ManualUpdate, Subset, Topology, UD_CONDITION_SUBSET_FAILURE, UD_CONDITION_SUBSET_PROVISIONED,
    UD_CONDITION_SUBSET_UPDATED, UD_CONDITION_UPDATED, UD_DEFAULT_RESCHEDULE_CRITICAL_SECONDS,
    UD_DEFAULT_UNSCHEDULABLE_DURATION_SECONDS, UD_RESERVED_POD_LABEL, UD_SCHEDULE_ADAPTIVE,
    UD_SCHEDULE_FIXED, UD_SUBSET_CONDITION_SCHEDULABLE, UD_SUBSET_REASON_CREATED,
    UD_SUBSET_REASON_RECOVER, UD_SUBSET_REASON_RESCHEDULE, UD_UPDATE_MANUAL,
    UnitedDeploymentCondition, UnitedDeploymentScheduleStrategy, UnitedDeploymentSubsetCondition,
    UnitedDeploymentSubsetStatus, UnitedDeploymentUpdateStrategy,
};

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
    /// A (v1alpha1) CloneSet per subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_set_template: Option<Box<CloneSetTemplateSpec>>,
    /// An apps/v1 Deployment per subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_template: Option<Box<K8sTemplateSpec>>,
}

/// The template of a CloneSet, with a v1alpha1 CloneSet spec (upstream's v1.9.0
/// `CloneSetTemplateSpec`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CloneSetTemplateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    #[schemars(schema_with = "release_cloneset_spec")]
    #[serde(deserialize_with = "release_or_earlier_spec")]
    pub spec: CloneSetSpec,
}

/// `updateStrategy.type` of master's v1beta1 CloneSet spec, which earlier Kruise-rs builds kept
/// in this version's template: our schema keeps it in a stored object (the rest of that
/// strategy, `rollingUpdate`, it prunes), and it is no v1alpha1 type.
pub const EARLIER_TEMPLATE_UPDATE_TYPE: &str = "RollingUpdate";

/// A v1alpha1 CloneSet spec; an object stored by an earlier build with master's
/// `type: RollingUpdate` reads as an unset type (the default, `ReCreate`) rather than failing to
/// decode (which would stop every UnitedDeployment's watch). The manager restores the lost
/// strategy from the revision (`uniteddeployment::legacy`).
fn release_or_earlier_spec<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<CloneSetSpec, D::Error> {
    let mut v = serde_json::Value::deserialize(d)?;
    if let Some(us) = v
        .get_mut("updateStrategy")
        .and_then(serde_json::Value::as_object_mut)
        && us.get("type").and_then(serde_json::Value::as_str) == Some(EARLIER_TEMPLATE_UPDATE_TYPE)
    {
        us.remove("type");
    }
    serde_json::from_value(v).map_err(serde::de::Error::custom)
}

/// Master's `inPlaceUpdateStrategy.imagePreDownload*` fields, which the release's template
/// does not have (it reads the `apps.kruise.io/image-predownload-*` annotations of the
/// template's metadata, which the conversion from v1beta1 writes).
const MASTER_ONLY_TEMPLATE_FIELDS: [&str; 3] = [
    "imagePreDownloadParallelism",
    "imagePreDownloadTimeoutSeconds",
    "imagePreDownloadMinUpdatedReadyPods",
];

/// The v1alpha1 CloneSet spec's schema as the release's UnitedDeployment has it.
fn release_cloneset_spec(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = CloneSetSpec::json_schema(generator);
    strip_properties(schema.as_object_mut(), &MASTER_ONLY_TEMPLATE_FIELDS);
    schema
}

/// Removes the named properties wherever they appear in a schema.
fn strip_properties(obj: Option<&mut serde_json::Map<String, serde_json::Value>>, names: &[&str]) {
    let Some(obj) = obj else { return };
    if let Some(serde_json::Value::Object(props)) = obj.get_mut("properties") {
        for n in names {
            props.remove(*n);
        }
    }
    for v in obj.values_mut() {
        match v {
            serde_json::Value::Object(m) => strip_properties(Some(m), names),
            serde_json::Value::Array(a) => {
                for item in a {
                    strip_properties(item.as_object_mut(), names);
                }
            }
            _ => {}
        }
    }
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

/// The update revision and the partitions passed down.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub updated_revision: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub current_partitions: BTreeMap<String, i32>,
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
            // The release's adapter creates v1alpha1 CloneSets: the template holds that spec.
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
