//! EphemeralJob, apps.kruise.io/v1alpha1 only (upstream
//! `apis/apps/v1alpha1/ephemeraljob_types.go`): ephemeral containers injected into the running
//! Pods a selector picks, through the `pods/ephemeralcontainers` subresource, and followed to
//! their end.
//!
//! Beside the types, the wire formats the controller, the webhook and the plugin share: the
//! phase and condition words, the condition reasons and messages (upstream's), and the env var
//! that marks an injected container as the job's ([`owns`]).

use k8s_openapi::api::core::v1::EphemeralContainer;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::keys;

/// Desired state of an EphemeralJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "EphemeralJob",
    namespaced,
    shortname = "ejob",
    status = "EphemeralJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "EphemeralJob injects ephemeral containers into the Pods its selector matches and follows them to their end.",
    printcolumn = r#"{"name":"STATUS","type":"string","jsonPath":".status.phase","description":"The status of ephemeral job"}"#,
    printcolumn = r#"{"name":"MATCH","type":"integer","jsonPath":".status.match","description":"Number of ephemeral container matched by this job"}"#,
    printcolumn = r#"{"name":"SUCCEED","type":"integer","jsonPath":".status.succeeded","description":"Number of succeed ephemeral containers"}"#,
    printcolumn = r#"{"name":"FAILED","type":"integer","jsonPath":".status.failed","description":"Number of failed ephemeral containers"}"#,
    printcolumn = r#"{"name":"RUNNING","type":"integer","jsonPath":".status.running","description":"Number of running ephemeral containers"}"#,
    printcolumn = r#"{"name":"WAITING","type":"integer","jsonPath":".status.waiting","description":"Number of waiting ephemeral containers"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobSpec {
    /// The Pods (in the job's namespace) to inject into.
    pub selector: LabelSelector,
    /// How many of the matched Pods (oldest first) to inject into; all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Most Pods whose injected containers have not ended yet; 1 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,
    /// The ephemeral containers to inject.
    pub template: EphemeralContainerTemplateSpec,
    /// No new injections while set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Seconds after `status.startTime` at which an unfinished job fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion at which the job is deleted; 1800 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// `spec.template`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralContainerTemplateSpec {
    /// The containers, as in a Pod's `spec.ephemeralContainers` (schemaless in the CRD, as
    /// upstream; the webhook validates them).
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub ephemeral_containers: Vec<EphemeralContainer>,
}

/// Observed state of an EphemeralJob. The counts are of target Pods (upstream's JSON names;
/// written even when zero).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<EphemeralJobCondition>,
    /// When the controller first saw the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished (its TTL counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    #[serde(default)]
    pub phase: EphemeralJobPhase,
    /// Target Pods: matched, active, without a foreign container of the same name, at most
    /// `replicas`.
    #[serde(rename = "match", default)]
    pub matches: i32,
    /// Target Pods with an injected container running.
    #[serde(default)]
    pub running: i32,
    /// Target Pods whose injected containers all exited 0.
    #[serde(default)]
    pub succeeded: i32,
    /// Target Pods with an injected container waiting to start.
    #[serde(default)]
    pub waiting: i32,
    /// Target Pods with an injected container that failed.
    #[serde(default)]
    pub failed: i32,
}

/// `status.phase` (upstream's words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum EphemeralJobPhase {
    /// Not reconciled yet (upstream writes an empty phase).
    #[default]
    #[serde(rename = "")]
    Unset,
    /// Every target's containers exited 0.
    Succeeded,
    /// Targets ended with a failed container, or the deadline passed.
    Failed,
    /// No target yet, or every target's containers are waiting.
    Waiting,
    /// A target's container runs.
    Running,
    /// `spec.paused` is set.
    Paused,
    /// The template has no container.
    Error,
    /// Anything else (targets not injected yet).
    Unknown,
}

impl EphemeralJobPhase {
    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unset => "",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
            Self::Waiting => "Waiting",
            Self::Running => "Running",
            Self::Paused => "Paused",
            Self::Error => "Error",
            Self::Unknown => "Unknown",
        }
    }
}

/// A condition of an EphemeralJob (upstream keeps each type once, status True).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralJobCondition {
    #[serde(rename = "type")]
    pub type_: EphemeralJobConditionType,
    /// True, False or Unknown.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Condition types of an EphemeralJob (upstream's words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum EphemeralJobConditionType {
    /// The controller has seen the job.
    #[default]
    Initialized,
    /// Every target's containers exited 0.
    JobSucceeded,
    /// A container failed, or the deadline passed.
    JobFailed,
    /// The spec cannot run (no container in the template).
    JobError,
    /// The selector matches no Pod.
    MatchedEmpty,
}

/// Condition reasons and messages, upstream's words.
pub mod reasons {
    /// Reason of `Initialized`.
    pub const INITIALIZED: &str = "Initialized";
    /// Reason of `MatchedEmpty`.
    pub const MATCH_EMPTY: &str = "MatchEmpty";
    /// Message of `MatchedEmpty`.
    pub const MATCH_EMPTY_MESSAGE: &str = "job match no pods";
    /// Reason of `JobSucceeded`.
    pub const JOB_SUCCEEDED: &str = "JobSucceeded";
    /// Message of `JobSucceeded`.
    pub const JOB_SUCCEEDED_MESSAGE: &str = "job success to run all tasks";
    /// Reason of `JobFailed` when every target failed.
    pub const JOB_FAILED: &str = "JobFailed";
    /// Message of `JobFailed` when every target failed.
    pub const JOB_FAILED_MESSAGE: &str = "job failed to run all tasks";
    /// Reason of `JobFailed` once any target failed; also the Event reason of a refused
    /// injection.
    pub const CREATE_FAILED: &str = "CreateFailed";
    /// Reason of `JobFailed` when `activeDeadlineSeconds` passed.
    pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
    /// Reason of `JobError`.
    pub const ERROR: &str = "Error";
    /// Message of `JobError`.
    pub const ERROR_MESSAGE: &str = "job spec invalid fields.";
    /// Event reason (Kruise-rs): a target Pod already has a container with a name the template
    /// uses, not injected by this job; the Pod is left out.
    pub const NAME_CONFLICT: &str = "EphemeralContainerNameConflict";
    /// Event reason of a successful injection (Kruise-rs; upstream only logs it).
    pub const INJECTED: &str = "Injected";

    /// Message of `JobFailed` with [`CREATE_FAILED`].
    pub fn create_failed_message(ns: &str, name: &str) -> String {
        format!("EphemeralJob {ns}/{name} failed to create ephemeral container")
    }

    /// Message of `JobFailed` with [`DEADLINE_EXCEEDED`].
    pub fn deadline_message(ns: &str, name: &str) -> String {
        format!("EphemeralJob {ns}/{name} was active longer than specified deadline")
    }
}

/// `parallelism` when unset (upstream's `defaultParallelism`).
pub const DEFAULT_PARALLELISM: i32 = 1;
/// `ttlSecondsAfterFinished` when unset (upstream's).
pub const DEFAULT_TTL_SECONDS_AFTER_FINISHED: i32 = 1800;

/// Whether `container` was injected by the job with `job_uid`: it carries
/// [`keys::EPHEMERALJOB_ID_ENV`] with that UID (upstream `isCreatedByEJob`).
pub fn owns(job_uid: &str, container: &EphemeralContainer) -> bool {
    container
        .env
        .iter()
        .flatten()
        .any(|e| e.name == keys::EPHEMERALJOB_ID_ENV && e.value.as_deref() == Some(job_uid))
}

/// The template's container as injected by the job with `job_uid`: the template plus
/// [`keys::EPHEMERALJOB_ID_ENV`] (upstream `CreateEphemeralContainer`).
pub fn injected(job_uid: &str, template: &EphemeralContainer) -> EphemeralContainer {
    let mut c = template.clone();
    c.env
        .get_or_insert_with(Vec::new)
        .push(k8s_openapi::api::core::v1::EnvVar {
            name: keys::EPHEMERALJOB_ID_ENV.to_owned(),
            value: Some(job_uid.to_owned()),
            value_from: None,
        });
    c
}

impl EphemeralJobSpec {
    /// `parallelism`, 1 when unset.
    pub fn parallelism(&self) -> i32 {
        self.parallelism.unwrap_or(DEFAULT_PARALLELISM)
    }

    /// `ttlSecondsAfterFinished`, 1800 when unset.
    pub fn ttl_seconds_after_finished(&self) -> i32 {
        self.ttl_seconds_after_finished
            .unwrap_or(DEFAULT_TTL_SECONDS_AFTER_FINISHED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstream_json_round_trips() {
        let v = json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "EphemeralJob",
            "metadata": {"name": "e", "namespace": "d"},
            "spec": {"selector": {"matchLabels": {"run": "nginx"}}, "replicas": 2,
                "parallelism": 1, "paused": true, "activeDeadlineSeconds": 20,
                "ttlSecondsAfterFinished": 5,
                "template": {"ephemeralContainers": [{"name": "debugger", "image": "busybox",
                    "targetContainerName": "nginx", "imagePullPolicy": "IfNotPresent",
                    "terminationMessagePolicy": "File", "command": ["sleep", "3"]}]}},
            "status": {"phase": "Running", "match": 2, "running": 1, "succeeded": 1,
                "waiting": 0, "failed": 0, "startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Initialized", "status": "True", "reason": "Initialized"}]}
        });
        let j: EphemeralJob = serde_json::from_value(v.clone()).expect("decode");
        assert_eq!(j.spec.parallelism(), 1);
        let st = j.status.as_ref().expect("status");
        assert_eq!((st.phase, st.matches), (EphemeralJobPhase::Running, 2));
        assert_eq!(serde_json::to_value(&j).expect("encode"), v);
        let empty: EphemeralJobStatus =
            serde_json::from_value(json!({"phase": ""})).expect("unset");
        assert_eq!(empty.phase, EphemeralJobPhase::Unset);
    }

    #[test]
    fn injected_containers_are_recognised_by_uid() {
        let tpl: EphemeralContainer = serde_json::from_value(
            json!({"name": "d", "image": "i", "env": [{"name": "A", "value": "1"}]}),
        )
        .expect("container");
        let c = injected("uid-1", &tpl);
        assert!(owns("uid-1", &c));
        assert!(!owns("uid-2", &c));
        assert!(!owns("uid-1", &tpl));
        assert_eq!(
            c.env.as_ref().map(Vec::len),
            Some(2),
            "the template's env kept"
        );
    }
}
