//! One reconcile of a UnitedDeployment (upstream `Reconcile`): revisions → the subsets'
//! workloads and their Pods → the replica split and partitions → create / update / delete →
//! status, written conflict-checked (retried on the latest object, and the next reconcile
//! waits until the cache shows it). A step that cannot act records a Warning Event and a
//! condition, and the error goes back to the runner, which backs off.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1alpha1::{SubsetKind, UnitedDeployment};
use kruise_api::keys;
use kube::api::{
    DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, PropagationPolicy,
};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::Value;

use super::child::{self, ChildError};
use super::context::Context;
use super::error::Error;
use super::plan::{self, Desired, Observed, Step};
use super::revisions::{self, Revisions, Synced};
use super::schedule;
use super::status::{Outcome, next_status};
use crate::expectations::{EXPECTATION_TIMEOUT, VersionSatisfaction};
use crate::workload::podutil;

/// How often a settled UnitedDeployment is looked at without an event.
const RESYNC: Duration = Duration::from_secs(300);
/// Status writes retried on a conflict (upstream's `updateRetries`).
const STATUS_RETRIES: usize = 5;
/// How soon to look again while the cache lags behind our last status write (upstream's).
const CACHE_RECHECK: Duration = Duration::from_secs(1);

/// The subset workloads a UnitedDeployment controls, of the template's kind and of others.
struct Children {
    own: Vec<Value>,
    /// Workloads of another kind (the template's kind changed): `(kind, name)`.
    stale: Vec<(SubsetKind, String)>,
}

/// One reconcile of `ud` (the runner adds its span, timing and metrics).
pub async fn reconcile(ud: Arc<UnitedDeployment>, ctx: Arc<Context>) -> Result<Action, Error> {
    if ud.metadata.deletion_timestamp.is_some() {
        if let Some(uid) = ud.uid() {
            ctx.written.delete(&uid);
        }
        return Ok(Action::await_change());
    }
    if cache_behind(&ctx, &ud) {
        return Ok(Action::requeue(CACHE_RECHECK));
    }
    let Some(kind) = ud.subset_kind() else {
        warn(
            &ctx,
            &ud,
            keys::UD_REASON_FAILED_UPDATE_SUBSET,
            ChildError::NoTemplate.to_string(),
        )
        .await;
        return Err(ChildError::NoTemplate.into());
    };
    let Some(revs) = Box::pin(sync_revisions(&ctx, &ud)).await? else {
        // The restored template's change brings the next reconcile.
        return Ok(Action::await_change());
    };
    let children = match Box::pin(read_children(&ctx, &ud, kind)).await {
        Ok(c) => c,
        Err(e) => {
            warn(
                &ctx,
                &ud,
                keys::UD_REASON_FAILED_FIND_SUBSETS,
                e.to_string(),
            )
            .await;
            return Err(e);
        }
    };
    let observed = observe_all(&ctx, &ud, kind, &children.own, &revs.update);
    let mut current: BTreeMap<String, i32> = BTreeMap::new();
    for o in &observed {
        current.entry(o.subset.clone()).or_insert(o.spec_replicas);
    }
    let strategy = &ud.spec.topology.schedule_strategy;
    let now = jiff::Timestamp::now();
    let mut sched = None;
    if strategy.is_adaptive() {
        sched = Some(Box::pin(schedule::prepare(&ctx, &ud, &observed, &revs, now)).await?);
    }
    let allocated = match &sched {
        Some(v) => v.allocate(&ud.spec),
        None => plan::allocate(&ud.spec, &current),
    };
    let next_replicas = match allocated {
        Ok(r) => r,
        Err(e) => {
            warn(
                &ctx,
                &ud,
                keys::UD_REASON_FAILED_SPECIFY_REPLICAS,
                e.to_string(),
            )
            .await;
            return Err(e.into());
        }
    };
    if let Some(v) = sched.as_mut() {
        v.after_allocation(&next_replicas, now);
    }
    let partitions = plan::next_partitions(&ud.spec, &next_replicas);
    let desired = desired_of(&ud, &observed, &next_replicas, &partitions, sched.as_ref());
    let names: Vec<String> = ud
        .spec
        .topology
        .subsets
        .iter()
        .map(|s| s.name.clone())
        .collect();
    let (steps, kept) = plan::steps(&names, &observed, &revs.update, &desired);
    let mut outcome = Box::pin(apply(
        &ctx,
        &ud,
        kind,
        &revs,
        &steps,
        &children.stale,
        &desired,
    ))
    .await;
    let mut requeue = RESYNC;
    if let Some(v) = sched {
        outcome.reserved_pods = v.reserved_pods();
        if let Some(d) = v.requeue {
            requeue = requeue.min(d);
        }
        outcome.subset_conditions = v.conditions;
        // A new subset's Pods are judged once they may have timed out (upstream requeues so).
        if steps.iter().any(|s| matches!(s, Step::Create(_))) {
            let secs = u64::try_from(strategy.reschedule_critical_seconds()).unwrap_or(0);
            requeue = requeue.min(Duration::from_secs(secs));
        }
    }
    Box::pin(write_status(
        &ctx,
        &ud,
        &revs,
        &kept,
        &next_replicas,
        &partitions,
        &outcome,
    ))
    .await?;
    if let Some(e) = outcome.provision_error.or(outcome.update_error) {
        return Err(Error::Subsets(e));
    }
    // At least a second: a deadline just reached is judged on the next pass.
    Ok(Action::requeue(requeue.max(Duration::from_secs(1))))
}

/// Whether the cache still shows `ud` older than our last status write: a decision made on it
/// would undo that write (a subset's Schedulable mark, say), so the reconcile waits for it.
fn cache_behind(ctx: &Context, ud: &UnitedDeployment) -> bool {
    let (Some(uid), Some(rv)) = (ud.uid(), ud.resource_version()) else {
        return false;
    };
    let now = std::time::Instant::now();
    if let VersionSatisfaction::Unsatisfied { since } = ctx.written.satisfied(&uid, &rv, now) {
        if since < EXPECTATION_TIMEOUT {
            return true;
        }
        ctx.written.delete(&uid);
    }
    false
}

/// What each subset's workload should be: its replicas, partition, patch and (Adaptive)
/// `maxUnavailable`.
fn desired_of(
    ud: &UnitedDeployment,
    observed: &[Observed],
    next_replicas: &BTreeMap<String, i32>,
    partitions: &BTreeMap<String, i32>,
    sched: Option<&schedule::View>,
) -> BTreeMap<String, Desired> {
    ud.spec
        .topology
        .subsets
        .iter()
        .map(|s| {
            let ready = observed
                .iter()
                .find(|o| o.subset == s.name)
                .map_or(0, |o| o.ready_replicas);
            let d = Desired {
                replicas: next_replicas.get(&s.name).copied().unwrap_or(0),
                partition: partitions.get(&s.name).copied().unwrap_or(0),
                patch: child::patch_text(s),
                max_unavailable: sched.and_then(|v| v.max_unavailable(&ud.spec, &s.name, ready)),
            };
            (s.name.clone(), d)
        })
        .collect()
}

/// Records a Warning Event on `ud`.
async fn warn(ctx: &Context, ud: &UnitedDeployment, reason: &str, note: String) {
    ctx.event(&ud.object_ref(&()), EventType::Warning, reason, note)
        .await;
}

/// The subset workloads `ud` controls, oldest first.
async fn read_children(
    ctx: &Context,
    ud: &UnitedDeployment,
    kind: SubsetKind,
) -> Result<Children, Error> {
    let ns = ud.namespace().unwrap_or_default();
    let uid = ud.uid().unwrap_or_default();
    let selector = ud
        .spec
        .selector
        .as_ref()
        .and_then(kruise_api::selector::to_selector_string)
        .unwrap_or_default();
    let lp = ListParams::default().labels(&selector);
    let mut own = Vec::new();
    let mut stale = Vec::new();
    for k in SubsetKind::ALL {
        let mut items: Vec<DynamicObject> = ctx
            .subset_api(k, Some(&ns))
            .list(&lp)
            .await?
            .items
            .into_iter()
            .filter(|o| {
                o.owner_references()
                    .iter()
                    .any(|r| r.controller == Some(true) && r.uid == uid)
            })
            .collect();
        items.sort_by(|a, b| {
            let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
            ta.cmp(&tb).then_with(|| a.name_any().cmp(&b.name_any()))
        });
        for o in items {
            if k == kind {
                own.push(serde_json::to_value(&o).map_err(ChildError::from)?);
            } else {
                stale.push((k, o.name_any()));
            }
        }
    }
    Ok(Children { own, stale })
}

/// The subset workloads as the plan reads them, with their Pods' revisions from the cache.
fn observe_all(
    ctx: &Context,
    ud: &UnitedDeployment,
    kind: SubsetKind,
    own: &[Value],
    revision: &str,
) -> Vec<Observed> {
    let ns = ud.namespace().unwrap_or_default();
    let pods = ctx.pods.in_namespace(&ns);
    own.iter()
        .map(|obj| {
            let subset = obj
                .pointer("/metadata/labels")
                .and_then(|l| l.get(keys::SUBSET_NAME_LABEL))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let want = child::pod_selector(ud, subset);
            let of_subset: Vec<(String, bool)> = pods
                .iter()
                .filter(|p| podutil::is_active(p) && child::matches_labels(p, &want))
                .map(|p| {
                    let rev = p
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL))
                        .cloned()
                        .unwrap_or_default();
                    (rev, kruise_api::pod::is_ready(p))
                })
                .collect();
            child::observe(kind, obj, revision, &of_subset)
        })
        .filter(|o| !o.subset.is_empty())
        .collect()
}

/// Performs the steps; failures are gathered into the outcome (and Events), not returned, so
/// that the status still records them.
async fn apply(
    ctx: &Context,
    ud: &UnitedDeployment,
    kind: SubsetKind,
    revs: &Revisions,
    steps: &[Step],
    stale: &[(SubsetKind, String)],
    desired: &BTreeMap<String, Desired>,
) -> Outcome {
    let ns = ud.namespace().unwrap_or_default();
    let api = ctx.subset_api(kind, Some(&ns));
    let mut out = Outcome::default();
    let mut provision_errs = Vec::new();
    let mut update_errs = Vec::new();
    let (mut created, mut deleted) = (0, 0);
    let background = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    for step in steps {
        match step {
            Step::Create(subset) => {
                let Some(d) = desired.get(subset) else {
                    continue;
                };
                match Box::pin(create(ud, kind, subset, &revs.update, d, &api)).await {
                    Ok(()) => created += 1,
                    Err(e) => provision_errs.push(format!("fail to create Subset {subset}: {e}")),
                }
            }
            Step::Update { subset, name } => {
                let Some(d) = desired.get(subset) else {
                    continue;
                };
                if let Err(e) =
                    Box::pin(update(ud, kind, subset, name, &revs.update, d, &api)).await
                {
                    let msg = format!("Error updating PodSet {name} when updating: {e}");
                    warn(ctx, ud, keys::UD_REASON_FAILED_UPDATE_SUBSET, msg.clone()).await;
                    update_errs.push(msg);
                }
            }
            Step::Delete(name) => match api.delete(name, &background).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => provision_errs.push(format!("fail to delete Subset {name}: {e}")),
            },
        }
    }
    for (k, name) in stale {
        match ctx
            .subset_api(*k, Some(&ns))
            .delete(name, &background)
            .await
        {
            Ok(_) => deleted += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => provision_errs.push(format!("fail to delete Subset {name}: {e}")),
        }
    }
    let (_, _, kind_name, _) = kind.gvk();
    for (n, verb) in [(created, "Create"), (deleted, "Delete")] {
        if n > 0 {
            let note = format!("{verb} {n} Subset ({kind_name})");
            ctx.event(
                &ud.object_ref(&()),
                EventType::Normal,
                keys::UD_REASON_SUCCESSFUL_UPDATE_SUBSET,
                note,
            )
            .await;
        }
    }
    out.provisioned = created + deleted > 0;
    if !provision_errs.is_empty() {
        let msg = provision_errs.join("; ");
        warn(ctx, ud, keys::UD_REASON_FAILED_UPDATE_SUBSET, msg.clone()).await;
        out.provision_error = Some(msg);
    }
    if !update_errs.is_empty() {
        out.update_error = Some(update_errs.join("; "));
    }
    out
}

/// The revisions, or `None` once a template an earlier build's revision restores is written.
async fn sync_revisions(ctx: &Context, ud: &UnitedDeployment) -> Result<Option<Revisions>, Error> {
    match Box::pin(revisions::sync(ctx, ud)).await {
        Ok(Synced::Revisions(r)) => Ok(Some(r)),
        Ok(Synced::Restore(template)) => {
            Box::pin(restore_template(ctx, ud, template)).await?;
            Ok(None)
        }
        Err(e) => {
            warn(ctx, ud, keys::UD_REASON_FAILED_REVISION, e.to_string()).await;
            Err(e)
        }
    }
}

/// Writes back the CloneSet template an earlier build's revision restores (a merge patch: the
/// restored template only adds to what the schema left); its change brings the next reconcile.
async fn restore_template(
    ctx: &Context,
    ud: &UnitedDeployment,
    template: serde_json::Value,
) -> Result<(), Error> {
    let api: Api<UnitedDeployment> =
        Api::namespaced(ctx.client.clone(), &ud.namespace().unwrap_or_default());
    let patch = serde_json::json!({"spec": {"template": {"cloneSetTemplate": template}}});
    api.patch(
        &ud.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    tracing::info!(ud = %ud.name_any(), "restored the CloneSet template's strategies an earlier build stored");
    Ok(())
}

async fn create(
    ud: &UnitedDeployment,
    kind: SubsetKind,
    subset: &str,
    revision: &str,
    d: &Desired,
    api: &Api<DynamicObject>,
) -> Result<(), Error> {
    let obj = child::desired(ud, kind, subset, revision, d.replicas, d.partition, None)?;
    let obj: DynamicObject = serde_json::from_value(obj).map_err(ChildError::from)?;
    api.create(&PostParams::default(), &obj).await?;
    Ok(())
}

/// Upstream `UpdateSubset`: read the workload, apply the template over it, write it back
/// (conflict-checked by its resourceVersion).
async fn update(
    ud: &UnitedDeployment,
    kind: SubsetKind,
    subset: &str,
    name: &str,
    revision: &str,
    d: &Desired,
    api: &Api<DynamicObject>,
) -> Result<(), Error> {
    let live = api.get(name).await?;
    let base = serde_json::to_value(&live).map_err(ChildError::from)?;
    let mut obj = child::desired(
        ud,
        kind,
        subset,
        revision,
        d.replicas,
        d.partition,
        Some(base),
    )?;
    if let Some(m) = d.max_unavailable {
        child::set_max_unavailable(kind, &mut obj, m);
    }
    let obj: DynamicObject = serde_json::from_value(obj).map_err(ChildError::from)?;
    api.replace(name, &PostParams::default(), &obj).await?;
    Ok(())
}

async fn write_status(
    ctx: &Context,
    ud: &UnitedDeployment,
    revs: &Revisions,
    kept: &BTreeMap<String, Observed>,
    next_replicas: &BTreeMap<String, i32>,
    partitions: &BTreeMap<String, i32>,
    outcome: &Outcome,
) -> Result<(), Error> {
    let now = Time(jiff::Timestamp::now());
    let status = next_status(ud, revs, kept, next_replicas, partitions, outcome, &now);
    if ud.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut next = ud.clone();
    next.status = Some(status);
    let api: Api<UnitedDeployment> =
        Api::namespaced(ctx.client.clone(), &ud.namespace().unwrap_or_default());
    let name = ud.name_any();
    // As upstream's `updateUnitedDeployment`: the status records what this reconcile did to
    // the workloads, so on a conflict it goes onto the latest object rather than being lost.
    let mut tries = 0;
    let written = loop {
        match api
            .replace_status(&name, &PostParams::default(), &next)
            .await
        {
            Ok(w) => break w,
            Err(e) if crate::runner::is_conflict(&e) && tries < STATUS_RETRIES => {
                tries += 1;
                let status = next.status.take();
                next = api.get(&name).await?;
                next.status = status;
            }
            Err(e) => return Err(e.into()),
        }
    };
    // Upstream's `ResourceVersionExpectation`: the next reconcile waits for this version.
    if let (Some(uid), Some(rv)) = (written.uid(), written.resource_version()) {
        ctx.written.expect(&uid, &rv);
    }
    Ok(())
}
