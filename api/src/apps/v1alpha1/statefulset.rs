//! Advanced StatefulSet, apps.kruise.io/v1alpha1: still served. Its JSON is a subset of
//! v1beta1's (no reserveOrdinals, lifecycle, scaleStrategy, PVC retention, ordinals or
//! volumeClaimUpdateStrategy; a shorter status), so nested types are re-exported from v1beta1.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::serde_util::is_zero_i64;

pub use crate::apps::v1beta1::{
    PodManagementPolicyType, PodUpdateStrategyType, RollingUpdateStatefulSetStrategy,
    StatefulSetCondition, StatefulSetUpdateStrategy, StatefulSetUpdateStrategyType,
    UnorderedUpdateStrategy,
};

/// Desired state of an Advanced StatefulSet.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "StatefulSet",
    namespaced,
    status = "StatefulSetStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "sts",
    shortname = "asts",
    doc = "StatefulSet is the Schema for the statefulsets API",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn = r#"{"name":"DESIRED","type":"integer","jsonPath":".spec.replicas","description":"The desired number of pods."}"#,
    printcolumn = r#"{"name":"CURRENT","type":"integer","jsonPath":".status.replicas","description":"The number of currently all pods."}"#,
    printcolumn = r#"{"name":"UPDATED","type":"integer","jsonPath":".status.updatedReplicas","description":"The number of pods updated."}"#,
    printcolumn = r#"{"name":"READY","type":"integer","jsonPath":".status.readyReplicas","description":"The number of pods ready."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp","description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC."}"#,
    printcolumn = r#"{"name":"CONTAINERS","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].name","description":"The containers of currently advanced statefulset."}"#,
    printcolumn = r#"{"name":"IMAGES","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].image","description":"The images of currently advanced statefulset."}"#
)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetSpec {
    /// Desired number of pods; defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label query over pods; must match the template's labels.
    pub selector: LabelSelector,
    /// Pods to create; each gets the identity `{name}-{ordinal}`.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// PVCs per pod, named `{claim}-{name}-{ordinal}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    /// Headless Service giving the pods their DNS names.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_name: String,
    /// OrderedReady (default) or Parallel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_management_policy: Option<PodManagementPolicyType>,
    /// How pods are updated when the template changes.
    #[serde(default)]
    pub update_strategy: StatefulSetUpdateStrategy,
    /// Old revisions to keep; defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
}

/// Observed state (v1alpha1 has no updatedReady/updatedAvailable counts nor volumeClaims).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetStatus {
    /// Generation last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Pods owned.
    pub replicas: i32,
    /// Pods with Ready=True.
    pub ready_replicas: i32,
    /// Pods ready for minReadySeconds.
    #[serde(default)]
    pub available_replicas: i32,
    /// Pods at currentRevision.
    pub current_replicas: i32,
    /// Pods at updateRevision.
    pub updated_replicas: i32,
    /// Revision all pods were at when last fully updated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// Latest revision name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// Hash collisions met while naming revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StatefulSetCondition>,
    /// Selector in string form, for the scale subresource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}
