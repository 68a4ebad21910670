//! The ImageListPullJob controller: one ImagePullJob (named `{list}-<random>`, controlled by the
//! list, labelled with the hash of the shared template) per listed image; a changed template
//! replaces the jobs, a removed image deletes its job. The status counts the jobs; the list
//! completes (policy Always) once every job has, and is deleted after its TTL.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, future};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kruise_api::apps::v1beta1::{
    CompletionPolicyType, FailedImageStatus, ImageListPullJob, ImageListPullJobStatus,
    ImagePullJob, ImagePullJobSpec, ImagePullJobTemplate,
};
use kruise_api::keys;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::error::ListError as Error;
use super::plan::{self, Ttl};
use crate::expectations::{EXPECTATION_TIMEOUT, ScaleAction, ScaleExpectations, ScaleSatisfaction};
use crate::metrics::Metrics;
use crate::runner::{self, Controller};

const METRIC_NAME: &str = "imagelistpulljob";
const CONCURRENCY: u16 = 2;

pub(super) struct Context {
    client: Client,
    jobs: reflector::Store<ImagePullJob>,
    scale_exp: ScaleExpectations,
}

fn list_key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

fn controller_of(job: &ImagePullJob) -> Option<&OwnerReference> {
    job.owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == ImageListPullJob::kind(&()))
}

/// Runs until `shutdown`.
pub async fn run(client: Client, metrics: Arc<Metrics>, shutdown: CancellationToken) {
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(Api::<ImageListPullJob>::all(client.clone())),
        metrics,
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let (jobs, job_writer) = reflector::store::<ImagePullJob>();
    let ctx = Arc::new(Context {
        client: client.clone(),
        jobs: jobs.clone(),
        scale_exp: ScaleExpectations::new(),
    });
    // A job event concerns its controlling list; it also settles the list's expectations.
    let exp_ctx = ctx.clone();
    let job_events = runner::watch(Api::<ImagePullJob>::all(client))
        .reflect(job_writer)
        .filter_map(move |ev| {
            let (job, action) = match ev {
                Ok(watcher::Event::Apply(j) | watcher::Event::InitApply(j)) => {
                    (j, ScaleAction::Create)
                }
                Ok(watcher::Event::Delete(j)) => (j, ScaleAction::Delete),
                _ => return future::ready(None),
            };
            let ns = job.namespace().unwrap_or_default();
            let r = controller_of(&job).map(|o| {
                exp_ctx
                    .scale_exp
                    .observe(&list_key(&ns, &o.name), action, &job.spec.image);
                ObjectRef::<ImageListPullJob>::new(&o.name).within(&ns)
            });
            future::ready(r)
        });
    ctl.trigger_refs(job_events).run(reconcile, ctx).await;
}

/// The label value that ties a job to the template it was made from.
pub fn template_hash(t: &ImagePullJobTemplate) -> Result<String, Error> {
    let v = serde_json::to_value(t).map_err(|e| Error::Hash(e.to_string()))?;
    crate::revision::hash_revision(&v, None).map_err(|e| Error::Hash(e.to_string()))
}

/// The list's status from the jobs it owns (by image).
pub fn list_status(
    list: &ImageListPullJob,
    jobs: &BTreeMap<String, Arc<ImagePullJob>>,
    now: Timestamp,
) -> ImageListPullJobStatus {
    let old = list.status.clone().unwrap_or_default();
    let mut st = ImageListPullJobStatus {
        desired: i32::try_from(list.spec.images.len()).unwrap_or(i32::MAX),
        start_time: Some(old.start_time.unwrap_or(Time(now))),
        ..Default::default()
    };
    for job in jobs.values() {
        let Some(js) = job.status.as_ref().filter(|s| s.start_time.is_some()) else {
            continue;
        };
        if js.active > 0 {
            st.active += 1;
        }
        if js.failed > 0 {
            let name = job.name_any();
            st.failed_image_statuses.push(FailedImageStatus {
                message: format!(
                    "Please check for details which nodes failed by 'kubectl get ImagePullJob {name}'."
                ),
                image_pull_job: name,
                name: job.spec.image.clone(),
            });
        }
        if js.desired == js.failed + js.succeeded {
            st.completed += 1;
        }
        if js.desired == js.succeeded {
            st.succeeded += 1;
        }
    }
    st.failed_image_statuses
        .sort_by(|a, b| a.image_pull_job.cmp(&b.image_pull_job));
    let always = list.spec.template.completion_policy.type_ != Some(CompletionPolicyType::Never);
    if always && st.desired == st.completed {
        st.completion_time = Some(old.completion_time.unwrap_or(Time(now)));
    }
    st
}

/// Images that need a new job, and owned jobs to delete (template changed, image removed).
pub fn plan(
    list: &ImageListPullJob,
    jobs: &BTreeMap<String, Arc<ImagePullJob>>,
    hash: &str,
) -> (Vec<String>, Vec<Arc<ImagePullJob>>) {
    let mut create = Vec::new();
    let mut delete = Vec::new();
    for image in &list.spec.images {
        match jobs.get(image) {
            None => create.push(image.clone()),
            Some(j) => {
                let label = j.labels().get(keys::CONTROLLER_REVISION_HASH_LABEL);
                let same = match label {
                    Some(h) => h == hash,
                    None => j.spec.template == list.spec.template,
                };
                if !same {
                    create.push(image.clone());
                    delete.push(j.clone());
                }
            }
        }
    }
    for (image, j) in jobs {
        if !list.spec.images.contains(image) {
            delete.push(j.clone());
        }
    }
    create.dedup();
    (create, delete)
}

/// The ImagePullJob for one image of `list`.
pub fn new_job(list: &ImageListPullJob, image: &str, hash: &str) -> ImagePullJob {
    ImagePullJob {
        metadata: ObjectMeta {
            namespace: list.namespace(),
            generate_name: Some(format!("{}-", list.name_any())),
            labels: Some(
                [(
                    keys::CONTROLLER_REVISION_HASH_LABEL.to_string(),
                    hash.to_string(),
                )]
                .into(),
            ),
            owner_references: list.controller_owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: ImagePullJobSpec {
            image: image.to_string(),
            template: list.spec.template.clone(),
        },
        status: None,
    }
}

/// A finished list: kept, looked at again, or deleted by `ttlSecondsAfterFinished`.
async fn expire(
    list: &ImageListPullJob,
    api: &Api<ImageListPullJob>,
    done: Timestamp,
    now: Timestamp,
) -> Result<Action, Error> {
    let ttl = list
        .spec
        .template
        .completion_policy
        .ttl_seconds_after_finished;
    match plan::ttl(ttl, done, now) {
        Ttl::Keep => Ok(Action::await_change()),
        Ttl::After(d) => Ok(Action::requeue(d)),
        Ttl::Delete => {
            tracing::info!("deleting ImageListPullJob after ttlSecondsAfterFinished");
            match api.delete(&list.name_any(), &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
            Ok(Action::await_change())
        }
    }
}

/// The cache itself settles expectations too, so a missed watch event cannot stall the list:
/// a job at the current template hash means its create landed; no other job for the image
/// (terminating ones included) means its delete did.
fn settle_expectations(
    ctx: &Context,
    key: &str,
    list: &ImageListPullJob,
    mine: &[Arc<ImagePullJob>],
    hash: &str,
) {
    for image in list
        .spec
        .images
        .iter()
        .chain(mine.iter().map(|j| &j.spec.image))
    {
        let of_image = mine.iter().filter(|j| &j.spec.image == image);
        let (mut current, mut stale) = (false, false);
        for j in of_image {
            if j.labels()
                .get(keys::CONTROLLER_REVISION_HASH_LABEL)
                .map(String::as_str)
                == Some(hash)
            {
                current = true;
            } else {
                stale = true;
            }
        }
        if current {
            ctx.scale_exp.observe(key, ScaleAction::Create, image);
        }
        if !stale {
            ctx.scale_exp.observe(key, ScaleAction::Delete, image);
        }
    }
}

/// Deletes the jobs of images no longer listed (or of an old template), then creates the
/// missing ones; each is expected before its call is sent.
async fn write_jobs(
    ctx: &Context,
    key: &str,
    list: &ImageListPullJob,
    ns: &str,
    hash: &str,
    create: &[String],
    delete: &[Arc<ImagePullJob>],
) -> Result<(), Error> {
    let jobs_api: Api<ImagePullJob> = Api::namespaced(ctx.client.clone(), ns);
    for j in delete {
        ctx.scale_exp
            .expect(key, ScaleAction::Delete, &j.spec.image);
        match jobs_api.delete(&j.name_any(), &Default::default()).await {
            Ok(_) => tracing::info!(job = %j.name_any(), "deleted ImagePullJob"),
            Err(kube::Error::Api(e)) if e.is_not_found() => {
                ctx.scale_exp
                    .observe(key, ScaleAction::Delete, &j.spec.image);
            }
            Err(e) => {
                ctx.scale_exp
                    .observe(key, ScaleAction::Delete, &j.spec.image);
                return Err(e.into());
            }
        }
    }
    for image in create {
        ctx.scale_exp.expect(key, ScaleAction::Create, image);
        match jobs_api
            .create(&PostParams::default(), &new_job(list, image, hash))
            .await
        {
            Ok(j) => {
                tracing::info!(job = %j.name_any(), image = %image, "created ImagePullJob")
            }
            Err(e) => {
                ctx.scale_exp.observe(key, ScaleAction::Create, image);
                return Err(e.into());
            }
        }
    }
    Ok(())
}

async fn reconcile(list: Arc<ImageListPullJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    let (list, ctx) = (list.as_ref(), ctx.as_ref());
    let ns = list.namespace().unwrap_or_default();
    let name = list.name_any();
    let key = list_key(&ns, &name);
    let api: Api<ImageListPullJob> = Api::namespaced(ctx.client.clone(), &ns);
    let now = Timestamp::now();
    if list.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let hash = template_hash(&list.spec.template)?;
    if list.labels().get(keys::CONTROLLER_REVISION_HASH_LABEL) != Some(&hash) {
        let patch = json!({"metadata": {"labels": {keys::CONTROLLER_REVISION_HASH_LABEL: hash}}});
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        // The label change brings the list back; its stale resourceVersion would make the
        // status write below conflict.
        return Ok(Action::await_change());
    }
    if let Some(done) = list
        .status
        .as_ref()
        .and_then(|s| s.completion_time.as_ref())
    {
        return expire(list, &api, done.0, now).await;
    }
    // Before the first list of jobs, every image would look like it has no job yet.
    if !super::reconcile::store_ready(&ctx.jobs) {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let uid = list.metadata.uid.clone().unwrap_or_default();
    let mine: Vec<Arc<ImagePullJob>> = ctx
        .jobs
        .state()
        .into_iter()
        .filter(|j| j.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|j| controller_of(j).is_some_and(|o| o.uid == uid))
        .collect();
    settle_expectations(ctx, &key, list, &mine, &hash);
    if let ScaleSatisfaction::Unsatisfied { since, dirty } =
        ctx.scale_exp.satisfied(&key, Instant::now())
    {
        if since < EXPECTATION_TIMEOUT {
            tracing::debug!(?dirty, "waiting for created/deleted ImagePullJobs");
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        ctx.scale_exp.delete(&key);
    }
    let owned: BTreeMap<String, Arc<ImagePullJob>> = mine
        .into_iter()
        .filter(|j| j.metadata.deletion_timestamp.is_none())
        .map(|j| (j.spec.image.clone(), j))
        .collect();
    let status = list_status(list, &owned, now);
    let (create, delete) = plan(list, &owned, &hash);
    write_jobs(ctx, &key, list, &ns, &hash, &create, &delete).await?;
    if list.status.as_ref() != Some(&status) {
        let mut new = list.clone();
        new.status = Some(status);
        api.replace_status(&name, &PostParams::default(), &new)
            .await?;
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps::v1beta1::{ImageListPullJobSpec, ImagePullJobStatus};

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("ts")
    }

    fn list(images: &[&str]) -> ImageListPullJob {
        let mut l = ImageListPullJob::new(
            "l",
            ImageListPullJobSpec {
                images: images.iter().map(|s| s.to_string()).collect(),
                template: ImagePullJobTemplate::default(),
            },
        );
        l.metadata.namespace = Some("ns".into());
        l.metadata.uid = Some("uid-l".into());
        l
    }

    fn job(
        name: &str,
        image: &str,
        hash: Option<&str>,
        st: Option<(i32, i32, i32, i32)>,
    ) -> Arc<ImagePullJob> {
        let mut j = new_job(&list(&[]), image, hash.unwrap_or(""));
        j.metadata.name = Some(name.into());
        if hash.is_none() {
            j.metadata.labels = None;
        }
        j.status = st.map(|(desired, active, succeeded, failed)| ImagePullJobStatus {
            start_time: Some(Time(ts(0))),
            desired,
            active,
            succeeded,
            failed,
            ..Default::default()
        });
        Arc::new(j)
    }

    #[test]
    fn new_job_is_owned_and_labelled() {
        let j = new_job(&list(&["a"]), "a", "h1");
        assert_eq!(j.metadata.generate_name.as_deref(), Some("l-"));
        let o = &j.owner_references()[0];
        assert_eq!(
            (o.kind.as_str(), o.uid.as_str(), o.controller),
            ("ImageListPullJob", "uid-l", Some(true))
        );
        assert_eq!(
            j.labels()
                .get(keys::CONTROLLER_REVISION_HASH_LABEL)
                .map(String::as_str),
            Some("h1")
        );
    }

    #[test]
    fn plan_creates_missing_replaces_changed_deletes_removed() {
        let l = list(&["a", "b", "c", "d"]);
        let jobs: BTreeMap<String, Arc<ImagePullJob>> = [
            ("a".to_string(), job("l-1", "a", Some("h1"), None)),
            ("b".to_string(), job("l-2", "b", Some("old"), None)),
            // No label: compared by template (equal here).
            ("c".to_string(), job("l-3", "c", None, None)),
            ("x".to_string(), job("l-4", "x", Some("h1"), None)),
        ]
        .into();
        let (create, delete) = plan(&l, &jobs, "h1");
        assert_eq!(create, vec!["b", "d"]);
        let names: Vec<String> = delete.iter().map(|j| j.name_any()).collect();
        assert_eq!(names, vec!["l-2", "l-4"]);
    }

    #[test]
    fn status_counts_jobs_and_completes() {
        let l = list(&["a", "b", "c"]);
        let mut jobs: BTreeMap<String, Arc<ImagePullJob>> = [
            (
                "a".to_string(),
                job("l-1", "a", Some("h"), Some((2, 0, 2, 0))),
            ),
            (
                "b".to_string(),
                job("l-2", "b", Some("h"), Some((2, 1, 0, 1))),
            ),
            ("c".to_string(), job("l-3", "c", Some("h"), None)),
        ]
        .into();
        let st = list_status(&l, &jobs, ts(100));
        assert_eq!(
            (st.desired, st.active, st.completed, st.succeeded),
            (3, 1, 1, 1)
        );
        assert_eq!(st.failed_image_statuses.len(), 1);
        assert_eq!(st.failed_image_statuses[0].image_pull_job, "l-2");
        assert_eq!(st.completion_time, None);
        jobs.insert("b".into(), job("l-2", "b", Some("h"), Some((2, 0, 1, 1))));
        jobs.insert("c".into(), job("l-3", "c", Some("h"), Some((0, 0, 0, 0))));
        let st = list_status(&l, &jobs, ts(100));
        assert_eq!((st.completed, st.succeeded), (3, 2));
        assert_eq!(st.completion_time, Some(Time(ts(100))));
    }

    #[test]
    fn template_hash_changes_with_template() {
        let a = ImagePullJobTemplate::default();
        let mut b = a.clone();
        b.pull_secrets = vec!["s".into()];
        let (ha, hb) = (template_hash(&a).expect("a"), template_hash(&b).expect("b"));
        assert_ne!(ha, hb);
        assert_eq!(ha, template_hash(&a).expect("a again"));
    }
}
