//! ImageListPullJob, apps.kruise.io/v1beta1: one ImagePullJob per listed image.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ImagePullJobTemplate;

/// Desired state of an ImageListPullJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
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

/// Observed state of an ImageListPullJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobStatus {
    /// When the controller picked the job up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When every ImagePullJob finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// ImagePullJobs wanted (normally the number of images).
    pub desired: i32,
    /// ImagePullJobs running.
    #[serde(default)]
    pub active: i32,
    /// ImagePullJobs finished.
    #[serde(default)]
    pub completed: i32,
    /// ImagePullJobs finished with every node succeeded.
    #[serde(default)]
    pub succeeded: i32,
    /// ImagePullJobs with failed nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_image_statuses: Vec<FailedImageStatus>,
}

/// An ImagePullJob that had failed nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailedImageStatus {
    /// The ImagePullJob name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_job: String,
    /// The image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Summary for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
