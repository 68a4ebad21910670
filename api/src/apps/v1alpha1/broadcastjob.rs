//! BroadcastJob, apps.kruise.io/v1alpha1. Its JSON is the same as v1beta1's (upstream converts
//! without a webhook), so only the root kind differs.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps::v1beta1::CompletionPolicy;
pub use crate::apps::v1beta1::{
    BroadcastJobPhase, BroadcastJobStatus, FailurePolicy, FailurePolicyType, JobCondition,
    JobConditionType,
};

/// Desired state of a BroadcastJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "BroadcastJob",
    namespaced,
    shortname = "bcj",
    status = "BroadcastJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "BroadcastJob runs a Pod to completion on every eligible node.",
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".status.desired","description":"The desired number of pods. This is typically equal to the number of nodes satisfied to run pods."}"#,
    printcolumn = r#"{"name":"Active","type":"integer","jsonPath":".status.active","description":"The number of actively running pods."}"#,
    printcolumn = r#"{"name":"Succeeded","type":"integer","jsonPath":".status.succeeded","description":"The number of pods which reached phase Succeeded."}"#,
    printcolumn = r#"{"name":"Failed","type":"integer","jsonPath":".status.failed","description":"The number of pods which reached phase Failed."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobSpec {
    /// Most Pods running at once (an integer or a percentage of the desired nodes); unset
    /// means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<IntOrString>,
    /// The Pod run on each node.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// When the job ends (Always, the default) or not (Never).
    #[serde(default)]
    pub completion_policy: CompletionPolicy,
    /// No new Pods while set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// What a failed Pod does to the job.
    #[serde(default)]
    pub failure_policy: FailurePolicy,
}
