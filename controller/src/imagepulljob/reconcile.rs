//! One ImagePullJob reconcile: finalize, complete, or write the job's tag into the NodeImages of
//! its next nodes and compute its status.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{ImagePullJob, NodeImage, ReferenceObject};
use kruise_api::keys;
use kube::api::PostParams;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef};
use kube::{Api, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::plan::{self, Jitter, Ttl};
use super::secrets;
use crate::expectations::{EXPECTATION_TIMEOUT, VersionSatisfaction};
use crate::runner::finalizer;

/// Writes to one NodeImage retried on conflict (the daemon writes its status, other jobs tags).
const WRITE_ATTEMPTS: u32 = 5;

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
async fn finalize(ctx: &Context, api: &Api<ImagePullJob>, job: &ImagePullJob) -> Result<(), Error> {
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
    ctx: &Context,
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
    let decision = plan::ttl(ttl, done, now);
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

pub(super) async fn reconcile(job: Arc<ImagePullJob>, ctx: Arc<Context>) -> Result<Action, Error> {
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
    let targets = plan::target_nodes(&job.spec.template, &all_images, &pods)?;
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
    let (status, not_synced) = plan::calculate_status(job, &refs, &secret_refs, now)?;

    let window = plan::sync_window(
        plan::parallelism(&job.spec.template),
        status.active,
        &not_synced,
    );
    if !window.is_empty() {
        let policy = plan::tag_pull_policy(job, Jitter::random(), ctx.extra_ttl_for_always);
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
    Ok(
        plan::deadline_requeue(job, started, now)
            .map_or_else(Action::await_change, Action::requeue),
    )
}

/// Writes the job's tag into one NodeImage, re-reading it on conflict.
async fn write_tag(
    ctx: &Context,
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
        let Some((image, spec)) = plan::tag_update(&ni, job, secrets, policy, now)? else {
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
