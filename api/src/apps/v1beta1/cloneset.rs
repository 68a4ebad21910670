//! CloneSet, apps.kruise.io/v1beta1 (served, never stored: v1alpha1 is, as OpenKruise v1.9.0).

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::{
    InPlaceUpdateStrategy, Lifecycle, UpdatePriorityStrategy, UpdateScatterStrategy,
};
use crate::serde_util::{is_false, is_zero_i32, is_zero_i64};

/// Desired state of a CloneSet.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
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
    /// Reuse a deleted pod's PVCs for its replacement; default false (v1alpha1 has the
    /// inverse, `disablePVCReuse`).
    // Upstream sets a CRD default here so objects converted from v1alpha1 stay explicit.
    #[serde(rename = "enablePVCReuse", default, skip_serializing_if = "is_false")]
    #[schemars(extend("default" = false))]
    pub enable_pvc_reuse: bool,
    /// Count replicas without pods in PreparingDelete.
    #[serde(default, skip_serializing_if = "is_false")]
    pub exclude_preparing_delete: bool,
}

/// How pods are updated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetUpdateStrategy {
    /// RollingUpdate (default) or OnDelete.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<CloneSetUpdateStrategyType>,
    /// Parameters of a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateCloneSetStrategy>,
}

/// `updateStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum CloneSetUpdateStrategyType {
    /// The controller updates pods.
    #[default]
    RollingUpdate,
    /// Pods are updated only when someone deletes them.
    OnDelete,
}

/// Parameters of a rolling update.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateCloneSetStrategy {
    /// Pods to keep at old revisions: number or percentage (rounded up); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Most unavailable pods during update; default 20%.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Most pods above replicas during update; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// ReCreate (default), InPlaceIfPossible or InPlaceOnly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_update_policy: Option<CloneSetPodUpdateStrategyType>,
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

/// `rollingUpdate.podUpdatePolicy`: how one pod is updated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum CloneSetPodUpdateStrategyType {
    /// Delete the pod and create a new one.
    #[default]
    ReCreate,
    /// Update in place when only in-place-able fields changed, else recreate.
    InPlaceIfPossible,
    /// Only update in place; other changes are an error.
    InPlaceOnly,
}

/// Observed state of a CloneSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetStatus {
    /// Generation last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Pods owned.
    pub replicas: i32,
    /// Pods ready.
    pub ready_replicas: i32,
    /// Pods ready for minReadySeconds.
    pub available_replicas: i32,
    /// Pods at updateRevision.
    pub updated_replicas: i32,
    /// Pods at updateRevision and ready.
    pub updated_ready_replicas: i32,
    /// Pods at updateRevision and available.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_available_replicas: i32,
    /// Pods that should be at updateRevision: replicas minus partition.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub expected_updated_replicas: i32,
    /// Latest revision name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// Revision all pods were at when last fully updated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// Hash collisions met while naming revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CloneSetCondition>,
    /// Selector in string form, for the scale subresource (HPA).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
}

/// A CloneSet condition: FailedScale, FailedUpdate or Progressing.
// `type` and `reason` are strings (values in `keys::CLONESET_CONDITION_*` / `CLONESET_REASON_*`)
// so a condition written by another controller version never breaks decoding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// Last update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Last status change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
