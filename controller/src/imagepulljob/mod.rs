//! Image pre-pull, manager side: the ImagePullJob and ImageListPullJob controllers.
//!
//! An ImagePullJob picks its target nodes (`podSelector` → nodes of matching pods;
//! `selector.names`; `selector` labels; else every node), writes a tag owned by the job into the
//! NodeImage of at most `parallelism` nodes that are not pulling it yet, copies its pull secrets
//! into kruise-daemon-config, and computes its status from the NodeImage statuses the daemon
//! writes. `completionPolicy: Always` jobs finish when every target node is done or at
//! `activeDeadlineSeconds`, and are deleted `ttlSecondsAfterFinished` later; `Never` jobs keep
//! serving new nodes. The finalizer `apps.kruise.io/deletion-protection` makes sure the secret
//! copies are released, and [`follow`] keeps each copy equal to its source while the job runs.
//! An ImageListPullJob ([`list`]) owns one ImagePullJob per image.
//!
//! Entry point: [`run`]`(client, pods, metrics, shutdown)` runs both controllers; `pods` is the
//! manager's shared [`PodCache`] (podSelector jobs follow pods). CloneSet pre-download is
//! [`crate::workload::predownload::ensure_predownload_jobs`], in the shared workload layer.
//!
//! RBAC: `imagepulljobs` get/list/watch/create/update/patch/delete, `imagepulljobs/status`
//! update; `imagelistpulljobs` get/list/watch/patch/delete, `imagelistpulljobs/status` update;
//! `nodeimages` get/list/watch/update; `secrets` get (any namespace: only the sources jobs
//! name, read by name, never listed or watched) and
//! list/create/update/delete (kruise-daemon-config); `namespaces` get; `pods` via the cache;
//! `controllerrevisions` patch (pre-download).

pub mod follow;
pub mod image;
pub mod list;
pub mod logic;
pub mod secrets;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{ImagePullJob, NodeImage, ReferenceObject};
use kruise_api::keys;
use kube::api::PostParams;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef};
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::expectations::{EXPECTATION_TIMEOUT, ResourceVersionExpectations, VersionSatisfaction};
use crate::metrics::Metrics;
use crate::podcache::{PodCache, PodEvent};
use crate::runner::{self, Controller, KubeError, ReconcileError, finalizer};
use logic::{Jitter, LogicError, Ttl};

const NAME: &str = "imagepulljob";
const CONCURRENCY: u16 = 3;
/// Writes to one NodeImage retried on conflict (the daemon writes its status, other jobs tags).
const WRITE_ATTEMPTS: u32 = 5;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Logic(#[from] LogicError),
    #[error("namespace {0} is being deleted")]
    NamespaceTerminating(String),
    #[error("namespace {0} does not exist")]
    NamespaceMissing(String),
    #[error("NodeImage {0} kept conflicting")]
    Conflict(String),
}

kruise_runtime::kube_variant!(Error);

impl ReconcileError for Error {
    fn kube(&self) -> Option<&KubeError> {
        match self {
            Error::Kube(e) => Some(e),
            _ => None,
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(e) => e.metric_label(),
            Error::Logic(_) => "invalid",
            Error::NamespaceTerminating(_) | Error::NamespaceMissing(_) => "namespace",
            Error::Conflict(_) => "conflict",
        }
    }
}

struct Ctx {
    client: Client,
    pods: PodCache,
    node_images: reflector::Store<NodeImage>,
    /// NodeImages we wrote and the cache has not shown yet.
    rv_exp: ResourceVersionExpectations,
    /// Extra TTL of `Always` jobs' tags (upstream flag default-ttlseconds-for-always-nodeimage).
    extra_ttl_for_always: i32,
}

/// Runs the ImagePullJob and ImageListPullJob controllers until `shutdown`.
pub async fn run(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let jobs = run_jobs(client.clone(), pods, metrics.clone(), shutdown.clone());
    let lists = list::run(client, metrics, shutdown);
    tokio::join!(jobs, lists);
}

fn pods_on_node(pods: &PodCache, node: &str) -> Vec<Arc<Pod>> {
    pods.store()
        .state()
        .into_iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .collect()
}

async fn run_jobs(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let ctl = Controller::watching(
        NAME,
        runner::watch(Api::<ImagePullJob>::all(client.clone())),
        metrics,
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let jobs = ctl.store();
    let (node_images, ni_writer) = reflector::store::<NodeImage>();

    // A NodeImage change concerns the jobs owning its tags, and running jobs that may want to
    // add this node (a new node, new labels, a pod scheduled there).
    let (store, pod_cache) = (jobs.clone(), pods.clone());
    let ni_events = runner::watch(Api::<NodeImage>::all(client.clone()))
        .reflect(ni_writer)
        .touched_objects()
        .flat_map(move |ev| {
            let Ok(ni) = ev else {
                return futures::stream::iter(Vec::new());
            };
            let mut refs: Vec<ObjectRef<ImagePullJob>> = ni
                .spec
                .images
                .values()
                .flat_map(|i| i.tags.iter())
                .flat_map(|t| t.owner_references.iter())
                .filter_map(|r| {
                    Some(ObjectRef::new(r.name.as_deref()?).within(r.namespace.as_deref()?))
                })
                .collect();
            let running: Vec<Arc<ImagePullJob>> = store
                .state()
                .into_iter()
                .filter(|j| logic::is_running(j))
                .collect();
            let on_node = if running
                .iter()
                .any(|j| j.spec.template.pod_selector.is_some())
            {
                pods_on_node(&pod_cache, &ni.name_any())
            } else {
                Vec::new()
            };
            refs.extend(
                running
                    .iter()
                    .filter(|j| logic::job_may_target(j, &ni, &on_node))
                    .map(|j| ObjectRef::from_obj(j.as_ref())),
            );
            refs.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
            refs.dedup();
            futures::stream::iter(refs)
        });

    // A pod change concerns running podSelector jobs of its namespace that select it.
    let store = jobs.clone();
    let pod_events = pods.targets(move |ev| {
        let selected = |pod: Option<&Pod>| -> Vec<ObjectRef<ImagePullJob>> {
            store
                .state()
                .into_iter()
                .filter(|j| logic::is_running(j))
                .filter(|j| {
                    let Some(ps) = &j.spec.template.pod_selector else {
                        return false;
                    };
                    pod.is_none_or(|p| {
                        p.metadata.namespace == j.metadata.namespace
                            && kruise_api::selector::matches(&ps.label_selector(), p.labels())
                    })
                })
                .map(|j| ObjectRef::from_obj(j.as_ref()))
                .collect()
        };
        match ev {
            PodEvent::Applied(p) | PodEvent::Deleted(p) => selected(Some(p)),
            PodEvent::Resync => selected(None),
        }
    });

    // A pull secret's source changed: the jobs using it rewrite their copies.
    let secret_events = follow::requests(client.clone(), jobs.clone());

    let ctx = Arc::new(Ctx {
        client,
        pods,
        node_images,
        rv_exp: ResourceVersionExpectations::new(),
        extra_ttl_for_always: 0,
    });
    ctl.trigger_refs(ni_events)
        .trigger_refs(pod_events)
        .trigger_refs(secret_events)
        .run(reconcile, ctx)
        .await;
}

/// Whether a reflector store has loaded its first list.
pub(crate) fn store_ready<K>(store: &reflector::Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    use futures::FutureExt;
    store
        .wait_until_ready()
        .now_or_never()
        .is_some_and(|r| r.is_ok())
}

/// Releases the job's secret copies, then drops the protection finalizer.
async fn finalize(ctx: &Ctx, api: &Api<ImagePullJob>, job: &ImagePullJob) -> Result<(), Error> {
    if !finalizer::has(job, keys::DELETION_PROTECTION_FINALIZER) {
        return Ok(());
    }
    secrets::sync(&ctx.client, job, true).await?;
    finalizer::remove(api, job, keys::DELETION_PROTECTION_FINALIZER).await?;
    tracing::info!("released ImagePullJob resources");
    Ok(())
}

/// A completed job: its copies released (after [`secrets::COPIES_KEPT_AFTER_COMPLETION`]), then
/// its TTL.
async fn completed(
    ctx: &Ctx,
    api: &Api<ImagePullJob>,
    job: &ImagePullJob,
    done: Timestamp,
    now: Timestamp,
) -> Result<Action, Error> {
    let ttl = job
        .spec
        .template
        .completion_policy
        .ttl_seconds_after_finished;
    let decision = logic::ttl(ttl, done, now);
    if let Some(left) = secrets::copies_kept_for(done, now)
        && !matches!(decision, Ttl::Delete)
    {
        let next = match decision {
            Ttl::After(d) => d.min(left),
            _ => left,
        };
        return Ok(Action::requeue(next));
    }
    finalize(ctx, api, job).await?;
    match decision {
        Ttl::Keep => Ok(Action::await_change()),
        Ttl::After(d) => Ok(Action::requeue(d)),
        Ttl::Delete => {
            tracing::info!("deleting ImagePullJob after ttlSecondsAfterFinished");
            match api.delete(&job.name_any(), &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
            Ok(Action::await_change())
        }
    }
}

async fn reconcile(job: Arc<ImagePullJob>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let (job, ctx) = (job.as_ref(), ctx.as_ref());
    let ns = job.namespace().unwrap_or_default();
    let name = job.name_any();
    let api: Api<ImagePullJob> = Api::namespaced(ctx.client.clone(), &ns);
    let now = Timestamp::now();

    if job.metadata.deletion_timestamp.is_some() {
        finalize(ctx, &api, job).await?;
        return Ok(Action::await_change());
    }
    if let Some(done) = job.status.as_ref().and_then(|s| s.completion_time.as_ref()) {
        return completed(ctx, &api, job, done.0, now).await;
    }
    // Not `kube::runtime::finalizer`: that one would add the finalizer back right after the
    // completion branch above released it (see runner::finalizer).
    if finalizer::add(&api, job, keys::DELETION_PROTECTION_FINALIZER).await? {
        // The update event brings the job back with the finalizer.
        return Ok(Action::await_change());
    }

    // Before the first list, "no NodeImages" would complete the job with zero nodes.
    if !store_ready(&ctx.node_images) || !ctx.pods.is_synced() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    let all_images = ctx.node_images.state();
    if all_images.is_empty() {
        // The NodeImage controller creates one per node a moment after the node appears (and
        // after a manager start); until then a job would complete on zero nodes.
        tracing::debug!("no NodeImage in the cluster yet; waiting");
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    let pods: Vec<Arc<Pod>> = if job.spec.template.pod_selector.is_some() {
        ctx.pods
            .store()
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
            .collect()
    } else {
        Vec::new()
    };
    let targets = logic::target_nodes(&job.spec.template, &all_images, &pods)?;
    let mut node_images: Vec<Arc<NodeImage>> = Vec::with_capacity(targets.len());
    for t in &targets {
        let Some(ni) = ctx.node_images.get(&ObjectRef::new(t)) else {
            continue;
        };
        // A NodeImage we just wrote must be seen in its new version, or the job would count
        // the node as not synced and write it again (and overshoot its parallelism).
        let uid = ni.metadata.uid.clone().unwrap_or_default();
        let rv = ni.resource_version().unwrap_or_default();
        if let VersionSatisfaction::Unsatisfied { since } =
            ctx.rv_exp.satisfied(&uid, &rv, Instant::now())
            && since < EXPECTATION_TIMEOUT
        {
            tracing::debug!(nodeimage = %t, "waiting for the cache to show our write");
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
        node_images.push(ni);
    }
    let secret_refs = secrets::sync(&ctx.client, job, false).await?;
    let refs: Vec<&NodeImage> = node_images.iter().map(|n| n.as_ref()).collect();
    let (status, not_synced) = logic::calculate_status(job, &refs, &secret_refs, now)?;

    let window = logic::sync_window(
        logic::parallelism(&job.spec.template),
        status.active,
        &not_synced,
    );
    if !window.is_empty() {
        let policy = logic::tag_pull_policy(job, Jitter::random(), ctx.extra_ttl_for_always);
        for node in window {
            write_tag(ctx, job, node, &secret_refs, &policy, now).await?;
        }
    }

    if job.status.as_ref() != Some(&status) {
        let mut new = job.clone();
        new.status = Some(status.clone());
        api.replace_status(&name, &PostParams::default(), &new)
            .await?;
        tracing::info!(
            desired = status.desired,
            active = status.active,
            succeeded = status.succeeded,
            failed = status.failed,
            completed = status.completion_time.is_some(),
            "updated ImagePullJob status"
        );
        return Ok(Action::await_change());
    }
    let started = status.start_time.as_ref().map_or(now, |t| t.0);
    Ok(logic::deadline_requeue(job, started, now)
        .map_or_else(Action::await_change, Action::requeue))
}

/// Writes the job's tag into one NodeImage, re-reading it on conflict.
async fn write_tag(
    ctx: &Ctx,
    job: &ImagePullJob,
    node: &str,
    secrets: &[ReferenceObject],
    policy: &kruise_api::apps::v1beta1::ImageTagPullPolicy,
    now: Timestamp,
) -> Result<(), Error> {
    let api: Api<NodeImage> = Api::all(ctx.client.clone());
    for _ in 0..WRITE_ATTEMPTS {
        let Some(mut ni) = api.get_opt(node).await? else {
            return Ok(());
        };
        let Some((image, spec)) = logic::tag_update(&ni, job, secrets, policy, now)? else {
            return Ok(());
        };
        ni.spec.images.insert(image.clone(), spec);
        match api.replace(node, &PostParams::default(), &ni).await {
            Ok(written) => {
                if let (Some(uid), Some(rv)) = (
                    written.metadata.uid.as_deref(),
                    written.metadata.resource_version.as_deref(),
                ) {
                    ctx.rv_exp.expect(uid, rv);
                }
                tracing::info!(nodeimage = %node, image = %image, "wrote image tag into NodeImage");
                return Ok(());
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Conflict(node.to_string()))
}
