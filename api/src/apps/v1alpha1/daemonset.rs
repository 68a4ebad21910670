//! Advanced DaemonSet (kind `DaemonSet`), apps.kruise.io/v1alpha1: served, converted to
//! v1beta1 for storage. Differs from v1beta1 in `rollingUpdate.partition` (an integer here) and
//! the status field naming the latest revision (`daemonSetHash` here, `updateRevision` there).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::Lifecycle;
use crate::serde_util::{is_zero_i32, is_zero_i64};

pub use crate::apps::v1beta1::{
    DaemonSetCondition, DaemonSetScaleStrategy, DaemonSetUpdateStrategyType, RollingUpdateType,
};

/// Desired state of an Advanced DaemonSet.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "DaemonSet",
    namespaced,
    status = "DaemonSetStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "daemon",
    shortname = "ads",
    doc = "DaemonSet (Advanced DaemonSet) runs one pod per eligible node and updates it in place when it can.",
    printcolumn = r#"{"name":"DESIRED","type":"integer","jsonPath":".status.desiredNumberScheduled","description":"The desired number of pods."}"#,
    printcolumn = r#"{"name":"CURRENT","type":"integer","jsonPath":".status.currentNumberScheduled","description":"The current number of pods."}"#,
    printcolumn = r#"{"name":"READY","type":"integer","jsonPath":".status.numberReady","description":"The ready number of pods."}"#,
    printcolumn = r#"{"name":"UP-TO-DATE","type":"integer","jsonPath":".status.updatedNumberScheduled","description":"The updated number of pods."}"#,
    printcolumn = r#"{"name":"AVAILABLE","type":"integer","jsonPath":".status.numberAvailable","description":"The available number of pods."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"CONTAINERS","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].name","description":"The containers of the advanced daemonset."}"#,
    printcolumn = r#"{"name":"IMAGES","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].image","description":"The images of the advanced daemonset."}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetSpec {
    /// Label query over pods; must match the template's labels.
    pub selector: LabelSelector,
    /// The pod created on every eligible node.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// How pods are replaced when the template changes.
    #[serde(default)]
    pub update_strategy: DaemonSetUpdateStrategy,
    /// Seconds a new pod must be ready to count as available.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    /// Most pods created or deleted in one sync: number or percentage of desired; default 250.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_replicas: Option<IntOrString>,
    /// Old revisions to keep; defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Pod lifecycle hooks (preDelete, inPlaceUpdate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// How pods are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<DaemonSetScaleStrategy>,
}

/// `updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetUpdateStrategy {
    /// RollingUpdate (default) or OnDelete.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<DaemonSetUpdateStrategyType>,
    /// Parameters of a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDaemonSet>,
}

/// Parameters of a rolling update.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateDaemonSet {
    /// Standard (default), Surging or InPlaceIfPossible.
    #[serde(
        rename = "rollingUpdateType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub type_: Option<RollingUpdateType>,
    /// Most nodes whose pod may be unavailable during the update; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Most nodes that may run a new pod next to the old one; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Only pods on nodes matching this selector are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Number of pods to keep at old revisions; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// Stop updating pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// Observed state of an Advanced DaemonSet (v1alpha1 field names).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetStatus {
    /// Nodes that should run the pod and run at least one.
    pub current_number_scheduled: i32,
    /// Nodes that run the pod but should not.
    pub number_misscheduled: i32,
    /// Nodes that should run the pod.
    pub desired_number_scheduled: i32,
    /// Nodes that should run the pod and run a ready one.
    pub number_ready: i32,
    /// Generation last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Nodes that run a pod of the latest revision.
    pub updated_number_scheduled: i32,
    /// Nodes that should run the pod and run an available one.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub number_available: i32,
    /// Nodes that should run the pod and run no available one.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub number_unavailable: i32,
    /// Hash collisions met while naming revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DaemonSetCondition>,
    /// Hash of the latest revision (the pods' `controller-revision-hash`).
    #[serde(default)]
    pub daemon_set_hash: String,
}
