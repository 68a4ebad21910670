//! One reconcile of an Advanced DaemonSet (upstream `syncDaemonSet`), as named steps: gates on
//! expectations → the update revision → the pure [`plan`] over a view per node → the sync's
//! writes ([`Syncer`]: in-place progress, replacements in place through the shared engine when
//! the type and the change allow it, creations, deletions) → history → status.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use kruise_api::apps::v1beta1::{DaemonSet, DaemonSetStatus, RollingUpdateType};
use kruise_api::keys;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};

use super::context::{Context, METRIC_NAME};
use super::error::Error;
use super::nodes;
use super::plan::{self, Limits, NodePods, Plan};
use super::pod;
use super::predownload;
use super::revisions::{list_revisions, truncate_history, update_revision};
use super::status;
use super::sync::{ScaleFailure, Syncer};
use crate::expectations::{EXPECTATION_TIMEOUT, ScaleSatisfaction, VersionSatisfaction};
use crate::inplace::{Features, UpdateOptions};
use crate::workload::pace;

/// Longest wait before looking again while a rollout or placement is under way; Pod and Node
/// events normally come much sooner.
const RECHECK: Duration = Duration::from_secs(10);

fn key(ds: &DaemonSet) -> String {
    format!("{}/{}", ds.namespace().unwrap_or_default(), ds.name_any())
}

/// What the sync did, for the status and the next requeue.
struct Synced {
    first_err: Option<ScaleFailure>,
    update_err: Option<(String, Error)>,
    /// Pods the preDelete hook holds.
    held: usize,
    deleted: usize,
}

/// One reconcile of `ds`, ending with a pause in proportion to the Pods it walked (see
/// [`pace`]).
pub async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    let mut walked = 0;
    let out = reconcile_inner(ds, ctx, &mut walked).await;
    pace::pause(walked).await;
    out
}

async fn reconcile_inner(
    ds: Arc<DaemonSet>,
    ctx: Arc<Context>,
    walked: &mut usize,
) -> Result<Action, Error> {
    if ds.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = ds.namespace().ok_or(Error::Unnamed)?;
    let uid = ds.uid().ok_or(Error::Unnamed)?;
    let key = key(&ds);
    let clock = Instant::now();
    if let Some(wait) = wait_for_expectations(&ctx, &key, &ns, &uid, clock) {
        return Ok(wait);
    }
    let rev_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let now = Timestamp::now();
    let mut revisions = list_revisions(&ctx, &ds, &ns, &uid);
    let (update_rev, collision) = update_revision(&ctx, &ds, &rev_api, &mut revisions).await?;
    let hash = pod::revision_hash(&update_rev);
    // Before the Pod writes, as upstream: the jobs must reach the nodes ahead of the update.
    if predownload::enabled(&ctx.gates) {
        predownload::predownload_images(&ctx, &ds, &hash, &update_rev, &revisions).await;
    }

    let pods = ctx.pods.owned_by(&ns, &uid);
    *walked = pods.len();
    let node_list = ctx.nodes.state();
    let template_spec = ds.spec.template.spec.clone().unwrap_or_default();
    let (views, orphaned) = node_views(&pods, &node_list, &template_spec);
    let desired = views.iter().filter(|v| v.placement.should_run).count();
    let limits = match plan::limits(&ds, desired) {
        Ok(l) => l,
        Err(e) => return report_invalid_spec(&ctx, &ds, &ns, e, now).await,
    };
    let todo = plan_pods(&ds, &views, &orphaned, &hash, &limits, now);
    let syncer = Syncer {
        ctx: &ctx,
        ds: &ds,
        key: &key,
        api: Api::namespaced(ctx.client.clone(), &ns),
        pods: &pods,
        update_rev: &update_rev,
        hash: &hash,
        opts: UpdateOptions {
            features: Features::from_gates(&ctx.gates),
            ..UpdateOptions::default()
        },
        now,
    };
    let synced = sync(&syncer, &ds, &todo, &revisions).await?;

    truncate_history(&ds, &rev_api, &revisions, &pods, &update_rev).await?;
    let mut st = status::calculate(
        &views,
        &hash,
        ds.spec.min_ready_seconds,
        ds.metadata.generation.unwrap_or(0),
        ds.status.as_ref(),
        now,
    );
    if collision > 0 {
        st.collision_count = Some(collision);
    }
    set_conditions(&mut st, &synced, now);
    write_status(&ctx, &ds, &ns, st.clone()).await?;
    if let Some((_, e)) = synced.first_err {
        return Err(e.into());
    }
    if let Some((_, e)) = synced.update_err {
        return Err(e);
    }
    let busy = synced.held > 0
        || !todo.create_on.is_empty()
        || synced.deleted > 0
        || !todo.replace.is_empty()
        || st.updated_number_scheduled < st.desired_number_scheduled
        || st.number_unavailable > 0;
    Ok(if busy {
        Action::requeue(RECHECK)
    } else {
        Action::requeue(Duration::from_secs(300))
    })
}

/// One view per node: whether it should run a Pod and the Pods it has; Pods whose node is gone
/// (or that never named one) are orphaned.
fn node_views<'a>(
    pods: &'a [Arc<Pod>],
    node_list: &'a [Arc<Node>],
    template_spec: &PodSpec,
) -> (Vec<NodePods<'a>>, Vec<&'a Pod>) {
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    let mut orphaned = Vec::new();
    for p in pods {
        match crate::workload::nodes::target_node(p) {
            Some(n)
                if node_list
                    .iter()
                    .any(|x| x.metadata.name.as_deref() == Some(n)) =>
            {
                by_node.entry(n).or_default().push(p)
            }
            _ => orphaned.push(p.as_ref()),
        }
    }
    let views = node_list
        .iter()
        .map(|n| NodePods {
            node: n.as_ref(),
            placement: nodes::placement(template_spec, n),
            pods: by_node
                .get(n.metadata.name.as_deref().unwrap_or(""))
                .cloned()
                .unwrap_or_default(),
        })
        .collect();
    (views, orphaned)
}

/// A spec the plan cannot use: nothing changes until the spec does, so say why where
/// `kubectl describe` shows it, and fail the reconcile.
async fn report_invalid_spec(
    ctx: &Context,
    ds: &DaemonSet,
    ns: &str,
    e: plan::BadNumber,
    now: Timestamp,
) -> Result<Action, Error> {
    ctx.event(ds, EventType::Warning, "InvalidSpec", e.to_string())
        .await;
    let mut st = ds.status.clone().unwrap_or_default();
    st.observed_generation = ds.metadata.generation.unwrap_or(0);
    status::set_failure(
        &mut st,
        keys::DAEMONSET_CONDITION_FAILED_SCALE,
        "InvalidSpec",
        &e.to_string(),
        now,
    );
    write_status(ctx, ds, ns, st).await?;
    Err(e.into())
}

/// The pure plan: creations, deletions and replacements within the rolling-update limits.
fn plan_pods(
    ds: &DaemonSet,
    views: &[NodePods<'_>],
    orphaned: &[&Pod],
    hash: &str,
    limits: &Limits,
    now: Timestamp,
) -> Plan {
    let rolling = ds.spec.rolling_update();
    plan::plan(
        views,
        orphaned,
        hash,
        limits,
        rolling.as_ref(),
        ds.spec.min_ready_seconds,
        now,
    )
}

/// The sync's writes in upstream's order: in-place progress, replacements, creations, then
/// deletions (the planned ones and the replacements to recreate) behind the preDelete hook.
async fn sync(
    syncer: &Syncer<'_>,
    ds: &DaemonSet,
    todo: &Plan,
    revisions: &[ControllerRevision],
) -> Result<Synced, Error> {
    let in_place = ds
        .spec
        .rolling_update()
        .as_ref()
        .is_some_and(|r| r.type_ == Some(RollingUpdateType::InPlaceIfPossible));
    syncer.refresh().await?;
    let replaced = syncer.replace(&todo.replace, in_place, revisions).await;
    // A recreate update counts once, when it starts: the Pod is deleted now, or a preDelete
    // hook starts holding it (a later sync deletes it as pre-deleting, not as a replacement).
    let started = replaced
        .recreate
        .iter()
        .filter(|n| syncer.pod(n).is_some_and(|p| !plan::is_pre_deleting(p)))
        .count();
    let mut to_delete = todo.delete.clone();
    to_delete.extend(replaced.recreate);
    let mut first_err = None;
    syncer.create(&todo.create_on, &mut first_err).await;
    let (to_delete, held) = syncer.hold_pre_deleting(to_delete, &mut first_err).await;
    syncer.delete(&to_delete, &mut first_err).await;
    for _ in 0..started {
        syncer.ctx.metrics.recreate_started(METRIC_NAME);
    }
    Ok(Synced {
        first_err,
        update_err: replaced.update_err,
        held,
        deleted: to_delete.len(),
    })
}

/// CloneSet's conditions: set while a step fails, removed once it goes through. A failed
/// reconcile is retried with backoff; the other DaemonSets are reconciled meanwhile.
fn set_conditions(st: &mut DaemonSetStatus, synced: &Synced, now: Timestamp) {
    match &synced.first_err {
        Some((reason, e)) => status::set_failure(
            st,
            keys::DAEMONSET_CONDITION_FAILED_SCALE,
            reason,
            &status::failure_message(e),
            now,
        ),
        None => status::clear_failure(st, keys::DAEMONSET_CONDITION_FAILED_SCALE),
    }
    match &synced.update_err {
        Some((msg, _)) => status::set_failure(
            st,
            keys::DAEMONSET_CONDITION_FAILED_UPDATE,
            "FailedUpdatePodInPlace",
            msg,
            now,
        ),
        None => status::clear_failure(st, keys::DAEMONSET_CONDITION_FAILED_UPDATE),
    }
}

/// Waits while the Pod cache is behind our own writes (creations, deletions, in-place
/// patches); timed-out expectations are dropped so a lost event never blocks the DaemonSet.
fn wait_for_expectations(
    ctx: &Context,
    key: &str,
    ns: &str,
    uid: &str,
    clock: Instant,
) -> Option<Action> {
    let store = ctx.pods.store();
    ctx.scale_exp.observe_cache(key, |name| {
        use crate::expectations::Cached;
        match store.get(&kube::runtime::reflector::ObjectRef::<Pod>::new(name).within(ns)) {
            None => Cached::Absent,
            Some(p) if p.metadata.deletion_timestamp.is_some() => Cached::Terminating,
            Some(_) => Cached::Present,
        }
    });
    if let ScaleSatisfaction::Unsatisfied { since, .. } = ctx.scale_exp.satisfied(key, clock) {
        if since < EXPECTATION_TIMEOUT {
            return Some(Action::requeue((EXPECTATION_TIMEOUT - since).min(RECHECK)));
        }
        tracing::warn!("scale expectations timed out; dropping them");
        ctx.scale_exp.delete(key);
    }
    for p in ctx.pods.owned_by(ns, uid) {
        let (Some(puid), Some(rv)) = (
            p.metadata.uid.as_deref(),
            p.metadata.resource_version.as_deref(),
        ) else {
            continue;
        };
        if let VersionSatisfaction::Unsatisfied { since } = ctx.rv_exp.satisfied(puid, rv, clock) {
            if since < EXPECTATION_TIMEOUT {
                return Some(Action::requeue(
                    (EXPECTATION_TIMEOUT - since).min(Duration::from_secs(5)),
                ));
            }
            ctx.rv_exp.delete(puid);
        }
    }
    None
}

/// Writes the status when it changed (a merge patch clearing fields the new one omits).
async fn write_status(
    ctx: &Context,
    ds: &DaemonSet,
    ns: &str,
    new: DaemonSetStatus,
) -> Result<(), Error> {
    if ds.status.as_ref() == Some(&new) {
        return Ok(());
    }
    let patch = crate::workload::status::status_patch(ds.status.as_ref(), &new)?;
    let api: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), ns);
    api.patch_status(
        &ds.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}
