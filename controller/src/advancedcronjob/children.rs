//! The three kinds of run an AdvancedCronJob creates (upstream's `_job`, `_broadcastjob` and
//! `_imagelistpulljob` controllers): which objects are its runs, where each run is (active,
//! succeeded, failed), and the object a new run is made of.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kruise_api::apps::v1beta1::{
    AdvancedCronJob, BroadcastJob, ImageListPullJob, JobConditionType, TemplateKind,
};
use kruise_api::{cron, keys};
use kube::{Resource, ResourceExt};

use super::plan::{Child, ChildState};

/// Whether `owner` names `acj` as the controller of an object (upstream indexes the runs by the
/// controller reference's kind and name; the uid is checked too, so a recreated object of the
/// same name does not adopt the old one's runs).
pub fn owned_by(meta: &ObjectMeta, acj_uid: &str) -> bool {
    controller_ref(meta).is_some_and(|o| o.uid == acj_uid)
}

/// The AdvancedCronJob controller reference of an object, if any.
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.as_ref()?.iter().find(|o| {
        o.controller == Some(true)
            && o.kind == keys::ADVANCEDCRONJOB_KIND
            && o.api_version.starts_with(keys::APPS_GROUP_PREFIX)
    })
}

fn child(meta: &ObjectMeta, state: ChildState, started: Option<jiff::Timestamp>) -> Child {
    Child {
        name: meta.name.clone().unwrap_or_default(),
        state,
        scheduled_at: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::ADVANCEDCRONJOB_SCHEDULED_AT_ANNOTATION))
            .and_then(|s| cron::parse_rfc3339(s)),
        started_at: started,
        deleting: meta.deletion_timestamp.is_some(),
    }
}

/// A Job run: finished once its Complete or Failed condition is True.
pub fn job_child(job: &Job) -> Child {
    let conds = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let done = |t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
    let state = if done("Complete") {
        ChildState::Succeeded
    } else if done("Failed") {
        ChildState::Failed
    } else {
        ChildState::Active
    };
    let started = job
        .status
        .as_ref()
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0);
    child(&job.metadata, state, started)
}

/// A BroadcastJob run: finished once its Complete or Failed condition is True.
pub fn broadcastjob_child(job: &BroadcastJob) -> Child {
    let status = job.status.clone().unwrap_or_default();
    let done = |t: JobConditionType| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == t && c.status == "True")
    };
    let state = if done(JobConditionType::Complete) {
        ChildState::Succeeded
    } else if done(JobConditionType::Failed) {
        ChildState::Failed
    } else {
        ChildState::Active
    };
    child(&job.metadata, state, status.start_time.map(|t| t.0))
}

/// An ImageListPullJob run (upstream `isImageListPullJobFinished`): finished once it has a
/// completion time; succeeded when every image succeeded.
pub fn imagelistpulljob_child(job: &ImageListPullJob) -> Child {
    let status = job.status.clone().unwrap_or_default();
    let state = match status.completion_time {
        None => ChildState::Active,
        Some(_) if status.succeeded == status.desired => ChildState::Succeeded,
        Some(_) => ChildState::Failed,
    };
    child(&job.metadata, state, status.start_time.map(|t| t.0))
}

/// The metadata of a new run (upstream `construct…ForCronJob`): the template's labels and
/// annotations, the scheduled-at annotation, the AdvancedCronJob as controller owner.
fn run_meta(acj: &AdvancedCronJob, tpl: &ObjectMeta, name: &str, at: &jiff::Zoned) -> ObjectMeta {
    let mut annotations: BTreeMap<String, String> = tpl.annotations.clone().unwrap_or_default();
    annotations.insert(
        keys::ADVANCEDCRONJOB_SCHEDULED_AT_ANNOTATION.to_owned(),
        cron::format_rfc3339(at),
    );
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: acj.namespace(),
        labels: Some(tpl.labels.clone().unwrap_or_default()),
        annotations: Some(annotations),
        // upstream `SetControllerReference`: controller and blockOwnerDeletion.
        owner_references: acj.controller_owner_ref(&()).map(|o| {
            vec![OwnerReference {
                block_owner_deletion: Some(true),
                ..o
            }]
        }),
        ..ObjectMeta::default()
    }
}

/// A new run, one of the three kinds.
pub enum NewRun {
    Job(Box<Job>),
    BroadcastJob(Box<BroadcastJob>),
    ImageListPullJob(Box<ImageListPullJob>),
}

/// The object of the run of `at`; `None` when the template of `kind` is not set.
pub fn new_run(
    acj: &AdvancedCronJob,
    kind: TemplateKind,
    name: &str,
    at: &jiff::Zoned,
) -> Option<NewRun> {
    let t = &acj.spec.template;
    Some(match kind {
        TemplateKind::Job => {
            let tpl = t.job_template.as_ref()?;
            NewRun::Job(Box::new(Job {
                metadata: run_meta(acj, &tpl.metadata.clone().unwrap_or_default(), name, at),
                spec: tpl.spec.clone(),
                status: None,
            }))
        }
        TemplateKind::BroadcastJob => {
            let tpl = t.broadcast_job_template.as_ref()?;
            let mut job = BroadcastJob::new(name, tpl.spec.clone());
            job.metadata = run_meta(acj, &tpl.metadata, name, at);
            NewRun::BroadcastJob(Box::new(job))
        }
        TemplateKind::ImageListPullJob => {
            let tpl = t.image_list_pull_job_template.as_ref()?;
            let mut job = ImageListPullJob::new(name, tpl.spec.clone());
            job.metadata = run_meta(acj, &tpl.metadata, name, at);
            NewRun::ImageListPullJob(Box::new(job))
        }
    })
}

/// `status.active` entry of a run (upstream `ref.GetReference`).
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let meta = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn acj() -> AdvancedCronJob {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "AdvancedCronJob",
            "metadata": {"name": "c", "namespace": "d", "uid": "u1"},
            "spec": {"schedule": "@hourly", "template": {
                "jobTemplate": {"metadata": {"labels": {"l": "1"}, "annotations": {"a": "2"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
                "broadcastJobTemplate": {"metadata": {"labels": {"b": "1"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}},
                "imageListPullJobTemplate": {"spec": {"images": ["nginx:1"]}}}}
        }))
        .expect("fixture")
    }

    #[test]
    fn each_template_makes_its_kind_owned_and_annotated() {
        let c = acj();
        let at = "2025-10-10T09:05:00Z"
            .parse::<jiff::Timestamp>()
            .expect("ts")
            .to_zoned(jiff::tz::TimeZone::UTC);
        let Some(NewRun::Job(job)) = new_run(&c, TemplateKind::Job, "c-1760087100", &at) else {
            panic!("a Job");
        };
        let meta = &job.metadata;
        assert_eq!(meta.name.as_deref(), Some("c-1760087100"));
        assert_eq!(meta.namespace.as_deref(), Some("d"));
        assert_eq!(
            meta.labels
                .as_ref()
                .and_then(|l| l.get("l"))
                .map(String::as_str),
            Some("1")
        );
        let ann = meta.annotations.clone().unwrap_or_default();
        assert_eq!(ann.get("a").map(String::as_str), Some("2"));
        assert_eq!(
            ann.get(keys::ADVANCEDCRONJOB_SCHEDULED_AT_ANNOTATION)
                .map(String::as_str),
            Some("2025-10-10T09:05:00Z")
        );
        let owner = &meta.owner_references.clone().unwrap_or_default()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.uid.as_str()
            ),
            ("apps.kruise.io/v1beta1", "AdvancedCronJob", "u1")
        );
        assert_eq!(
            (owner.controller, owner.block_owner_deletion),
            (Some(true), Some(true))
        );
        assert!(owned_by(meta, "u1"));
        assert!(!owned_by(meta, "u2"));
        assert_eq!(job_child(&job).scheduled_at, Some(at.timestamp()));
        assert_eq!(job_child(&job).state, ChildState::Active);
        assert!(matches!(
            new_run(&c, TemplateKind::BroadcastJob, "n", &at),
            Some(NewRun::BroadcastJob(j)) if j.metadata.labels.as_ref().is_some_and(|l| l.contains_key("b"))
        ));
        assert!(matches!(
            new_run(&c, TemplateKind::ImageListPullJob, "n", &at),
            Some(NewRun::ImageListPullJob(j)) if j.spec.images == ["nginx:1"]
        ));
    }

    #[test]
    fn finished_states() {
        let job: Job = serde_json::from_value(json!({"metadata": {"name": "j"},
            "status": {"conditions": [{"type": "Failed", "status": "True"}]}}))
        .expect("job");
        assert_eq!(job_child(&job).state, ChildState::Failed);
        let bcj: BroadcastJob = serde_json::from_value(json!({"metadata": {"name": "b"},
            "spec": {"template": {}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}}))
        .expect("bcj");
        assert_eq!(broadcastjob_child(&bcj).state, ChildState::Succeeded);
        let ilpj = |succeeded: i32| -> ImageListPullJob {
            serde_json::from_value(json!({"metadata": {"name": "i"}, "spec": {"images": ["a"]},
                "status": {"desired": 2, "succeeded": succeeded,
                    "completionTime": "2025-10-10T09:05:00Z"}}))
            .expect("ilpj")
        };
        assert_eq!(
            imagelistpulljob_child(&ilpj(2)).state,
            ChildState::Succeeded
        );
        assert_eq!(imagelistpulljob_child(&ilpj(1)).state, ChildState::Failed);
    }
}
