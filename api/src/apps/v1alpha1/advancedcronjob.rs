//! AdvancedCronJob, apps.kruise.io/v1alpha1. Its JSON is v1beta1's less
//! `template.imageListPullJobTemplate` (upstream converts without a webhook), so only the root
//! kind and the template differ.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::apps::v1beta1::{
    AdvancedCronJobStatus, BroadcastJobTemplateSpec, ConcurrencyPolicy, TemplateKind,
};

/// Desired state of an AdvancedCronJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "AdvancedCronJob",
    namespaced,
    shortname = "acj",
    status = "AdvancedCronJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "AdvancedCronJob creates a Job or BroadcastJob on a cron schedule.",
    printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule","description":"The schedule of advanced cron job."}"#,
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".status.type","description":"Type of cron job."}"#,
    printcolumn = r#"{"name":"LastScheduleTime","type":"date","jsonPath":".status.lastScheduleTime","description":"The last time at which job was scheduled."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobSpec {
    /// The schedule (robfig/cron's standard syntax).
    pub schedule: String,
    /// IANA time zone of the schedule; unset means the manager's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// A run later than this many seconds after its schedule point is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
    /// Allow (the default), Forbid or Replace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_policy: Option<ConcurrencyPolicy>,
    /// No new runs while set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Successful finished runs kept (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<i32>,
    /// Failed finished runs kept (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<i32>,
    /// What each run creates: exactly one of the templates.
    pub template: CronJobTemplate,
}

/// `spec.template` of v1alpha1: a Job or a BroadcastJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CronJobTemplate {
    /// A batch/v1 Job per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub job_template: Option<JobTemplateSpec>,
    /// A BroadcastJob per run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast_job_template: Option<BroadcastJobTemplateSpec>,
}
