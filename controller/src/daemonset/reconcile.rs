//! One reconcile of an Advanced DaemonSet (upstream `syncDaemonSet`): gates on expectations,
//! the update revision, the plan's creations, deletions and replacements (in place through the
//! shared engine when the type and the change allow it), in-place progress, history and status.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{
    CloneSetPodUpdateStrategyType, DaemonSet, DaemonSetStatus, RollingUpdateType,
};
use kruise_api::appspub::LifecycleStateType;
use kruise_api::keys;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::context::{Context, Error};
use super::nodes;
use super::plan::{self, NodePods};
use super::pod::{self, AdsHooks};
use super::status;
use crate::expectations::{
    EXPECTATION_TIMEOUT, ScaleAction, ScaleSatisfaction, VersionSatisfaction,
};
use crate::history::{self, Origin};
use crate::inplace::{Features, InPlaceHooks, UpdateOptions, UpdateOutcome};
use crate::revision::{self, Parent};
use crate::workload::lifecycle::next_lifecycle_state;
use crate::workload::lifecycle::{WriteError, write_lifecycle};
use crate::workload::podutil;
use crate::workload::update_step::{UpdateStep, update_step};

/// Longest wait before looking again while a rollout or placement is under way; Pod and Node
/// events normally come much sooner.
const RECHECK: Duration = Duration::from_secs(10);

fn key(ds: &DaemonSet) -> String {
    format!("{}/{}", ds.namespace().unwrap_or_default(), ds.name_any())
}

/// One reconcile of `ds`.
pub async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Context>) -> Result<Action, Error> {
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
    let mut revisions = list_revisions(&rev_api, &ds, &uid).await?;
    let (update_rev, collision) = update_revision(&ctx, &ds, &rev_api, &mut revisions).await?;
    let hash = pod::revision_hash(&update_rev);

    let pods = ctx.pods.owned_by(&ns, &uid);
    let node_list = ctx.nodes.state();
    let template_spec = ds.spec.template.spec.clone().unwrap_or_default();
    let mut by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
    let mut orphaned = Vec::new();
    for p in &pods {
        match pod::target_node(p) {
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
    let views: Vec<NodePods<'_>> = node_list
        .iter()
        .map(|n| NodePods {
            node: n.as_ref(),
            placement: nodes::placement(&template_spec, n),
            pods: by_node
                .get(n.metadata.name.as_deref().unwrap_or(""))
                .cloned()
                .unwrap_or_default(),
        })
        .collect();
    let desired = views.iter().filter(|v| v.placement.should_run).count();
    let limits = match plan::limits(&ds, desired) {
        Ok(l) => l,
        Err(e) => {
            // Nothing changes until the spec does: say why where `kubectl describe` shows it.
            ctx.event(&ds, EventType::Warning, "InvalidSpec", e.to_string())
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
            write_status(&ctx, &ds, &ns, st).await?;
            return Err(e.into());
        }
    };
    let rolling = ds.spec.rolling_update();
    let todo = plan::plan(
        &views,
        &orphaned,
        &hash,
        &limits,
        rolling.as_ref(),
        ds.spec.min_ready_seconds,
        now,
    );
    let in_place = rolling
        .as_ref()
        .is_some_and(|r| r.type_ == Some(RollingUpdateType::InPlaceIfPossible));
    let opts = UpdateOptions {
        features: Features::from_gates(&ctx.gates),
        ..UpdateOptions::default()
    };
    let lc = ds.spec.lifecycle.as_ref();
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let expect = |w: &Pod| {
        if let (Some(uid), Some(rv)) = (
            w.metadata.uid.as_deref(),
            w.metadata.resource_version.as_deref(),
        ) {
            ctx.rv_exp.expect(uid, rv);
        }
    };

    // In-place progress first: later batches, grace periods, InPlaceUpdateReady back to True;
    // then the lifecycle state a finished update leaves (Updating → Updated → Normal, as
    // CloneSet's `refreshPodState`).
    for p in &pods {
        let out = ctx.inplace.refresh(&AdsHooks, p, &opts, now).await?;
        if let (Some(uid), Some(rv)) = (
            p.metadata.uid.as_deref(),
            out.new_resource_version.as_deref(),
        ) {
            ctx.rv_exp.expect(uid, rv);
            // The cached Pod is stale now; its lifecycle moves on the next sync.
            continue;
        }
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let completed = AdsHooks.pod_update_completed(p).is_ok();
        if let Some(next) = next_lifecycle_state(lc, p, &hash, completed) {
            write_lifecycle(&pod_api, lc, p, next, None, now, &expect).await?;
        }
    }

    let (post, del) = (PostParams::default(), DeleteParams::default());
    let mut to_delete = todo.delete.clone();
    let mut update_err: Option<(String, Error)> = None;
    let update_hook = lc.and_then(|l| l.in_place_update.as_ref());
    for name in &todo.replace {
        let Some(p) = pods.iter().find(|p| podutil::name(p) == name) else {
            continue;
        };
        if in_place
            && kruise_api::pod::has_readiness_gate(p, kruise_api::keys::INPLACE_UPDATE_READY)
        {
            let old = revisions
                .iter()
                .find(|r| pod::pod_hash(p) == Some(pod::revision_hash(r).as_str()));
            // CloneSet's per-Pod decision: the inPlaceUpdate hook first holds the Pod in
            // PreparingUpdate; a change that cannot go in place recreates it.
            let step = update_step(
                CloneSetPodUpdateStrategyType::InPlaceIfPossible,
                p,
                update_hook,
                || AdsHooks.calculate_spec(old, &update_rev, &opts).map(|_| ()),
            );
            match step {
                UpdateStep::PrepareUpdateHook { handler } => {
                    let state = LifecycleStateType::PreparingUpdate;
                    if let Err(e) =
                        write_lifecycle(&pod_api, lc, p, state, handler, now, &expect).await
                    {
                        update_err.get_or_insert((e.to_string(), e.into()));
                    }
                    continue;
                }
                UpdateStep::Wait => continue,
                UpdateStep::Refuse(r) => {
                    // The plan never picks a pre-deleting Pod; nothing else refuses under
                    // InPlaceIfPossible. Leave the Pod alone rather than guess.
                    tracing::warn!(pod = %name, refusal = ?r, "not updating pod");
                    continue;
                }
                UpdateStep::Recreate { reason } => {
                    if let Some(reason) = reason {
                        tracing::info!(pod = %name, %reason, "cannot update in place; recreating");
                    }
                    to_delete.push(name.clone());
                    continue;
                }
                UpdateStep::InPlace => {}
            }
            // A Pod with a lifecycle state is Updating while its update runs.
            let mut opts = opts.clone();
            if podutil::lifecycle_state(p).is_some() {
                opts.lifecycle_state = Some(LifecycleStateType::Updating);
            }
            let outcome = match ctx
                .inplace
                .update(&AdsHooks, p, old, &update_rev, &opts, now)
                .await
            {
                Ok(o) => o,
                Err(e) => {
                    // One Pod refusing its update does not hold up the DaemonSet's others.
                    let msg = e.to_string();
                    ctx.event(
                        &ds,
                        EventType::Warning,
                        "FailedUpdatePodInPlace",
                        format!("failed to update pod {name} in place: {msg}"),
                    )
                    .await;
                    update_err.get_or_insert((msg, Error::from(e)));
                    continue;
                }
            };
            match outcome {
                UpdateOutcome::Updated {
                    new_resource_version,
                    ..
                } => {
                    if let (Some(uid), Some(rv)) =
                        (p.metadata.uid.as_deref(), new_resource_version.as_deref())
                    {
                        ctx.rv_exp.expect(uid, rv);
                    }
                    ctx.event(
                        &ds,
                        EventType::Normal,
                        "SuccessfulUpdatePodInPlace",
                        format!("successfully updated pod {name} in place"),
                    )
                    .await;
                    continue;
                }
                UpdateOutcome::NotInPlace(reason) => {
                    tracing::info!(pod = %name, %reason, "cannot update in place; recreating");
                }
            }
        }
        to_delete.push(name.clone());
    }

    // Creations, expected by name before they are sent.
    let creates: Vec<_> = todo
        .create_on
        .iter()
        .map(|node| {
            let name = pod::pod_name(&ds.name_any());
            ctx.scale_exp.expect(&key, ScaleAction::Create, &name);
            (
                node.clone(),
                pod::new_pod(&ds, &ds.spec.template, &hash, node, &name),
            )
        })
        .collect();
    let results = join_all(creates.iter().map(|(_, p)| pod_api.create(&post, p))).await;
    let mut first_err: Option<(&str, kube::Error)> = None;
    for ((node, p), r) in creates.iter().zip(results) {
        if let Err(e) = r {
            ctx.scale_exp
                .observe(&key, ScaleAction::Create, podutil::name(p));
            ctx.event(
                &ds,
                EventType::Warning,
                "FailedCreate",
                format!("failed to create pod for node {node}: {e}"),
            )
            .await;
            first_err.get_or_insert(("FailedCreate", e));
        }
    }
    // The preDelete hook (upstream `syncWithPreparingDelete`): a Pod it still holds only moves
    // to PreparingDelete; it is deleted by a later sync, once its labels and finalizers are gone.
    let pre_delete = lc.and_then(|l| l.pre_delete.as_ref());
    let mut held = 0usize;
    if pre_delete.is_some() {
        let mut free = Vec::with_capacity(to_delete.len());
        for name in to_delete {
            let Some(p) = pods
                .iter()
                .find(|p| podutil::name(p) == name)
                .filter(|p| podutil::is_hooked(pre_delete, p))
            else {
                free.push(name);
                continue;
            };
            held += 1;
            let state = LifecycleStateType::PreparingDelete;
            match write_lifecycle(&pod_api, lc, p, state, None, now, &expect).await {
                Ok(true) => tracing::info!(pod = %name, "preDelete hook holds the pod"),
                Ok(false) => {}
                Err(e) => {
                    ctx.event(
                        &ds,
                        EventType::Warning,
                        "FailedDelete",
                        format!("failed to mark pod {name} PreparingDelete: {e}"),
                    )
                    .await;
                    if let WriteError::Kube(e) = e {
                        first_err.get_or_insert(("FailedDelete", e));
                    }
                }
            }
        }
        to_delete = free;
    }
    for name in &to_delete {
        ctx.scale_exp.expect(&key, ScaleAction::Delete, name);
    }
    let results = join_all(to_delete.iter().map(|n| pod_api.delete(n, &del))).await;
    for (name, r) in to_delete.iter().zip(results) {
        match r {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                ctx.scale_exp.observe(&key, ScaleAction::Delete, name);
            }
            Err(e) => {
                ctx.scale_exp.observe(&key, ScaleAction::Delete, name);
                ctx.event(
                    &ds,
                    EventType::Warning,
                    "FailedDelete",
                    format!("failed to delete pod {name}: {e}"),
                )
                .await;
                first_err.get_or_insert(("FailedDelete", e));
            }
        }
    }

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
    // CloneSet's conditions: set while a step fails, removed once it goes through. A failed
    // reconcile is retried with backoff; the other DaemonSets are reconciled meanwhile.
    match &first_err {
        Some((reason, e)) => status::set_failure(
            &mut st,
            keys::DAEMONSET_CONDITION_FAILED_SCALE,
            reason,
            &status::failure_message(e),
            now,
        ),
        None => status::clear_failure(&mut st, keys::DAEMONSET_CONDITION_FAILED_SCALE),
    }
    match &update_err {
        Some((msg, _)) => status::set_failure(
            &mut st,
            keys::DAEMONSET_CONDITION_FAILED_UPDATE,
            "FailedUpdatePodInPlace",
            msg,
            now,
        ),
        None => status::clear_failure(&mut st, keys::DAEMONSET_CONDITION_FAILED_UPDATE),
    }
    write_status(&ctx, &ds, &ns, st.clone()).await?;
    if let Some((_, e)) = first_err {
        return Err(e.into());
    }
    if let Some((_, e)) = update_err {
        return Err(e);
    }
    let busy = held > 0
        || !todo.create_on.is_empty()
        || !to_delete.is_empty()
        || !todo.replace.is_empty()
        || st.updated_number_scheduled < st.desired_number_scheduled
        || st.number_unavailable > 0;
    Ok(if busy {
        Action::requeue(RECHECK)
    } else {
        Action::requeue(Duration::from_secs(300))
    })
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
        ctx.rv_exp.observe(puid, rv);
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

async fn list_revisions(
    api: &Api<ControllerRevision>,
    ds: &DaemonSet,
    uid: &str,
) -> Result<Vec<ControllerRevision>, Error> {
    let sel = kruise_api::selector::to_selector_string(&ds.spec.selector).unwrap_or_default();
    history::list_owned(api, &sel, uid).await
}

/// The revision of the current template: an equal existing one (bumped to the newest number
/// when it was an older one: a rollback), or a new one, its name moved on by the collision
/// count when taken.
async fn update_revision(
    ctx: &Context,
    ds: &DaemonSet,
    api: &Api<ControllerRevision>,
    revisions: &mut Vec<ControllerRevision>,
) -> Result<(ControllerRevision, i32), Error> {
    let ns = ds.namespace().ok_or(Error::Unnamed)?;
    let name = ds.name_any();
    let uid = ds.uid().ok_or(Error::Unnamed)?;
    let (api_version, kind) = (DaemonSet::api_version(&()), DaemonSet::kind(&()));
    let parent = Parent {
        api_version: &api_version,
        kind: &kind,
        name: &name,
        namespace: &ns,
        uid: &uid,
    };
    let mut collision = ds
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let template = serde_json::to_value(&ds.spec.template)?;
    let labels = ds
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let annotations = BTreeMap::new();
    let candidate = revision::new_revision(
        &parent,
        &template,
        &labels,
        &annotations,
        revision::next_revision_number(revisions),
        collision,
    )?;
    // Upstream ADS labels its revisions with the hash its Pods carry.
    let (rev, origin) = history::ensure_update_revision::<Error>(
        api,
        &name,
        candidate,
        revisions,
        &mut collision,
        Some(kruise_api::keys::CONTROLLER_REVISION_HASH_LABEL),
    )
    .await?;
    if origin == Origin::Created {
        let rname = rev.metadata.name.clone().unwrap_or_default();
        ctx.event(
            ds,
            EventType::Normal,
            keys::REASON_REVISION_CREATED,
            format!("created revision {rname}"),
        )
        .await;
    }
    Ok((rev, collision))
}

/// Deletes revisions beyond `revisionHistoryLimit` that no Pod uses.
async fn truncate_history(
    ds: &DaemonSet,
    api: &Api<ControllerRevision>,
    revisions: &[ControllerRevision],
    pods: &[Arc<Pod>],
    update: &ControllerRevision,
) -> Result<(), Error> {
    let used: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| pod::pod_hash(p).map(str::to_owned))
        .collect();
    let update_name = update.metadata.name.clone().unwrap_or_default();
    let limit = ds.spec.revision_history_limit.unwrap_or(10);
    // Pods carry the hash, not the name: a revision is live when a Pod carries its hash.
    let dead: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| !used.contains(&pod::revision_hash(r)))
        .collect();
    let names: Vec<ControllerRevision> = dead.into_iter().cloned().collect();
    for name in
        revision::revisions_to_truncate(&names, &BTreeSet::new(), &update_name, &update_name, limit)
    {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
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
    let mut body = serde_json::to_value(&new)?;
    if let (Some(old), Value::Object(obj)) = (ds.status.as_ref(), &mut body)
        && let Value::Object(old) = serde_json::to_value(old)?
    {
        for k in old.keys() {
            obj.entry(k.clone()).or_insert(Value::Null);
        }
    }
    let api: Api<DaemonSet> = Api::namespaced(ctx.client.clone(), ns);
    api.patch_status(
        &ds.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": body })),
    )
    .await?;
    Ok(())
}
