//! One reconcile of an Advanced StatefulSet (upstream `ReconcileStatefulSet`,
//! `updateStatefulSet` and `rollingUpdateStatefulsetPods`): gates, settings, revisions, the
//! sync's steps ([`SyncPass`]: in-place refresh, the scale half, the update half), status and
//! history.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{StatefulSet, StatefulSetStatus};
use kruise_api::keys;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::claims::{self, ClaimsByName};
use super::context::Context;
use super::error::Error;
use super::hooks::AstsHooks;
use super::identity::ordinal_of;
use super::settings::settings;
use super::sync::{RECHECK, Requeue, SyncPass};
use super::{revisions, status};
use crate::expectations::{EXPECTATION_TIMEOUT, ScaleSatisfaction, VersionSatisfaction};
use crate::inplace::{self, UpdateOptions};
use crate::workload::{claim, pace, podutil, predownload};

/// How soon a set whose claims are resizing is looked at again.
const CLAIM_RECHECK: Duration = Duration::from_secs(2);

fn namespace_terminating(err: &Error) -> bool {
    matches!(err, Error::Kube(crate::runner::KubeError(kube::Error::Api(s))) if s.is_forbidden() && s.message.contains("being terminated"))
}

/// One reconcile of `sts` (the runner adds its span, timing and metrics), ending with a pause in
/// proportion to the Pods it walked (see [`pace`]).
pub async fn reconcile(sts: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut walked = 0;
    let out = match reconcile_inner(&sts, &ctx, &mut walked).await {
        Err(e) if namespace_terminating(&e) => Ok(Action::await_change()),
        other => other,
    };
    pace::pause(walked).await;
    out
}

async fn reconcile_inner(
    sts: &StatefulSet,
    ctx: &Context,
    walked: &mut usize,
) -> Result<Action, Error> {
    let ns = sts.namespace().ok_or(Error::Unnamed)?;
    let name = sts.name_any();
    let uid = sts.uid().ok_or(Error::Unnamed)?;
    let key = format!("{ns}/{name}");
    let now = Timestamp::now();
    let clock = Instant::now();
    let mut requeue = Requeue::default();

    let settings = match settings(sts, &ctx.gates) {
        Ok(s) => s,
        Err(e) => return report_invalid(ctx, sts, &e, now).await,
    };

    ctx.observe_from_cache(&key);
    if let ScaleSatisfaction::Unsatisfied { since, dirty } = ctx.scale_exp.satisfied(&key, clock) {
        if since < EXPECTATION_TIMEOUT {
            tracing::debug!(?dirty, "scale expectations not satisfied yet");
            return Ok(Action::requeue((EXPECTATION_TIMEOUT - since).min(RECHECK)));
        }
        tracing::warn!(?dirty, "scale expectations timed out; dropping them");
        ctx.scale_exp.delete(&key);
    }

    // Upstream `getPodsForStatefulSet`: matching orphans named NAME-ORDINAL are adopted, owned
    // pods that stop matching are released.
    let all = ctx.pods.in_namespace(&ns);
    let member = |p: &Pod| ordinal_of(&name, podutil::name(p)).is_some();
    let owned = claim::claim_pods(&ctx.client, sts, &sts.spec.selector, &all, &member).await?;
    let pods: Vec<&Pod> = owned.iter().map(|p| p.as_ref()).collect();
    *walked = pods.len();

    let rev_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let mut revs = revisions::list(ctx, sts, &ns, &uid);
    if revisions::adopt_orphans(ctx, sts, &rev_api, &ns).await? > 0 {
        // The watch has not shown the new owner yet: list again on the next pass.
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    let (current, update, collision) = revisions::active(ctx, sts, &rev_api, &mut revs).await?;
    let current_name = current.metadata.name.clone().unwrap_or_default();
    let update_name = update.metadata.name.clone().unwrap_or_default();

    if let Some(wait) = wait_for_versions(ctx, &pods, clock) {
        return Ok(wait);
    }

    // Before the Pod writes, as upstream's `doPreDownload`: the jobs must reach the nodes ahead
    // of the update.
    if sts.metadata.deletion_timestamp.is_none() && predownload::enabled(&ctx.gates) {
        predownload_images(ctx, sts, &settings.opts, &current, &update).await;
    }

    let old_status = sts.status.clone().unwrap_or_default();
    let mut new_status = StatefulSetStatus {
        observed_generation: sts.metadata.generation.unwrap_or_default(),
        current_revision: current_name.clone(),
        update_revision: update_name.clone(),
        collision_count: Some(collision),
        label_selector: kruise_api::selector::to_selector_string(&sts.spec.selector)
            .unwrap_or_default(),
        conditions: old_status.conditions.clone(),
        ..Default::default()
    };

    let claims = claims::of_namespace(sts, &ctx.pvcs, &ns);
    let resize = claims::resize_on_update(sts, &ctx.gates);
    let sync = if sts.metadata.deletion_timestamp.is_some() {
        Ok(())
    } else {
        let s = SyncPass {
            claims: &claims,
            resize,
            ctx,
            sts,
            key: &key,
            ns: &ns,
            settings: &settings,
            current: &current,
            update: &update,
            revisions: &revs,
            now,
        };
        s.run(&pods, &mut new_status, &mut requeue).await
    };
    if let Err(e) = &sync {
        tracing::warn!(error = %e, "sync failed");
    }

    status::count(
        sts,
        &mut new_status,
        &pods,
        settings.rolling.min_ready_seconds,
        now,
    );
    count_claims(&mut new_status, sts, &pods, &claims, resize, &mut requeue);
    if new_status != old_status {
        write_status(ctx, sts, &new_status).await?;
    }
    revisions::truncate_history(
        &rev_api,
        sts,
        &revs,
        &pods,
        &new_status.current_revision,
        &update_name,
    )
    .await;
    sync?;
    Ok(requeue.action())
}

/// `status.volumeClaims`, read before this round's claim writes: the watch brings those, and a
/// resize in flight asks for another look (claim events do not wake the set).
fn count_claims(
    st: &mut StatefulSetStatus,
    sts: &StatefulSet,
    pods: &[&Pod],
    claims: &ClaimsByName,
    resize: bool,
    requeue: &mut Requeue,
) {
    st.volume_claims = claims::volume_claim_status(sts, pods, claims);
    if resize
        && st.volume_claims.iter().any(|v| {
            v.compatible_replicas < st.replicas
                || v.compatible_ready_replicas < v.compatible_replicas
        })
    {
        requeue.push(Some(CLAIM_RECHECK));
    }
}

/// Asks the nodes of the set's Pods to pull the new images before the in-place update reaches
/// them (upstream `doPreDownload`, shared with CloneSet). Best effort: a failure is logged and
/// never blocks the rollout.
async fn predownload_images(
    ctx: &Context,
    sts: &StatefulSet,
    opts: &UpdateOptions,
    current: &ControllerRevision,
    update: &ControllerRevision,
) {
    let Some(w) = predownload::Workload::statefulset(sts) else {
        return;
    };
    let in_place = inplace::can_update_in_place(&AstsHooks, Some(current), update, opts).is_ok();
    match predownload::ensure_predownload_jobs(&ctx.client, &w, current, update, in_place).await {
        Ok(out) => {
            for job in out.created {
                ctx.event(
                    sts,
                    EventType::Normal,
                    "CreatedImagePullJob",
                    format!("created ImagePullJob {job} to pre-download the new images"),
                    None,
                )
                .await;
            }
        }
        Err(e) => tracing::warn!(error = %e, "image pre-download failed"),
    }
}

/// An unusable spec: say why (Warning Event and FailedCreatePod condition) and wait for a
/// change.
async fn report_invalid(
    ctx: &Context,
    sts: &StatefulSet,
    err: &Error,
    now: Timestamp,
) -> Result<Action, Error> {
    let msg = err.to_string();
    ctx.event(sts, EventType::Warning, "InvalidSpec", msg.clone(), None)
        .await;
    let mut st = sts.status.clone().unwrap_or_default();
    st.observed_generation = sts.metadata.generation.unwrap_or_default();
    status::set_condition(
        &mut st,
        status::condition(
            keys::STATEFULSET_CONDITION_FAILED_CREATE_POD,
            "InvalidSpec",
            &msg,
            now,
        ),
    );
    write_status(ctx, sts, &st).await?;
    Ok(Action::await_change())
}

/// Waits while the cache shows an older version of a pod than one we wrote.
fn wait_for_versions(ctx: &Context, pods: &[&Pod], clock: Instant) -> Option<Action> {
    for pod in pods {
        let (Some(uid), Some(rv)) = (
            pod.metadata.uid.as_deref(),
            pod.metadata.resource_version.as_deref(),
        ) else {
            continue;
        };
        if let VersionSatisfaction::Unsatisfied { since } = ctx.rv_exp.satisfied(uid, rv, clock) {
            if since >= EXPECTATION_TIMEOUT {
                ctx.rv_exp.delete(uid);
                continue;
            }
            return Some(Action::requeue(
                (EXPECTATION_TIMEOUT - since).min(Duration::from_secs(5)),
            ));
        }
    }
    None
}

async fn write_status(
    ctx: &Context,
    sts: &StatefulSet,
    new: &StatefulSetStatus,
) -> Result<(), Error> {
    let ns = sts.namespace().ok_or(Error::Unnamed)?;
    let api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
    let body = status::status_patch(sts.status.as_ref(), new)?;
    match api
        .patch_status(
            &sts.name_any(),
            &PatchParams::default(),
            &Patch::Merge(body),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}
