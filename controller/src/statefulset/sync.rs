//! The writes of one Advanced StatefulSet sync, as named steps (upstream `updateStatefulSet`
//! and `rollingUpdateStatefulsetPods`): in-place refresh and the lifecycle it leaves, the scale
//! half (create, delete, PVC retention), then the update half (one Pod at a time, in place
//! through the shared engine when it can).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps::v1beta1::{
    PersistentVolumeClaimRetentionPolicyType, PodUpdateStrategyType, StatefulSet, StatefulSetStatus,
};
use kruise_api::appspub::LifecycleStateType;
use kruise_api::features::Gate;
use kruise_api::keys;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};

use super::claims::ClaimsByName;
use super::context::Context;
use super::error::Error;
use super::hooks::AstsHooks;
use super::identity;
use super::lifecycle;
use super::plan::{self, ScaleOp};
use super::revisions;
use super::settings::Settings;
use super::status;
use crate::expectations::ScaleAction;
use crate::inplace::{InPlaceHooks, UpdateOutcome};
use crate::workload::lifecycle::next_lifecycle_state;
use crate::workload::podutil;
use crate::workload::quiet::{Basis, is_quiet};
use crate::workload::update_step::{Refusal, UpdateStep, update_step};

/// Longest wait before looking at the world again while something is pending.
pub(super) const RECHECK: Duration = Duration::from_secs(30);

/// Requeue after the shortest of the waits collected.
#[derive(Default)]
pub(super) struct Requeue(Option<Duration>);

impl Requeue {
    pub fn push(&mut self, d: Option<Duration>) {
        if let Some(d) = d {
            self.0 = Some(self.0.map_or(d, |o| o.min(d)));
        }
    }
    pub fn action(&self) -> Action {
        match self.0 {
            Some(d) => Action::requeue(d.min(RECHECK)),
            None => Action::await_change(),
        }
    }
}

/// One sync's writes.
pub(super) struct SyncPass<'a> {
    pub ctx: &'a Context,
    pub sts: &'a StatefulSet,
    pub key: &'a str,
    pub ns: &'a str,
    pub settings: &'a Settings,
    pub current: &'a ControllerRevision,
    pub update: &'a ControllerRevision,
    pub revisions: &'a [ControllerRevision],
    pub now: Timestamp,
    /// The namespace's claims by name.
    pub claims: &'a ClaimsByName,
    /// The claims follow the templates as the Pods are updated ([`super::claims::resize_on_update`]).
    pub resize: bool,
}

impl SyncPass<'_> {
    /// The sync's steps: in-place refresh, the scale half, then (unless scaling, a refresh,
    /// OnDelete or a pause holds it) the update half.
    pub async fn run(
        &self,
        pods: &[&Pod],
        st: &mut StatefulSetStatus,
        requeue: &mut Requeue,
    ) -> Result<(), Error> {
        let set = self.sts.name_any();
        let slots = plan::slots(&set, &self.settings.range, pods);
        let refreshed = self.refresh(pods, requeue).await?;
        let exit = self.scale(pods, &slots, st, requeue).await?;
        if exit || refreshed || self.settings.on_delete || self.settings.paused {
            return Ok(());
        }
        self.update_pods(&slots, st, requeue).await
    }

    fn update_name(&self) -> String {
        self.update.metadata.name.clone().unwrap_or_default()
    }

    /// Moves in-place updates forward first (grace periods, next batch, InPlaceUpdateReady),
    /// then the lifecycle state they leave behind (upstream `refreshPodState`). Returns whether
    /// a Pod was written (the cache is stale then and the update half waits a round).
    async fn refresh(&self, pods: &[&Pod], requeue: &mut Requeue) -> Result<bool, Error> {
        let update_name = self.update_name();
        let lc = self.sts.spec.lifecycle.as_ref();
        let mut refreshed = false;
        // Pods unchanged since a refresh had nothing to do for them are not asked again (see
        // `workload::quiet`).
        let mut quiet = self.ctx.quiet.begin(
            self.key,
            Basis {
                generation: self.sts.metadata.generation,
                update_revision: update_name.clone(),
            },
        );
        for pod in pods.iter().filter(|p| !plan::is_terminating(p)) {
            if quiet.was_quiet(pod) {
                continue;
            }
            if is_quiet(
                &AstsHooks,
                pod,
                &self.settings.opts,
                lc,
                &update_name,
                self.now,
            ) {
                quiet.quiet(pod);
                continue;
            }
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
            if let Some(next) = next_lifecycle_state(lc, pod, &update_name, completed)
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
        quiet.finish();
        Ok(refreshed)
    }

    /// The scale half: creations and deletions in the plan's order, the failed-create
    /// condition, then PVC retention. Returns whether ordered scaling holds the rest back.
    async fn scale(
        &self,
        pods: &[&Pod],
        slots: &plan::Slots<'_>,
        st: &mut StatefulSetStatus,
        requeue: &mut Requeue,
    ) -> Result<bool, Error> {
        let scale = plan::plan_scale(
            &self.settings.range,
            slots,
            self.settings.monotonic,
            self.settings.scale_max_unavailable,
            self.settings.rolling.min_ready_seconds,
            self.now,
        );
        requeue.push(scale.wait);
        let update_name = self.update_name();
        let is_updated = |p: &Pod| AstsHooks.equals_revision(p, &update_name);
        let rolling = &self.settings.rolling;
        // Pods not updated, the ones created below included (upstream counts its replicas as
        // it fills them in).
        let mut not_updated = slots
            .replicas
            .iter()
            .flatten()
            .filter(|p| !rolling.counts_as_updated(p, &is_updated))
            .count();
        for op in &scale.ops {
            let res = match op {
                ScaleOp::Create(ord) => {
                    let at_current =
                        rolling.starts_at_current(ord - self.settings.range.start, not_updated);
                    not_updated += usize::from(at_current);
                    self.create(*ord, at_current).await
                }
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
        if scale.exit {
            tracing::debug!(blocked_by = ?scale.blocked_by, "waiting on ordered scaling");
        }
        Ok(scale.exit)
    }

    /// The update half: the Pods the rolling update picks, one at a time; the first failure
    /// stops it and is the failed-update condition.
    async fn update_pods(
        &self,
        slots: &plan::Slots<'_>,
        st: &mut StatefulSetStatus,
        requeue: &mut Requeue,
    ) -> Result<(), Error> {
        let update_name = self.update_name();
        let is_updated = |p: &Pod| AstsHooks.equals_revision(p, &update_name);
        let pending = |p: &Pod| AstsHooks.pod_update_completed(p).is_err();
        let claim_state = |p: &Pod| self.claim_state(p);
        let up = plan::plan_update(
            &self.settings.rolling,
            slots,
            &is_updated,
            &pending,
            &claim_state,
            self.now,
        );
        requeue.push(up.wait);
        for &i in &up.specified_delete {
            if let Some(pod) = slots.replicas[i] {
                self.delete_pod(pod, "specified-delete").await?;
            }
        }
        for i in up.targets {
            let Some(pod) = slots.replicas[i] else {
                continue;
            };
            let res = match self.resize_claims(pod).await {
                // Upstream patches the claims first and updates the Pod once they are resized
                // (or wait only for the file system, which the Pod's next start grows).
                Ok(true) if !is_updated(pod) => self.update_pod(pod, requeue).await,
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            if let Err(e) = res {
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

    /// Creates the PVCs of `ord` (keeping existing ones) and then its pod, at the current
    /// revision if `at_current` (see [`plan::Rolling::starts_at_current`]), else at the update
    /// revision.
    async fn create(&self, ord: i32, at_current: bool) -> Result<(), Error> {
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
        let rev = if at_current {
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
    /// the same PVCs). The step is the shared [`update_step`].
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
        let step = update_step(
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
                self.delete_pod(pod, "update").await?;
                self.ctx
                    .metrics
                    .recreate_started(super::context::METRIC_NAME);
                Ok(())
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
                self.delete_pod(pod, "update").await?;
                self.ctx
                    .metrics
                    .recreate_started(super::context::METRIC_NAME);
                Ok(())
            }
        }
    }
}
