//! ImagePullJob, apps.kruise.io/v1beta1, and the pull-job template and policies it shares with
//! ImageListPullJob (and, unchanged, with v1alpha1).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of an ImagePullJob: one image pulled on a set of nodes.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "ImagePullJob",
    namespaced,
    status = "ImagePullJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ImagePullJob pulls an image on a set of nodes ahead of the pods that need it.",
    printcolumn = r#"{"name":"TOTAL","type":"integer","jsonPath":".status.desired","description":"Number of all nodes matched by this job"}"#,
    printcolumn = r#"{"name":"ACTIVE","type":"integer","jsonPath":".status.active","description":"Number of image pull task active"}"#,
    printcolumn = r#"{"name":"SUCCEED","type":"integer","jsonPath":".status.succeeded","description":"Number of image pull task succeeded"}"#,
    printcolumn = r#"{"name":"FAILED","type":"integer","jsonPath":".status.failed","description":"Number of image pull tasks failed"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobSpec {
    /// Image to pull (`name[:tag]` or digest).
    pub image: String,
    /// Where and how to pull.
    #[serde(flatten)]
    pub template: ImagePullJobTemplate,
}

/// Where and how to pull; inlined into the spec of ImagePullJob and ImageListPullJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobTemplate {
    /// Secrets in the job's namespace used to pull.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<String>,
    /// Nodes to pull on; unset means all nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<ImagePullJobNodeSelector>,
    /// Pull on the nodes of these pods; exclusive with `selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<ImagePullJobPodSelector>,
    /// Nodes pulling at once; default 1, 0 pauses the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<IntOrString>,
    /// Per-node timeout and retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<PullPolicy>,
    /// When the job ends.
    #[serde(default)]
    pub completion_policy: CompletionPolicy,
    /// Labels/annotations passed to the CRI PullImage sandbox config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_config: Option<SandboxConfig>,
    /// Always or IfNotPresent (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
}

/// When the daemon pulls an image that may already be present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ImagePullPolicy {
    /// Pull even if present, to pick up a moved tag.
    Always,
    /// Pull only when missing.
    #[default]
    IfNotPresent,
}

/// Metadata attached to the CRI PullImage call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxConfig {
    /// Sandbox labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Sandbox annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Limits of the pull on each node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PullPolicy {
    /// Seconds before one pull attempt fails; default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Retries before the node is marked failed; default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
}

/// Pods whose nodes pull the image. Go inlines a LabelSelector here; the fields are spelled
/// out so the CRD schema stays plain (see [`Self::label_selector`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct ImagePullJobPodSelector {
    /// Label requirements, ANDed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// Exact label matches, ANDed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// Nodes that pull the image: by name, by label, or both.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct ImagePullJobNodeSelector {
    /// Node names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// Label requirements, ANDed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// Exact label matches, ANDed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

fn to_label_selector(
    match_expressions: &[LabelSelectorRequirement],
    match_labels: &BTreeMap<String, String>,
) -> LabelSelector {
    LabelSelector {
        match_expressions: (!match_expressions.is_empty()).then(|| match_expressions.to_vec()),
        match_labels: (!match_labels.is_empty()).then(|| match_labels.clone()),
    }
}

impl ImagePullJobPodSelector {
    /// The inlined selector as a LabelSelector.
    pub fn label_selector(&self) -> LabelSelector {
        to_label_selector(&self.match_expressions, &self.match_labels)
    }
}

impl ImagePullJobNodeSelector {
    /// The inlined label part as a LabelSelector (names are separate).
    pub fn label_selector(&self) -> LabelSelector {
        to_label_selector(&self.match_expressions, &self.match_labels)
    }
}

/// When a job ends (shared with BroadcastJob upstream).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompletionPolicy {
    /// Always (default) or Never.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<CompletionPolicyType>,
    /// Seconds after start before the job is stopped (Always only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds after completion before the job is deleted (Always only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
}

/// `completionPolicy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum CompletionPolicyType {
    /// Finish once every target is done, or on deadline.
    #[default]
    Always,
    /// Keep running; new matching nodes keep being served.
    Never,
}

/// Observed state of an ImagePullJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobStatus {
    /// When the controller picked the job up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the job finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Nodes targeted.
    pub desired: i32,
    /// Nodes pulling now.
    #[serde(default)]
    pub active: i32,
    /// Nodes done.
    #[serde(default)]
    pub succeeded: i32,
    /// Nodes failed.
    #[serde(default)]
    pub failed: i32,
    /// Summary for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Nodes that failed to pull.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_nodes: Vec<String>,
}
