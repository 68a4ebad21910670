//! CloneSet, apps.kruise.io/v1alpha1: the older, flat update strategy. The storage version, as
//! OpenKruise v1.9.0. The status has the same JSON as v1beta1.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::{
    InPlaceUpdateStrategy, Lifecycle, UpdatePriorityStrategy, UpdateScatterStrategy,
};
use crate::serde_util::{is_false, is_zero_i32};

pub use crate::apps::v1beta1::{CloneSetCondition, CloneSetStatus};

/// Desired state of a CloneSet.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "CloneSet",
    namespaced,
    status = "CloneSetStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "clone",
    doc = "CloneSet manages a set of pods that can be updated in place.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn = r#"{"name":"DESIRED","type":"integer","jsonPath":".spec.replicas","description":"The desired number of pods."}"#,
    printcolumn = r#"{"name":"UPDATED","type":"integer","jsonPath":".status.updatedReplicas","description":"The number of pods updated."}"#,
    printcolumn = r#"{"name":"UPDATED_READY","type":"integer","jsonPath":".status.updatedReadyReplicas","description":"The number of pods updated and ready."}"#,
    printcolumn = r#"{"name":"UPDATED_AVAILABLE","type":"integer","jsonPath":".status.updatedAvailableReplicas","description":"The number of pods updated and available."}"#,
    printcolumn = r#"{"name":"READY","type":"integer","jsonPath":".status.readyReplicas","description":"The number of pods ready."}"#,
    printcolumn = r#"{"name":"TOTAL","type":"integer","jsonPath":".status.replicas","description":"The number of currently all pods."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"CONTAINERS","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].name","description":"The containers of currently cloneset."}"#,
    printcolumn = r#"{"name":"IMAGES","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].image","description":"The images of currently cloneset."}"#,
    printcolumn = r#"{"name":"SELECTOR","type":"string","priority":1,"jsonPath":".status.labelSelector","description":"The selector of currently cloneset."}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetSpec {
    /// Desired number of pods; defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label query over pods; must match the template's labels.
    pub selector: LabelSelector,
    /// Pods to create.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// PVCs created per pod (deleted with the pod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    /// How pods are created and deleted.
    #[serde(default)]
    pub scale_strategy: CloneSetScaleStrategy,
    /// How pods are updated when the template changes.
    #[serde(default)]
    pub update_strategy: CloneSetUpdateStrategy,
    /// Old revisions to keep; defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Seconds a new pod must be ready to count as available.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    /// Pod lifecycle hooks (preNormal, preDelete, inPlaceUpdate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// Seconds a rollout may make no progress before Progressing=False (paused time excluded).
    /// Unset: progress is not tracked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_deadline_seconds: Option<i32>,
}

/// How pods are created and deleted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetScaleStrategy {
    /// Names of pods to delete; names of pods that no longer exist are dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods_to_delete: Vec<String>,
    /// Most unavailable new pods while scaling up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Do not reuse a deleted pod's PVCs for its replacement; default false (reuse).
    #[serde(rename = "disablePVCReuse", default, skip_serializing_if = "is_false")]
    pub disable_pvc_reuse: bool,
}

/// How pods are updated (flat in v1alpha1; v1beta1 nests most of this under `rollingUpdate`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetUpdateStrategy {
    /// ReCreate (default), InPlaceIfPossible, InPlaceOnly or OnDelete.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<CloneSetUpdateStrategyType>,
    /// Pods to keep at old revisions: number or percentage (rounded up); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Most unavailable pods during update; default 20%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Most pods above replicas during update; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Stop updating pods.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Order of pod updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    /// Labels whose pods are spread over batches (applied after priority).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: UpdateScatterStrategy,
    /// In-place update settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
}

/// `updateStrategy.type`: how pods are updated, or OnDelete.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum CloneSetUpdateStrategyType {
    /// Delete the pod and create a new one.
    #[default]
    ReCreate,
    /// Update in place when only in-place-able fields changed, else recreate.
    InPlaceIfPossible,
    /// Only update in place; other changes are an error.
    InPlaceOnly,
    /// Pods are updated only when someone deletes them.
    OnDelete,
}
