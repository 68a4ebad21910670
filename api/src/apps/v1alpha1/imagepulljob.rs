//! ImagePullJob and ImageListPullJob, apps.kruise.io/v1alpha1. Their JSON is the same as
//! v1beta1 (upstream converts without a webhook), so only the root kinds differ.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::apps::v1beta1::{
    CompletionPolicy, CompletionPolicyType, FailedImageStatus, ImageListPullJobStatus,
    ImagePullJobNodeSelector, ImagePullJobPodSelector, ImagePullJobStatus, ImagePullJobTemplate,
    ImagePullPolicy, PullPolicy, SandboxConfig,
};

/// Desired state of an ImagePullJob: one image pulled on a set of nodes.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
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
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"MESSAGE","type":"string","jsonPath":".status.message","description":"Summary of status when job is failed"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullJobSpec {
    /// Image to pull (`name[:tag]` or digest).
    pub image: String,
    /// Where and how to pull.
    #[serde(flatten)]
    pub template: ImagePullJobTemplate,
}

/// Desired state of an ImageListPullJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "ImageListPullJob",
    namespaced,
    status = "ImageListPullJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ImageListPullJob pulls a list of images, through one ImagePullJob per image.",
    printcolumn = r#"{"name":"TOTAL","type":"integer","jsonPath":".status.desired","description":"Number of image pull job"}"#,
    printcolumn = r#"{"name":"SUCCEEDED","type":"integer","jsonPath":".status.succeeded","description":"Number of image pull job succeeded"}"#,
    printcolumn = r#"{"name":"COMPLETED","type":"integer","jsonPath":".status.completed","description":"Number of ImagePullJobs which are finished"}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobSpec {
    /// Images to pull.
    pub images: Vec<String>,
    /// Where and how to pull, applied to every image.
    #[serde(flatten)]
    pub template: ImagePullJobTemplate,
}
