//! One reconcile of an Advanced StatefulSet (upstream `ReconcileStatefulSet`,
//! `updateStatefulSet` and `rollingUpdateStatefulsetPods`): gates, revisions, in-place refresh,
//! the scale half, the update half, status and history.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps::v1beta1::{
    PersistentVolumeClaimRetentionPolicyType, PodManagementPolicyType, PodUpdateStrategyType,
    StatefulSet, StatefulSetStatus, StatefulSetUpdateStrategyType,
};
use kruise_api::appspub::LifecycleStateType;
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::hooks::AstsHooks;
use super::identity::{self, OrdinalRange};
use super::lifecycle::{self, Refusal, UpdateStep};
use super::plan::{self, Rolling, ScaleOp};
use super::{revisions, status};
use crate::expectations::{
    EXPECTATION_TIMEOUT, ScaleAction, ScaleSatisfaction, VersionSatisfaction,
};
use crate::inplace::{Features, InPlaceHooks, UpdateOptions, UpdateOutcome};
use crate::workload::intstr::scaled_value;
use crate::workload::podutil;

/// Longest wait before looking at the world again while something is pending.
const RECHECK: Duration = Duration::from_secs(30);

/// What the spec asks of one sync, read and checked once.
struct Settings {
    range: OrdinalRange,
    monotonic: bool,
    scale_max_unavailable: Option<i32>,
    rolling: Rolling,
    paused: bool,
    on_delete: bool,
    policy: PodUpdateStrategyType,
    opts: UpdateOptions,
}

fn settings(sts: &StatefulSet, gates: &FeatureGates) -> Result<Settings, Error> {
    let replicas = sts.spec.replicas();
    let ru = sts
        .spec
        .update_strategy
        .rolling_update
        .clone()
        .unwrap_or_default();
    let max_unavailable = match &ru.max_unavailable {
        None => 1,
        Some(v) => scaled_value(v, replicas, false).map_err(|e| Error::Spec {
            field: "spec.updateStrategy.rollingUpdate.maxUnavailable",
            reason: e.to_string(),
        })?,
    };
    let scale_max_unavailable = match sts
        .spec
        .scale_strategy
        .as_ref()
        .and_then(|s| s.max_unavailable.as_ref())
    {
        None => None,
        Some(v) => Some(
            scaled_value(v, replicas, false)
                .map_err(|e| Error::Spec {
                    field: "spec.scaleStrategy.maxUnavailable",
                    reason: e.to_string(),
                })?
                .max(1),
        ),
    };
    let policy = ru.pod_update_policy.unwrap_or_default();
    let min_ready_seconds = ru.min_ready_seconds.unwrap_or(0);
    Ok(Settings {
        range: OrdinalRange::of(sts, gates)?,
        monotonic: sts.spec.pod_management_policy() == PodManagementPolicyType::OrderedReady,
        scale_max_unavailable,
        rolling: Rolling {
            partition: ru.partition.unwrap_or(0),
            max_unavailable: max_unavailable.max(1),
            unordered: ru.unordered_update.is_some(),
            priority: ru
                .unordered_update
                .as_ref()
                .and_then(|u| u.priority_strategy.clone()),
            replicas,
            min_ready_seconds,
        },
        paused: ru.paused,
        on_delete: sts.spec.update_strategy.type_ == Some(StatefulSetUpdateStrategyType::OnDelete),
        policy,
        opts: UpdateOptions {
            grace_period_seconds: ru
                .in_place_update_strategy
                .as_ref()
                .map_or(0, |s| s.grace_period_seconds),
            ignore_volume_claim_templates_hash_diff: true,
            features: Features::from_gates(gates),
            ..Default::default()
        },
    })
}

fn namespace_terminating(err: &Error) -> bool {
    matches!(err, Error::Kube(kube::Error::Api(s)) if s.is_forbidden() && s.message.contains("being terminated"))
}

/// One reconcile of `sts` (the runner adds its span, timing and metrics).
pub async fn reconcile(sts: Arc<StatefulSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    match reconcile_inner(&sts, &ctx).await {
        Err(e) if namespace_terminating(&e) => Ok(Action::await_change()),
        other => other,
    }
}

/// Requeue after the shortest of the waits collected.
#[derive(Default)]
struct Requeue(Option<Duration>);

impl Requeue {
    fn push(&mut self, d: Option<Duration>) {
        if let Some(d) = d {
            self.0 = Some(self.0.map_or(d, |o| o.min(d)));
        }
    }
    fn action(&self) -> Action {
        match self.0 {
            Some(d) => Action::requeue(d.min(RECHECK)),
            None => Action::await_change(),
        }
    }
}

async fn reconcile_inner(sts: &StatefulSet, ctx: &Context) -> Result<Action, Error> {
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

    let owned = ctx.pods.owned_by(&ns, &uid);
    let pods: Vec<&Pod> = owned.iter().map(|p| p.as_ref()).collect();

    let rev_api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let mut revs = revisions::list(&rev_api, sts, &uid).await?;
    let (current, update, collision) = revisions::active(ctx, sts, &rev_api, &mut revs).await?;
    let current_name = current.metadata.name.clone().unwrap_or_default();
    let update_name = update.metadata.name.clone().unwrap_or_default();

    if let Some(wait) = wait_for_versions(ctx, &pods, clock) {
        return Ok(wait);
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
        volume_claims: old_status.volume_claims.clone(),
        ..Default::default()
    };

    let sync = if sts.metadata.deletion_timestamp.is_some() {
        Ok(())
    } else {
        let s = Sync {
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
        ctx.rv_exp.observe(uid, rv);
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

/// One sync's writes.
struct Sync<'a> {
    ctx: &'a Context,
    sts: &'a StatefulSet,
    key: &'a str,
    ns: &'a str,
    settings: &'a Settings,
    current: &'a ControllerRevision,
    update: &'a ControllerRevision,
    revisions: &'a [ControllerRevision],
    now: Timestamp,
}

impl Sync<'_> {
    async fn run(
        &self,
        pods: &[&Pod],
        st: &mut StatefulSetStatus,
        requeue: &mut Requeue,
    ) -> Result<(), Error> {
        let set = self.sts.name_any();
        let slots = plan::slots(&set, &self.settings.range, pods);

        // Move in-place updates forward first (grace periods, next batch, InPlaceUpdateReady),
        // then the lifecycle state they leave behind (upstream `refreshPodState`).
        let update_name = self.update.metadata.name.clone().unwrap_or_default();
        let lc = self.sts.spec.lifecycle.as_ref();
        let mut refreshed = false;
        for pod in pods.iter().filter(|p| !plan::is_terminating(p)) {
            let out = self
                .ctx
                .inplace
                .refresh(&AstsHooks, pod, &self.settings.opts, self.now)
                .await?;
            requeue.push(out.requeue_after);
            if let Some(rv) = out.new_resource_version.as_deref() {
                self.ctx
                    .expect_version(pod.metadata.uid.as_deref(), Some(rv));
                refreshed = true;
                // The cached pod is now stale; its lifecycle moves on the next round.
                continue;
            }
            let completed = AstsHooks.pod_update_completed(pod).is_ok();
            if let Some(next) = lifecycle::next_lifecycle_state(lc, pod, &update_name, completed)
                && lifecycle::set_lifecycle(
                    self.ctx,
                    &self.pod_api(),
                    lc,
                    pod,
                    next,
                    None,
                    self.now,
                )
                .await?
            {
                refreshed = true;
            }
        }

        let scale = plan::plan_scale(
            &self.settings.range,
            &slots,
            self.settings.monotonic,
            self.settings.scale_max_unavailable,
            self.settings.rolling.min_ready_seconds,
            self.now,
        );
        requeue.push(scale.wait);
        for op in &scale.ops {
            let res = match op {
                ScaleOp::Create(ord) => self.create(*ord).await,
                ScaleOp::Delete { name, .. } => {
                    match pods.iter().find(|p| podutil::name(p) == name) {
                        Some(pod) => self.delete_pod(pod, "scale").await,
                        None => self.delete(name, "scale").await,
                    }
                }
            };
            if let Err(e) = res {
                let reason = if matches!(op, ScaleOp::Create(_)) {
                    "FailedCreate"
                } else {
                    "FailedDelete"
                };
                self.ctx
                    .event(
                        self.sts,
                        EventType::Warning,
                        reason,
                        e.condition_message(),
                        None,
                    )
                    .await;
                status::set_condition(
                    st,
                    status::condition(
                        keys::STATEFULSET_CONDITION_FAILED_CREATE_POD,
                        reason,
                        &e.condition_message(),
                        self.now,
                    ),
                );
                return Err(e);
            }
        }
        if scale
            .ops
            .iter()
            .all(|op| matches!(op, ScaleOp::Delete { .. }))
        {
            status::remove_condition(st, keys::STATEFULSET_CONDITION_FAILED_CREATE_POD);
        }
        self.retain_claims(pods).await?;

        if scale.exit || refreshed || self.settings.on_delete || self.settings.paused {
            if scale.exit {
                tracing::debug!(blocked_by = ?scale.blocked_by, "waiting on ordered scaling");
            }
            return Ok(());
        }

        let is_updated = |p: &Pod| AstsHooks.equals_revision(p, &update_name);
        let pending = |p: &Pod| AstsHooks.pod_update_completed(p).is_err();
        let up = plan::plan_update(
            &self.settings.rolling,
            &slots,
            &is_updated,
            &pending,
            self.now,
        );
        requeue.push(up.wait);
        for i in up.targets {
            let Some(pod) = slots.replicas[i] else {
                continue;
            };
            if let Err(e) = self.update_pod(pod, requeue).await {
                self.ctx
                    .event(
                        self.sts,
                        EventType::Warning,
                        "FailedUpdatePod",
                        e.condition_message(),
                        Some(pod.object_ref(&())),
                    )
                    .await;
                status::set_condition(
                    st,
                    status::condition(
                        keys::STATEFULSET_CONDITION_FAILED_UPDATE_POD,
                        "FailedUpdatePod",
                        &e.condition_message(),
                        self.now,
                    ),
                );
                return Err(e);
            }
        }
        status::remove_condition(st, keys::STATEFULSET_CONDITION_FAILED_UPDATE_POD);
        Ok(())
    }

    /// Creates the PVCs of `ord` (keeping existing ones) and then its pod. Ordinals below the
    /// partition are created at the current revision, the rest at the update revision.
    async fn create(&self, ord: i32) -> Result<(), Error> {
        let pvc_api: Api<PersistentVolumeClaim> = Api::namespaced(self.ctx.client.clone(), self.ns);
        for pvc in identity::new_claims(self.sts, ord, &self.ctx.gates) {
            match pvc_api.create(&PostParams::default(), &pvc).await {
                Ok(_) => {
                    tracing::info!(
                        pvc = pvc.metadata.name.as_deref().unwrap_or(""),
                        "created PVC"
                    );
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => return Err(e.into()),
            }
        }
        let idx = ord - self.settings.range.start;
        let rev = if idx < self.settings.rolling.partition && !self.settings.rolling.unordered {
            self.current
        } else {
            self.update
        };
        let tpl = revisions::template_of(rev)?;
        let rev_name = rev.metadata.name.clone().unwrap_or_default();
        let pod = identity::new_pod(self.sts, &tpl, &rev_name, ord, self.now, &self.ctx.gates);
        let pod_name = identity::pod_name(&self.sts.name_any(), ord);
        self.ctx
            .scale_exp
            .expect(self.key, ScaleAction::Create, &pod_name);
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), self.ns);
        match api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                tracing::info!(pod = %pod_name, revision = %rev_name, "created pod");
                self.ctx
                    .event(
                        self.sts,
                        EventType::Normal,
                        "SuccessfulCreate",
                        format!(
                            "create Pod {pod_name} in StatefulSet {} successful",
                            self.sts.name_any()
                        ),
                        Some(created.object_ref(&())),
                    )
                    .await;
                Ok(())
            }
            Err(e) => {
                self.ctx
                    .scale_exp
                    .observe(self.key, ScaleAction::Create, &pod_name);
                Err(e.into())
            }
        }
    }

    fn pod_api(&self) -> Api<Pod> {
        Api::namespaced(self.ctx.client.clone(), self.ns)
    }

    /// Deletes `pod` (upstream `deletePod`), unless the preDelete hook holds it: then it only
    /// moves to PreparingDelete and stays until the hook's labels and finalizers are gone.
    async fn delete_pod(&self, pod: &Pod, why: &str) -> Result<(), Error> {
        let lc = self.sts.spec.lifecycle.as_ref();
        let hook = lc.and_then(|l| l.pre_delete.as_ref());
        if lifecycle::is_hooked(hook, pod) {
            let written = lifecycle::set_lifecycle(
                self.ctx,
                &self.pod_api(),
                lc,
                pod,
                LifecycleStateType::PreparingDelete,
                None,
                self.now,
            )
            .await?;
            if written {
                tracing::info!(
                    pod = podutil::name(pod),
                    why,
                    "preDelete hook holds the pod"
                );
            }
            return Ok(());
        }
        self.delete(podutil::name(pod), why).await
    }

    async fn delete(&self, name: &str, why: &str) -> Result<(), Error> {
        let api: Api<Pod> = Api::namespaced(self.ctx.client.clone(), self.ns);
        self.ctx
            .scale_exp
            .expect(self.key, ScaleAction::Delete, name);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(pod = %name, why, "deleted pod");
                self.ctx
                    .event(
                        self.sts,
                        EventType::Normal,
                        "SuccessfulDelete",
                        format!(
                            "delete Pod {name} in StatefulSet {} successful",
                            self.sts.name_any()
                        ),
                        None,
                    )
                    .await;
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                self.ctx
                    .scale_exp
                    .observe(self.key, ScaleAction::Delete, name);
                Ok(())
            }
            Err(e) => {
                self.ctx
                    .scale_exp
                    .observe(self.key, ScaleAction::Delete, name);
                Err(e.into())
            }
        }
    }

    /// `whenScaled: Delete`: the PVCs of ordinals no longer in the range go once their pod is
    /// gone. Retain (the default) keeps them for a later scale-up.
    async fn retain_claims(&self, pods: &[&Pod]) -> Result<(), Error> {
        let policy = self
            .sts
            .spec
            .persistent_volume_claim_retention_policy
            .as_ref()
            .and_then(|p| p.when_scaled);
        if !self.ctx.gates.enabled(Gate::StatefulSetAutoDeletePVC)
            || policy != Some(PersistentVolumeClaimRetentionPolicyType::Delete)
            || self.sts.spec.volume_claim_templates.is_empty()
        {
            return Ok(());
        }
        let set = self.sts.name_any();
        let live: Vec<i32> = pods
            .iter()
            .filter_map(|p| identity::ordinal_of(&set, podutil::name(p)))
            .collect();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.ctx.client.clone(), self.ns);
        for pvc in api.list(&ListParams::default()).await?.items {
            let pvc_name = pvc.metadata.name.clone().unwrap_or_default();
            let Some(ord) = identity::claim_ordinal(self.sts, &pvc_name) else {
                continue;
            };
            if self.settings.range.contains(ord)
                || live.contains(&ord)
                || pvc.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            match api.delete(&pvc_name, &DeleteParams::default()).await {
                Ok(_) => {
                    self.ctx
                        .event(
                            self.sts,
                            EventType::Normal,
                            "SuccessfulDeletePVC",
                            format!("delete PVC {pvc_name} of scaled-down ordinal {ord}"),
                            None,
                        )
                        .await;
                }
                Err(kube::Error::Api(s)) if s.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Updates one pod to the update revision (upstream `inPlaceUpdatePod`, then `deletePod`):
    /// in place when the policy allows and the change can go in place, after the inPlaceUpdate
    /// hook lets it; else by deleting it (the scale half recreates it under the same name, with
    /// the same PVCs). The step is CloneSet's [`lifecycle::update_step`].
    async fn update_pod(&self, pod: &Pod, requeue: &mut Requeue) -> Result<(), Error> {
        let name = podutil::name(pod).to_string();
        let lc = self.sts.spec.lifecycle.as_ref();
        let hook = lc.and_then(|l| l.in_place_update.as_ref());
        let old = self.revisions.iter().find(|r| {
            r.metadata
                .name
                .as_deref()
                .is_some_and(|n| AstsHooks.equals_revision(pod, n))
        });
        let step = lifecycle::update_step(
            lifecycle::as_cloneset_policy(self.settings.policy),
            pod,
            hook,
            || {
                AstsHooks
                    .calculate_spec(old, self.update, &self.settings.opts)
                    .map(|_| ())
            },
        );
        match step {
            UpdateStep::PrepareUpdateHook { handler } => {
                lifecycle::set_lifecycle(
                    self.ctx,
                    &self.pod_api(),
                    lc,
                    pod,
                    LifecycleStateType::PreparingUpdate,
                    handler,
                    self.now,
                )
                .await?;
                Ok(())
            }
            UpdateStep::Wait => Ok(()),
            UpdateStep::Refuse(Refusal::BadLifecycle(state)) => {
                Err(Error::Lifecycle { pod: name, state })
            }
            UpdateStep::Refuse(Refusal::InPlaceOnly(reason)) => {
                Err(Error::InPlaceOnly { pod: name, reason })
            }
            UpdateStep::Recreate { reason } => {
                if let Some(reason) = reason {
                    tracing::info!(pod = %name, %reason, "cannot update in place; recreating");
                }
                self.delete_pod(pod, "update").await
            }
            UpdateStep::InPlace => self.update_in_place(pod, old, requeue).await,
        }
    }

    async fn update_in_place(
        &self,
        pod: &Pod,
        old: Option<&ControllerRevision>,
        requeue: &mut Requeue,
    ) -> Result<(), Error> {
        let name = podutil::name(pod).to_string();
        // A Pod with a lifecycle state is Updating while the update runs (upstream sets it only
        // when the state label is there).
        let mut opts = self.settings.opts.clone();
        if podutil::lifecycle_state(pod).is_some() {
            opts.lifecycle_state = Some(LifecycleStateType::Updating);
        }
        let out = self
            .ctx
            .inplace
            .update(&AstsHooks, pod, old, self.update, &opts, self.now)
            .await?;
        match out {
            UpdateOutcome::Updated {
                new_resource_version,
                requeue_after,
            } => {
                self.ctx
                    .expect_version(pod.metadata.uid.as_deref(), new_resource_version.as_deref());
                requeue.push(requeue_after);
                self.ctx
                    .event(
                        self.sts,
                        EventType::Normal,
                        "SuccessfulUpdatePodInPlace",
                        format!("successfully update pod {name} in-place"),
                        Some(pod.object_ref(&())),
                    )
                    .await;
                Ok(())
            }
            UpdateOutcome::NotInPlace(reason) => {
                if self.settings.policy == PodUpdateStrategyType::InPlaceOnly {
                    return Err(Error::InPlaceOnly { pod: name, reason });
                }
                tracing::info!(pod = %name, %reason, "cannot update in place; recreating");
                self.delete_pod(pod, "update").await
            }
        }
    }
}
