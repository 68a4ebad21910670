//! One reconcile of a BroadcastJob, as named steps: the expectations gate → the pure
//! [`plan::step`] over the job's Pods and every Node → the finished job's TTL deletion, or the
//! sync's writes (deletions, then creations in slow-start batches) → Events → status.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps::v1beta1::{BroadcastJob, BroadcastJobStatus};
use kruise_api::keys;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::plan::{self, Note, Plan, Step};
use crate::expectations::{Cached, EXPECTATION_TIMEOUT, ScaleAction, ScaleSatisfaction};
use crate::workload::nodes;

/// Look again at least this often while the job runs; Pod and Node events normally come sooner.
const RESYNC: Duration = Duration::from_secs(300);
/// Creations in the first slow-start batch (Kubernetes' `SlowStartInitialBatchSize`).
const SLOW_START_INITIAL_BATCH: usize = 1;

fn key(job: &BroadcastJob) -> String {
    format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any())
}

/// One reconcile of `job`.
pub async fn reconcile(job: Arc<BroadcastJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    if job.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = job.namespace().ok_or(Error::Unnamed)?;
    let uid = job.uid().ok_or(Error::Unnamed)?;
    let key = key(&job);
    // Before the Node watch's first list every node would look absent (desired 0).
    if ctx.nodes.wait_until_ready().now_or_never().is_none() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    if let Some(wait) = wait_for_expectations(&ctx, &key, &ns) {
        return Ok(wait);
    }
    let owned = ctx.pods.owned_by(&ns, &uid);
    let pods: Vec<&Pod> = owned.iter().map(AsRef::as_ref).collect();
    let node_list = ctx.nodes.state();
    let node_refs: Vec<&Node> = node_list.iter().map(AsRef::as_ref).collect();
    let now = Timestamp::now();
    let step = match plan::step(&job, &pods, &node_refs, now) {
        Ok(s) => s,
        Err(e) => {
            ctx.event(&job, true, "InvalidSpec", e.to_string(), None)
                .await;
            return Err(e.into());
        }
    };
    match step {
        Step::Finished { delete, requeue } => {
            if delete {
                delete_job(&ctx, &job, &ns, &uid).await?;
                return Ok(Action::await_change());
            }
            Ok(requeue.map_or_else(Action::await_change, Action::requeue))
        }
        Step::Sync(plan) => sync(&ctx, &job, &key, &ns, plan).await,
    }
}

/// The TTL has passed: delete the job (its Pods go with it, by garbage collection), only the
/// one this reconcile saw.
async fn delete_job(ctx: &Context, job: &BroadcastJob, ns: &str, uid: &str) -> Result<(), Error> {
    tracing::info!("deleting BroadcastJob: ttlSecondsAfterFinished has passed");
    let api: Api<BroadcastJob> = Api::namespaced(ctx.client.clone(), ns);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(&job.name_any(), &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() || s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The sync's writes, then its Events and the status (the counts of refused writes taken
/// back).
async fn sync(
    ctx: &Context,
    job: &BroadcastJob,
    key: &str,
    ns: &str,
    mut plan: Plan,
) -> Result<Action, Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let mut first_err: Option<kube::Error> = None;
    let mut notes = Vec::new();
    delete_pods(ctx, key, &api, &mut plan, &mut notes, &mut first_err).await;
    create_pods(ctx, job, key, &api, &mut plan, &mut notes, &mut first_err).await;
    // The status first: the Events (one per Pod written) are reports, not part of the work.
    write_status(ctx, job, ns, &plan.status).await?;
    for n in notes.into_iter().chain(std::mem::take(&mut plan.events)) {
        ctx.event(job, n.warning, n.reason, n.message, None).await;
    }
    if let Some(e) = first_err {
        return Err(e.into());
    }
    Ok(Action::requeue(
        plan.requeue.map_or(RESYNC, |r| r.min(RESYNC)),
    ))
}

/// Deletes the planned Pods, expected by name before the calls are sent.
async fn delete_pods(
    ctx: &Context,
    key: &str,
    api: &Api<Pod>,
    plan: &mut Plan,
    notes: &mut Vec<Note>,
    first_err: &mut Option<kube::Error>,
) {
    for (name, _) in &plan.delete {
        ctx.scale_exp.expect(key, ScaleAction::Delete, name);
    }
    let del = DeleteParams::default();
    let results = join_all(plan.delete.iter().map(|(n, _)| api.delete(n, &del))).await;
    for ((name, was_active), r) in plan.delete.iter().zip(results) {
        match r {
            Ok(_) => notes.push(Note {
                warning: false,
                reason: keys::REASON_SUCCESSFUL_DELETE,
                message: format!("Delete pod: {name}"),
            }),
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                ctx.scale_exp.observe(key, ScaleAction::Delete, name);
            }
            Err(e) => {
                ctx.scale_exp.observe(key, ScaleAction::Delete, name);
                tracing::warn!(pod = %name, error = %e, "failed to delete BroadcastJob Pod");
                if *was_active {
                    plan.status.failed -= 1;
                    plan.status.active += 1;
                }
                first_err.get_or_insert(e);
            }
        }
    }
}

/// Creates the planned Pods in slow-start batches (1, 2, 4, …): after a batch with a refusal,
/// the rest waits for the next reconcile (upstream `reconcilePods`).
async fn create_pods(
    ctx: &Context,
    job: &BroadcastJob,
    key: &str,
    api: &Api<Pod>,
    plan: &mut Plan,
    notes: &mut Vec<Note>,
    first_err: &mut Option<kube::Error>,
) {
    let post = PostParams::default();
    let mut todo: &[String] = &plan.create_on;
    let mut batch = SLOW_START_INITIAL_BATCH;
    let mut refused = 0;
    while !todo.is_empty() {
        let (now, later) = todo.split_at(batch.min(todo.len()));
        let pods: Vec<Pod> = now
            .iter()
            .map(|node| {
                let pod = new_pod(job, node);
                ctx.scale_exp.expect(
                    key,
                    ScaleAction::Create,
                    pod.metadata.name.as_deref().unwrap_or_default(),
                );
                pod
            })
            .collect();
        let results = join_all(pods.iter().map(|p| api.create(&post, p))).await;
        let mut batch_failed = false;
        for ((node, pod), r) in now.iter().zip(&pods).zip(results) {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            match r {
                Ok(_) => {
                    tracing::info!(pod = %name, node = %node, "created BroadcastJob Pod");
                    notes.push(Note {
                        warning: false,
                        reason: keys::REASON_SUCCESSFUL_CREATE,
                        message: format!("Created pod: {name}"),
                    });
                }
                Err(e) => {
                    ctx.scale_exp.observe(key, ScaleAction::Create, name);
                    notes.push(Note {
                        warning: true,
                        reason: keys::REASON_FAILED_CREATE,
                        message: format!("Error creating: {e}"),
                    });
                    refused += 1;
                    batch_failed = true;
                    first_err.get_or_insert(e);
                }
            }
        }
        if batch_failed {
            refused += later.len();
            break;
        }
        todo = later;
        batch *= 2;
    }
    plan.status.active -= i32::try_from(refused).unwrap_or(i32::MAX);
}

/// A new Pod of `job` for `node` (upstream `GetPodFromTemplate` and, as upstream schedules
/// them by default, `ReplaceDaemonSetPodNodeNameNodeAffinity`): the template's metadata with the
/// job's two labels, the job as controller owner, and a required node affinity on the node's
/// name for the scheduler to honour.
pub fn new_pod(job: &BroadcastJob, node: &str) -> Pod {
    let tpl = job.spec.template.clone();
    let meta = tpl.metadata.unwrap_or_default();
    let mut pod = Pod::default();
    pod.metadata.name = Some(nodes::pod_name(&job.name_any()));
    pod.metadata.namespace = job.namespace();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(keys::BROADCASTJOB_NAME_LABEL.to_owned(), job.name_any());
    labels.insert(
        keys::BROADCASTJOB_CONTROLLER_UID_LABEL.to_owned(),
        job.uid().unwrap_or_default(),
    );
    pod.metadata.labels = Some(labels);
    pod.metadata.annotations = meta.annotations;
    pod.metadata.finalizers = meta.finalizers;
    pod.metadata.owner_references = job.controller_owner_ref(&()).map(|o| vec![o]);
    let mut spec = tpl.spec.unwrap_or_default();
    nodes::bind_to_node(&mut spec, node);
    pod.spec = Some(spec);
    pod
}

/// Waits while the Pod cache is behind our own creations and deletions; timed-out
/// expectations are dropped so a lost event never blocks the job.
fn wait_for_expectations(ctx: &Context, key: &str, ns: &str) -> Option<Action> {
    let store = ctx.pods.store();
    ctx.scale_exp.observe_cache(key, |name| {
        match store.get(&ObjectRef::<Pod>::new(name).within(ns)) {
            None => Cached::Absent,
            Some(p) if p.metadata.deletion_timestamp.is_some() => Cached::Terminating,
            Some(_) => Cached::Present,
        }
    });
    if let ScaleSatisfaction::Unsatisfied { since, .. } =
        ctx.scale_exp.satisfied(key, Instant::now())
    {
        if since < EXPECTATION_TIMEOUT {
            return Some(Action::requeue(
                (EXPECTATION_TIMEOUT - since).min(Duration::from_secs(5)),
            ));
        }
        tracing::warn!("scale expectations timed out; dropping them");
        ctx.scale_exp.delete(key);
    }
    None
}

/// Writes the status when it changed (a merge patch clearing fields the new one omits).
async fn write_status(
    ctx: &Context,
    job: &BroadcastJob,
    ns: &str,
    new: &BroadcastJobStatus,
) -> Result<(), Error> {
    if job.status.as_ref() == Some(new) {
        return Ok(());
    }
    let patch = crate::workload::status::status_patch(job.status.as_ref(), new)?;
    let api: Api<BroadcastJob> = Api::namespaced(ctx.client.clone(), ns);
    api.patch_status(
        &job.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}
