//! One reconcile of an EphemeralJob, as named steps: the finalizer (held while the job lives,
//! released when it is deleted) → the finished job's TTL deletion → the injections gate → the
//! pure [`plan::plan`] over the Pods of its namespace → Events for Pods left out by a name
//! conflict → injections through `pods/ephemeralcontainers` → status.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::ephemeraljob::{injected, reasons};
use kruise_api::apps::v1alpha1::{EphemeralJob, EphemeralJobStatus};
use kruise_api::keys;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::plan::{self, Conflict, Ttl};
use crate::expectations::{Cached, EXPECTATION_TIMEOUT, ScaleAction, ScaleSatisfaction};
use crate::runner::{self, finalizer};

/// Look again at least this often while the job runs; Pod events normally come sooner.
const RESYNC: Duration = Duration::from_secs(300);
/// The `pods` subresource ephemeral containers are added through.
const SUBRESOURCE: &str = "ephemeralcontainers";

/// One reconcile of `job`.
pub async fn reconcile(job: Arc<EphemeralJob>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = job.namespace().ok_or(Error::Unnamed)?;
    let uid = job.uid().ok_or(Error::Unnamed)?;
    let key = runner::object_key(job.as_ref());
    let api: Api<EphemeralJob> = Api::namespaced(ctx.client.clone(), &ns);
    if job.metadata.deletion_timestamp.is_some() {
        // Ephemeral containers cannot be taken out of a Pod (the API has no way to), so there
        // is nothing to clean up: upstream's removal is a no-op too. Release the job.
        finalizer::remove(&api, job.as_ref(), keys::EPHEMERALJOB_FINALIZER).await?;
        ctx.injections.delete(&key);
        return Ok(Action::await_change());
    }
    if finalizer::add(&api, job.as_ref(), keys::EPHEMERALJOB_FINALIZER).await? {
        // The update event brings the job back with the finalizer.
        return Ok(Action::await_change());
    }
    let now = Timestamp::now();
    if let Some(done) = job.status.as_ref().and_then(|s| s.completion_time.as_ref()) {
        return match plan::ttl(&job, done.0, now) {
            Ttl::Delete => {
                delete_job(&api, &job, &uid).await?;
                ctx.injections.delete(&key);
                Ok(Action::await_change())
            }
            Ttl::Wait(d) => Ok(Action::requeue(d)),
        };
    }
    // Before the first list, "no Pods" would read as MatchedEmpty.
    if !ctx.pods.is_synced() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    if let Some(wait) = wait_for_injections(&ctx, &job, &key, &ns) {
        return Ok(wait);
    }
    let in_ns = ctx.pods.in_namespace(&ns);
    let pods: Vec<&Pod> = in_ns.iter().map(AsRef::as_ref).collect();
    let plan = plan::plan(&job, &pods, now);
    for c in &plan.conflicts {
        report_conflict(&ctx, &job, &pods, c).await;
    }
    let injected = inject(&ctx, &job, &key, &ns, &uid, &plan.inject).await;
    write_status(&ctx, &job, &ns, &plan.status).await?;
    injected?;
    Ok(Action::requeue(
        plan.requeue.map_or(RESYNC, |r| r.min(RESYNC)),
    ))
}

/// The TTL has passed: delete the job, only the one this reconcile saw.
async fn delete_job(api: &Api<EphemeralJob>, job: &EphemeralJob, uid: &str) -> Result<(), Error> {
    tracing::info!("deleting EphemeralJob: ttlSecondsAfterFinished has passed");
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

/// A Warning Event per Pod left out for a name conflict: targets are only known now, so the
/// webhook cannot refuse the job for it.
async fn report_conflict(ctx: &Context, job: &EphemeralJob, pods: &[&Pod], c: &Conflict) {
    let related = pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(c.pod.as_str()))
        .map(|p| p.object_ref(&()));
    let note = format!(
        "Pod {} already has a container named {:?} in {} that this job did not inject; \
         the Pod is left out (rename the job's container to inject into it)",
        c.pod, c.container, c.list
    );
    ctx.event(job, true, reasons::NAME_CONFLICT, note, related)
        .await;
}

/// Adds the template's containers (each with the job's UID in
/// [`keys::EPHEMERALJOB_ID_ENV`]) to each Pod in `names`, expected by name before the calls are
/// sent. The first refusal is returned after the others were tried.
async fn inject(
    ctx: &Context,
    job: &EphemeralJob,
    key: &str,
    ns: &str,
    uid: &str,
    names: &[String],
) -> Result<(), Error> {
    if names.is_empty() {
        return Ok(());
    }
    let containers: Vec<_> = job
        .spec
        .template
        .ephemeral_containers
        .iter()
        .map(|c| injected(uid, c))
        .collect();
    // A strategic merge patch: the list merges by name, so the Pod's other ephemeral
    // containers stay (upstream sends the same two-way merge patch).
    let body = Patch::Strategic(json!({"spec": {"ephemeralContainers": containers}}));
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    for n in names {
        ctx.injections.expect(key, ScaleAction::Create, n);
    }
    let pp = PatchParams::default();
    let results = join_all(
        names
            .iter()
            .map(|n| api.patch_subresource(SUBRESOURCE, n, &pp, &body)),
    )
    .await;
    let mut first_err = None;
    for (n, r) in names.iter().zip(results) {
        match r {
            Ok(pod) => {
                tracing::info!(pod = %n, "injected ephemeral containers");
                let note = format!("Injected ephemeral containers into pod {n}");
                let related = Some(pod.object_ref(&()));
                ctx.event(job, false, reasons::INJECTED, note, related)
                    .await;
            }
            Err(e) => {
                ctx.injections.observe(key, ScaleAction::Create, n);
                tracing::warn!(pod = %n, error = %e, "failed to inject ephemeral containers");
                let note = format!("failed to create ephemeral container in pod {ns}/{n}: {e}");
                ctx.event(job, true, reasons::CREATE_FAILED, note, None)
                    .await;
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(()), |e| Err(e.into()))
}

/// Waits while the Pod cache has not shown our latest injections; timed-out expectations are
/// dropped so a lost event never blocks the job.
fn wait_for_injections(ctx: &Context, job: &EphemeralJob, key: &str, ns: &str) -> Option<Action> {
    let store = ctx.pods.store();
    ctx.injections.observe_cache(key, |name| {
        match store.get(&ObjectRef::<Pod>::new(name).within(ns)) {
            // Gone: it will never show them; stop waiting for it.
            None => Cached::Terminating,
            Some(p) if plan::injected(job, &p) => Cached::Present,
            Some(_) => Cached::Absent,
        }
    });
    if let ScaleSatisfaction::Unsatisfied { since, .. } =
        ctx.injections.satisfied(key, Instant::now())
    {
        if since < EXPECTATION_TIMEOUT {
            return Some(Action::requeue(
                (EXPECTATION_TIMEOUT - since).min(Duration::from_secs(5)),
            ));
        }
        tracing::warn!("injection expectations timed out; dropping them");
        ctx.injections.delete(key);
    }
    None
}

/// Writes the status when it changed (a merge patch clearing fields the new one omits).
async fn write_status(
    ctx: &Context,
    job: &EphemeralJob,
    ns: &str,
    new: &EphemeralJobStatus,
) -> Result<(), Error> {
    if job.status.as_ref() == Some(new) {
        return Ok(());
    }
    let patch = crate::workload::status::status_patch(job.status.as_ref(), new)?;
    let api: Api<EphemeralJob> = Api::namespaced(ctx.client.clone(), ns);
    api.patch_status(
        &job.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}
