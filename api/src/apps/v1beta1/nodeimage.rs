//! NodeImage, apps.kruise.io/v1beta1: cluster-scoped, one per node (named after it); the list
//! of images the node's daemon should pull, and how that went.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ImagePullPolicy, SandboxConfig};
use crate::serde_util::{is_zero_i32, is_zero_i64, null_as_default};

/// Images a node should pull, by image name (without tag).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "NodeImage",
    status = "NodeImageStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "NodeImage lists the images one node should pull; its name is the node's name.",
    printcolumn = r#"{"name":"DESIRED","type":"integer","jsonPath":".status.desired","description":"Number of all images on this node"}"#,
    printcolumn = r#"{"name":"PULLING","type":"integer","jsonPath":".status.pulling","description":"Number of image pull task active"}"#,
    printcolumn = r#"{"name":"SUCCEED","type":"integer","jsonPath":".status.succeeded","description":"Number of image pull task succeeded"}"#,
    printcolumn = r#"{"name":"FAILED","type":"integer","jsonPath":".status.failed","description":"Number of image pull tasks failed"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeImageSpec {
    /// Images to pull, keyed by image name; at most 256.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub images: BTreeMap<String, ImageSpec>,
}

/// How to pull one image and which tags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSpec {
    /// Pull secrets (copies in kruise-daemon-config).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pull_secrets: Vec<ReferenceObject>,
    /// Tags to pull.
    #[serde(deserialize_with = "null_as_default")]
    pub tags: Vec<ImageTagSpec>,
    /// Labels/annotations passed to the CRI PullImage sandbox config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_config: Option<SandboxConfig>,
}

/// A namespaced object reference, written `namespace/name`.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceObject {
    /// Namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// "batch" for secrets shared by many jobs, cleaned up with the image entry; empty for
    /// the older one-copy-per-job secrets.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
}

impl ReferenceObject {
    /// `mode` of secrets synced once and shared by every job that uses them.
    pub const MODE_BATCH: &'static str = "batch";

    /// Parses `namespace/name` (or a bare `name`).
    pub fn parse(s: &str) -> Self {
        match s.split_once('/') {
            Some((namespace, name)) => Self {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                mode: String::new(),
            },
            None => Self {
                name: s.to_owned(),
                ..Self::default()
            },
        }
    }
}

impl std::fmt::Display for ReferenceObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// One tag to pull.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagSpec {
    /// The tag.
    pub tag: String,
    /// When the tag was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<Time>,
    /// Timeout, retries and lifetime of the pull.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_policy: Option<ImageTagPullPolicy>,
    /// Objects (ImagePullJobs) that want this tag.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<ObjectReference>,
    /// Bumped to ask for a re-pull; the daemon echoes it in status.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub version: i64,
    /// Always or IfNotPresent (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
}

/// Limits of one tag's pull.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagPullPolicy {
    /// Seconds before one pull attempt fails; default 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Retries before the tag is marked failed; default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Seconds after the pull finished before the entry may be removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Seconds after start before the pull is abandoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
}

/// What the node's daemon reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeImageStatus {
    /// Tags wanted.
    pub desired: i32,
    /// Tags pulled.
    #[serde(default)]
    pub succeeded: i32,
    /// Tags failed.
    #[serde(default)]
    pub failed: i32,
    /// Tags being pulled.
    #[serde(default)]
    pub pulling: i32,
    /// Tags waiting.
    #[serde(default)]
    pub waiting: i32,
    /// Per-image pull status, keyed by image name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub image_statuses: BTreeMap<String, ImageStatus>,
    /// When the node first finished all its pulls (lets other systems wait for a new node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sync_status: Option<SyncStatus>,
}

/// Pull status of one image's tags.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// One entry per tag.
    #[serde(deserialize_with = "null_as_default")]
    pub tags: Vec<ImageTagStatus>,
}

/// Pull status of one tag.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagStatus {
    /// The tag.
    pub tag: String,
    /// Waiting, Pulling, Succeeded or Failed.
    pub phase: ImagePullPhase,
    /// 0–100; may go back on retry.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub progress: i32,
    /// When the pull started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the pull finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The spec `version` this status is for.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub version: i64,
    /// Image ID after the pull.
    #[serde(rename = "imageID", default, skip_serializing_if = "String::is_empty")]
    pub image_id: String,
    /// Summary for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Phase of one tag's pull.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ImagePullPhase {
    /// Not started.
    #[default]
    Waiting,
    /// Started, not finished.
    Pulling,
    /// Pulled.
    Succeeded,
    /// Gave up.
    Failed,
}

/// Summary of all pulls on the node.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    /// When it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_at: Option<Time>,
    /// Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SyncStatusPhase>,
    /// Summary for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Outcome of a node's first sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SyncStatusPhase {
    /// Every pull succeeded.
    Succeeded,
    /// Some pull failed.
    Failed,
}
