//! BroadcastJob, apps.kruise.io/v1beta1 (the storage version): one Pod run to completion on
//! every eligible node. v1alpha1 has the same JSON (upstream serves both without a conversion
//! webhook); its root kind is in `v1alpha1::broadcastjob` and reuses the nested types here.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::imagepulljob::{CompletionPolicy, CompletionPolicyType};

/// Desired state of a BroadcastJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
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

/// `spec.failurePolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// Continue, FailFast (the default) or Pause.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<FailurePolicyType>,
    /// Restarts of an OnFailure Pod (all its containers together) before it counts as failed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub restart_limit: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// `spec.failurePolicy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicyType {
    /// Failed Pods are counted; the job goes on.
    Continue,
    /// The first failed Pod fails the job (upstream's default).
    #[default]
    FailFast,
    /// The first failed Pod pauses the job (`spec.paused` is set).
    Pause,
}

/// Observed state of a BroadcastJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobStatus {
    /// `Complete` or `Failed` once the job has finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<JobCondition>,
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Pods running (or pending).
    #[serde(default)]
    pub active: i32,
    /// Pods that reached phase Succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// Pods that failed (phase Failed, or past `restartLimit`).
    #[serde(default)]
    pub failed: i32,
    /// Nodes the job should run a Pod on.
    #[serde(default)]
    pub desired: i32,
    /// running, paused, completed or failed.
    #[serde(default)]
    pub phase: BroadcastJobPhase,
}

/// `status.phase` (upstream's lower-case words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BroadcastJobPhase {
    /// Not reconciled yet.
    #[default]
    #[serde(rename = "")]
    Unset,
    /// Every desired node ran its Pod to an end.
    Completed,
    /// Pods are being created or run.
    Running,
    /// `spec.paused` is set.
    Paused,
    /// A Pod failed under FailFast, or the deadline passed.
    Failed,
}

/// A condition of a finished job.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// Complete or Failed.
    #[serde(rename = "type")]
    pub type_: JobConditionType,
    /// True, False or Unknown.
    pub status: String,
    /// Last time the condition was probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// Last time the condition changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// One word on why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A sentence on why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Condition types of a BroadcastJob.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum JobConditionType {
    /// The job completed.
    #[default]
    Complete,
    /// The job failed.
    Failed,
}

impl BroadcastJobSpec {
    /// `completionPolicy.type`, Always when unset.
    pub fn completion_type(&self) -> CompletionPolicyType {
        self.completion_policy.type_.unwrap_or_default()
    }

    /// `failurePolicy.type`, FailFast when unset.
    pub fn failure_type(&self) -> FailurePolicyType {
        self.failure_policy.type_.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstream_json_round_trips() {
        let v = json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
            "metadata": {"name": "j", "namespace": "d"},
            "spec": {"parallelism": "50%", "paused": true,
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never"}},
                "completionPolicy": {"type": "Never"},
                "failurePolicy": {"type": "Pause", "restartLimit": 3}},
            "status": {"active": 1, "succeeded": 2, "failed": 0, "desired": 3, "phase": "paused",
                "conditions": [{"type": "Complete", "status": "True", "reason": "r"}]}
        });
        let j: BroadcastJob = serde_json::from_value(v.clone()).expect("decode");
        assert_eq!(j.spec.failure_type(), FailurePolicyType::Pause);
        assert_eq!(j.spec.completion_type(), CompletionPolicyType::Never);
        let st = j.status.as_ref().expect("status");
        assert_eq!(st.phase, BroadcastJobPhase::Paused);
        assert_eq!(serde_json::to_value(&j).expect("encode"), v);
        // Upstream writes an empty phase before the first reconcile.
        let s: BroadcastJobStatus = serde_json::from_value(
            json!({"active": 0, "succeeded": 0, "failed": 0, "desired": 0, "phase": ""}),
        )
        .expect("empty phase");
        assert_eq!(s.phase, BroadcastJobPhase::Unset);
    }
}
