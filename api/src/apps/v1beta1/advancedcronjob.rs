//! AdvancedCronJob, apps.kruise.io/v1beta1 (the storage version): a cron schedule that creates a
//! Job, a BroadcastJob or an ImageListPullJob at each point. v1alpha1 has the same JSON less
//! `imageListPullJobTemplate` (upstream serves both without a conversion webhook); its root kind
//! is in `v1alpha1::advancedcronjob` and reuses the nested types here.

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{BroadcastJobSpec, ImageListPullJobSpec};

/// Desired state of an AdvancedCronJob.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "AdvancedCronJob",
    namespaced,
    shortname = "acj",
    status = "AdvancedCronJobStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "AdvancedCronJob creates a Job, BroadcastJob or ImageListPullJob on a cron schedule.",
    printcolumn = r#"{"name":"Schedule","type":"string","jsonPath":".spec.schedule","description":"The schedule of advanced cron job."}"#,
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".status.type","description":"Type of cron job."}"#,
    printcolumn = r#"{"name":"LastScheduleTime","type":"date","jsonPath":".status.lastScheduleTime","description":"The last time at which job was scheduled."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobSpec {
    /// The schedule (robfig/cron's standard syntax: five fields, `@hourly`-style descriptors,
    /// `@every <duration>`, an optional `TZ=`/`CRON_TZ=` prefix).
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

/// `spec.template`: exactly one of the three.
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
    /// An ImageListPullJob per run (v1beta1 only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_list_pull_job_template: Option<ImageListPullJobTemplateSpec>,
}

/// The BroadcastJob a run creates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BroadcastJobTemplateSpec {
    /// Labels and annotations of the created jobs (kept whole, where upstream's CRD prunes them).
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// The created job's spec.
    #[serde(default)]
    pub spec: BroadcastJobSpec,
}

/// The ImageListPullJob a run creates.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageListPullJobTemplateSpec {
    /// Labels and annotations of the created jobs.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: ObjectMeta,
    /// The created job's spec.
    #[serde(default)]
    pub spec: ImageListPullJobSpec,
}

/// `spec.concurrencyPolicy`: how runs may overlap (Allow, the default; Forbid; Replace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConcurrencyPolicy {
    /// Runs may overlap (upstream's default).
    #[default]
    Allow,
    /// A run is not started while another is active.
    Forbid,
    /// The active runs are deleted before a new one starts.
    Replace,
}

/// `status.type`: the kind of run the template creates (Job, BroadcastJob, ImageListPullJob).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum TemplateKind {
    /// batch/v1 Job.
    Job,
    /// apps.kruise.io BroadcastJob.
    BroadcastJob,
    /// apps.kruise.io ImageListPullJob.
    ImageListPullJob,
}

/// Observed state of an AdvancedCronJob.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdvancedCronJobStatus {
    /// The kind the template creates.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<TemplateKind>,
    /// The runs not finished yet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<ObjectReference>,
    /// The schedule point of the latest run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
}

impl AdvancedCronJobSpec {
    /// upstream `FindTemplateKind`: the Job template first, then ImageListPullJob, else
    /// BroadcastJob; `None` when no template is set at all (upstream would fail on it).
    pub fn template_kind(&self) -> Option<TemplateKind> {
        let t = &self.template;
        if t.job_template.is_some() {
            Some(TemplateKind::Job)
        } else if t.image_list_pull_job_template.is_some() {
            Some(TemplateKind::ImageListPullJob)
        } else if t.broadcast_job_template.is_some() {
            Some(TemplateKind::BroadcastJob)
        } else {
            None
        }
    }

    /// `concurrencyPolicy`, Allow when unset.
    pub fn concurrency(&self) -> ConcurrencyPolicy {
        self.concurrency_policy.unwrap_or_default()
    }

    /// `paused`, false when unset.
    pub fn is_paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstream_json_round_trips() {
        let v = json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "AdvancedCronJob",
            "metadata": {"name": "c", "namespace": "d"},
            "spec": {"schedule": "*/1 * * * *", "timeZone": "Asia/Shanghai",
                "startingDeadlineSeconds": 60, "concurrencyPolicy": "Forbid", "paused": false,
                "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                "template": {"broadcastJobTemplate": {"metadata": {"labels": {"a": "b"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                        "completionPolicy": {"type": "Always"}, "failurePolicy": {"type": "FailFast"}}}}},
            "status": {"type": "BroadcastJob", "lastScheduleTime": "2025-10-10T09:05:00Z",
                "active": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
                    "name": "c-1760087100", "namespace": "d", "uid": "u"}]}
        });
        let c: AdvancedCronJob = serde_json::from_value(v.clone()).expect("decode");
        assert_eq!(c.spec.template_kind(), Some(TemplateKind::BroadcastJob));
        assert_eq!(c.spec.concurrency(), ConcurrencyPolicy::Forbid);
        assert_eq!(serde_json::to_value(&c).expect("encode"), v);
        let empty: AdvancedCronJobSpec =
            serde_json::from_value(json!({"schedule": "@hourly", "template": {}})).expect("min");
        assert_eq!(empty.template_kind(), None);
        assert_eq!(empty.concurrency(), ConcurrencyPolicy::Allow);
        assert!(!empty.is_paused());
    }
}
