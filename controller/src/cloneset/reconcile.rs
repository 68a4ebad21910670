//! One reconcile of a CloneSet (upstream `ReconcileCloneSet` and `syncCloneSet`): the spec and
//! expectation gates, claiming Pods, PVC clean-up, revisions, one sync step, status, and the
//! garbage collection of revisions and `podsToDelete`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{CloneSet, CloneSetStatus};
use kruise_api::keys;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::context::{Context, METRIC_NAME};
use super::error::Error;
use super::hooks::CloneSetPodHooks;
use super::pvc::{cleanup_pvcs, owned_pvcs};
use super::revisions::active_revisions;
use super::spec::{invalid_reason, sync_settings, update_options};
use super::status;
use super::sync::{Requeue, Syncer};
use super::sync_scale::truncate_pods_to_delete;
use crate::expectations::{EXPECTATION_TIMEOUT, ScaleSatisfaction, VersionSatisfaction};
use crate::inplace;
use crate::revision;
use crate::workload::podfacts::PodFacts;
use crate::workload::predownload;
use crate::workload::{claim, pace, podutil};

/// Longest wait for unsatisfied scale expectations before looking at the cache again; events
/// and resyncs normally end the wait much sooner.
const EXPECTATION_RECHECK: Duration = Duration::from_secs(30);

/// The namespace is being deleted: nothing can be created there any more, and everything in it
/// is going away, so there is nothing to retry.
fn namespace_terminating(err: &Error) -> bool {
    matches!(err, Error::Kube(crate::runner::KubeError(kube::Error::Api(s))) if s.is_forbidden() && s.message.contains("being terminated"))
}

/// One reconcile of `cs` (the runner adds its span, timing and metrics). A namespace being
/// deleted ends the reconcile without a retry: nothing can be created there any more. It ends
/// with a pause in proportion to the Pods it walked (see [`pace`]).
pub async fn reconcile(cs: Arc<CloneSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut walked = 0;
    let out = match reconcile_inner(&cs, &ctx, &mut walked).await {
        Err(e) if namespace_terminating(&e) => {
            tracing::debug!("namespace is terminating; not retrying");
            Ok(Action::await_change())
        }
        other => other,
    };
    pace::pause(walked).await;
    out
}

/// Asks the nodes of the CloneSet's Pods to pull the new images before the in-place update
/// reaches them (upstream's pre-download). Best effort: a failure is logged and never blocks the
/// rollout.
async fn predownload_images(
    ctx: &Context,
    cs: &CloneSet,
    current: &ControllerRevision,
    update: &ControllerRevision,
) {
    let opts = update_options(cs, &ctx.gates);
    let in_place = inplace::can_update_in_place(
        &CloneSetPodHooks::new(&ctx.gates),
        Some(current),
        update,
        &opts,
    )
    .is_ok();
    let Some(w) = predownload::Workload::cloneset(cs) else {
        return;
    };
    match predownload::ensure_predownload_jobs(&ctx.client, &w, current, update, in_place).await {
        Ok(out) => {
            for job in out.created {
                ctx.event(
                    cs,
                    EventType::Normal,
                    "CreatedImagePullJob",
                    format!("created ImagePullJob {job} to pre-download the new images"),
                    None,
                )
                .await;
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "image pre-download failed")
        }
    }
}

/// Upstream `ReconcileCloneSet` after the fetch: the gates (valid spec, scale and version
/// expectations), claiming Pods and PVCs, revisions, one sync step, status, then clean-up.
async fn reconcile_inner(
    cs: &CloneSet,
    ctx: &Context,
    walked: &mut usize,
) -> Result<Action, Error> {
    let ns = cs.namespace().ok_or(Error::Unnamed)?;
    let name = cs.name_any();
    let uid = cs.uid().ok_or(Error::Unnamed)?;
    let key = format!("{ns}/{name}");
    let now = Timestamp::now();
    let clock = Instant::now();
    let mut requeue = Requeue::default();

    if let Some(reason) = invalid_reason(cs) {
        return report_invalid(ctx, cs, &reason, now).await;
    }
    if let Some(wait) = wait_for_scale(ctx, &key, &ns, &name, clock) {
        return Ok(wait);
    }

    // Matching orphans adopted, pods that stopped matching released.
    let all = ctx.pods.in_namespace(&ns);
    let owned = claim::claim_pods(&ctx.client, cs, &cs.spec.selector, &all, &|_| true).await?;
    let (mut active, inactive): (Vec<Arc<Pod>>, Vec<Arc<Pod>>) =
        owned.into_iter().partition(|p| podutil::is_active(p));
    // Names are unique within a namespace: an unstable sort gives the same order, cheaper.
    active.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    *walked = active.len();
    let mut pvcs = owned_pvcs(ctx, cs, &ns, &uid);
    if !cs.spec.scale_strategy.enable_pvc_reuse && !pvcs.is_empty() {
        pvcs = cleanup_pvcs(ctx, cs, &ns, &active, &inactive, pvcs).await?;
    }

    let rev_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let revs = active_revisions(ctx, cs, &rev_api, &ns, &uid).await?;
    let (current, update_rev, collision) = (&revs.current, &revs.update, revs.collision);
    let update_name = update_rev.metadata.name.clone().unwrap_or_default();
    let current_name = current.metadata.name.clone().unwrap_or_default();

    if let Some(wait) = wait_for_versions(ctx, update_rev, &active, clock) {
        return Ok(wait);
    }

    // Before the Pod writes, as upstream: the jobs must reach the nodes ahead of the update, or
    // the Pods of the first batches pull the new image themselves.
    if cs.metadata.deletion_timestamp.is_none() && predownload::enabled(&ctx.gates) {
        predownload_images(ctx, cs, current, update_rev).await;
    }

    let old_status = cs.status.clone().unwrap_or_default();
    let mut new_status = CloneSetStatus {
        observed_generation: cs.metadata.generation.unwrap_or_default(),
        current_revision: current_name.clone(),
        update_revision: update_name.clone(),
        collision_count: Some(collision),
        label_selector: status::selector_string(&cs.spec.selector),
        conditions: old_status.conditions.clone(),
        ..Default::default()
    };

    let pods: Vec<&Pod> = active.iter().map(|p| p.as_ref()).collect();
    let facts = PodFacts::all(&pods);
    let sync_result = if cs.metadata.deletion_timestamp.is_some() {
        Ok(())
    } else {
        let sync = Syncer {
            ctx,
            cs,
            key: &key,
            settings: sync_settings(cs, &ctx.gates, current_name != update_name),
            current,
            update: update_rev,
            revisions: &revs.revisions,
            pvcs: &pvcs,
            now,
        };
        sync.run(&pods, &facts, &mut new_status, &mut requeue).await
    };

    status::calculate_counts(cs, &mut new_status, &facts, now);
    requeue.push(status::progressing(cs, &mut new_status, now));
    if status::status_changed(&old_status, &new_status) {
        tracing::info!(
            replicas = new_status.replicas,
            ready = new_status.ready_replicas,
            available = new_status.available_replicas,
            updated = new_status.updated_replicas,
            updated_ready = new_status.updated_ready_replicas,
            current_revision = %new_status.current_revision,
            update_revision = %new_status.update_revision,
            "updating CloneSet status"
        );
        write_status(ctx, cs, &new_status).await?;
    }

    if let Err(e) = truncate_pods_to_delete(ctx, cs, &pods).await {
        tracing::warn!(error = %e, "failed to truncate podsToDelete");
    }
    truncate_history(
        &rev_api,
        cs,
        &revs.revisions,
        &pods,
        &new_status.current_revision,
        &update_name,
    )
    .await;

    if sync_result.is_ok() {
        // Look again the moment the next pod becomes available (minReadySeconds after it became
        // Ready), not minReadySeconds after this reconcile: scale-up under
        // scaleStrategy.maxUnavailable and updates under maxUnavailable wait for exactly that.
        for pod in &facts {
            requeue.push(pod.available_in(cs.spec.min_ready_seconds, now));
        }
    }
    sync_result?;
    Ok(requeue.action())
}

/// The invalid-spec gate: nothing will change until the spec does, so say why where
/// `kubectl describe` shows it (a Warning Event and the FailedScale condition) and wait.
async fn report_invalid(
    ctx: &Context,
    cs: &CloneSet,
    reason: &str,
    now: Timestamp,
) -> Result<Action, Error> {
    ctx.event(
        cs,
        EventType::Warning,
        "InvalidSpec",
        reason.to_string(),
        None,
    )
    .await;
    let mut st = cs.status.clone().unwrap_or_default();
    st.observed_generation = cs.metadata.generation.unwrap_or_default();
    status::set_condition(
        &mut st,
        status::new_condition(
            keys::CLONESET_CONDITION_FAILED_SCALE,
            true,
            "InvalidSpec",
            reason,
            now,
        ),
    );
    write_status(ctx, cs, &st).await?;
    Ok(Action::await_change())
}

/// The scale-expectations gate (upstream's `scaleExpectations.SatisfiedExpectations`): the
/// requeue to wait for while the cache does not show our creates and deletes yet. Expectations
/// older than [`EXPECTATION_TIMEOUT`] are dropped, since a lost watch event must not freeze
/// the CloneSet forever.
fn wait_for_scale(
    ctx: &Context,
    key: &str,
    ns: &str,
    name: &str,
    clock: Instant,
) -> Option<Action> {
    ctx.observe_from_cache(key);
    let ScaleSatisfaction::Unsatisfied { since, dirty } = ctx.scale_exp.satisfied(key, clock)
    else {
        return None;
    };
    if since < EXPECTATION_TIMEOUT {
        tracing::debug!(?dirty, "scale expectations not satisfied yet");
        return Some(Action::requeue(
            (EXPECTATION_TIMEOUT - since).min(EXPECTATION_RECHECK),
        ));
    }
    tracing::warn!(?dirty, "scale expectations timed out; dropping them");
    ctx.metrics
        .scale_expectation_leakage
        .get_or_create(&crate::metrics::WorkloadLabels {
            controller: METRIC_NAME.to_string(),
            namespace: ns.to_string(),
            name: name.to_string(),
        })
        .inc();
    ctx.scale_exp.delete(key);
    None
}

/// The resource-version gate (upstream's `resourceVersionExpectations`): the requeue to wait for
/// while the cache shows an older update revision or Pod than one we wrote. Timed-out
/// expectations are dropped.
fn wait_for_versions(
    ctx: &Context,
    update_rev: &ControllerRevision,
    active: &[Arc<Pod>],
    clock: Instant,
) -> Option<Action> {
    if let Some(ruid) = update_rev.metadata.uid.as_deref() {
        let rv = update_rev
            .metadata
            .resource_version
            .clone()
            .unwrap_or_default();
        if let VersionSatisfaction::Unsatisfied { since } = ctx.rv_exp.satisfied(ruid, &rv, clock) {
            if since < EXPECTATION_TIMEOUT {
                return Some(Action::requeue(EXPECTATION_TIMEOUT - since));
            }
            ctx.rv_exp.delete(ruid);
        }
    }
    for pod in active {
        let (Some(puid), Some(rv)) = (
            pod.metadata.uid.as_deref(),
            pod.metadata.resource_version.as_deref(),
        ) else {
            continue;
        };
        if let VersionSatisfaction::Unsatisfied { since } = ctx.rv_exp.satisfied(puid, rv, clock) {
            if since >= EXPECTATION_TIMEOUT {
                tracing::warn!(
                    pod = podutil::name(pod),
                    "pod version expectation timed out"
                );
                ctx.rv_exp.delete(puid);
                continue;
            }
            tracing::debug!(
                pod = podutil::name(pod),
                "waiting for the cache to show our last pod write"
            );
            return Some(Action::requeue(
                (EXPECTATION_TIMEOUT - since).min(Duration::from_secs(5)),
            ));
        }
    }
    None
}

/// Deletes revisions beyond `revisionHistoryLimit` that no Pod uses (upstream
/// `truncateHistory`). Best effort: a failed delete is logged and retried next time.
async fn truncate_history(
    rev_api: &Api<ControllerRevision>,
    cs: &CloneSet,
    revisions: &[ControllerRevision],
    pods: &[&Pod],
    current_revision: &str,
    update_revision: &str,
) {
    let limit = cs
        .spec
        .revision_history_limit
        .unwrap_or(keys::DEFAULT_REVISION_HISTORY_LIMIT);
    // Only revisions other than the current and the update one are ever truncated: while those
    // fit the limit (nearly always), no Pod needs reading to know that nothing goes.
    let others = revisions
        .iter()
        .filter_map(|r| r.metadata.name.as_deref())
        .filter(|n| *n != current_revision && *n != update_revision)
        .count();
    if others <= usize::try_from(limit.max(0)).unwrap_or(0) {
        return;
    }
    let live: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| podutil::revision_hash(p).map(str::to_string))
        .collect();
    for old in
        revision::revisions_to_truncate(revisions, &live, current_revision, update_revision, limit)
    {
        match rev_api.delete(&old, &DeleteParams::default()).await {
            Ok(_) => {}
            // The cache can lag behind a delete of ours from the reconcile before.
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => tracing::warn!(revision = %old, error = %e, "failed to delete old revision"),
        }
    }
}

async fn write_status(ctx: &Context, cs: &CloneSet, new: &CloneSetStatus) -> Result<(), Error> {
    let ns = cs.namespace().ok_or(Error::Unnamed)?;
    // Both versions have the same status, so the patch is written at the storage version.
    let body = status::status_patch(cs.status.as_ref(), new)?;
    match ctx
        .stored_api(&ns)
        .patch_status(&cs.name_any(), &PatchParams::default(), &Patch::Merge(body))
        .await
    {
        Ok(_) => Ok(()),
        // Deleted since the cache saw it: there is no status left to write.
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn forbidden(message: &str) -> Error {
        Error::from(kube::Error::Api(Box::new(
            Status::failure(message, "Forbidden").with_code(403),
        )))
    }

    #[test]
    fn only_a_terminating_namespace_ends_without_retry() {
        assert!(namespace_terminating(&forbidden(
            "pods \"web-x\" is forbidden: unable to create new content in namespace e2e because it is being terminated"
        )));
        assert!(!namespace_terminating(&forbidden("exceeded quota")));
        assert!(!namespace_terminating(&Error::Unnamed));
    }
}
