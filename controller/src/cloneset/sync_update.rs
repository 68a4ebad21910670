//! The update half of a sync (upstream `cloneset_update.go`): refresh every Pod (in-place
//! completion, lifecycle), then update the chosen Pods one [`UpdateStep`] each.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::CloneSetUpdateStrategyType;
use kruise_api::appspub::{Lifecycle, LifecycleStateType};
use kruise_api::features::Gate;
use kube::runtime::events::EventType;

use super::context::METRIC_NAME;
use super::error::Error;
use super::hooks::CloneSetPodHooks;
use super::spec::{pod_update_policy, update_options};
use super::sync::{Requeue, Syncer, concurrently_in_order};
use super::{diff, update};
use crate::inplace::{
    self, InPlaceControl, InPlaceHooks, NotInPlace, UpdateOptions, UpdateOutcome,
};
use crate::workload::budget;
use crate::workload::lifecycle::next_lifecycle_state;
use crate::workload::podfacts::PodFacts;
use crate::workload::podpatch::{PodPart, patch_pod};
use crate::workload::podutil;
use crate::workload::quiet::Basis;
use crate::workload::specifieddelete;
use crate::workload::update_step::{Fallback, Refusal, UpdateStep, fallback, update_step};

impl Syncer<'_> {
    /// `by_revision`: the diffs of these Pods split by their revision label, when the scale
    /// half already has them; `facts` are those of `pods`, in the same order.
    pub(super) async fn update_pods(
        &self,
        pods: &[&Pod],
        facts: &[PodFacts<'_>],
        requeue: &mut Requeue,
        by_revision: Option<diff::Diffs>,
    ) -> Result<(), Error> {
        let hooks = CloneSetPodHooks::new(&self.ctx.gates);
        let opts = update_options(self.cs, &self.ctx.gates);
        let update_name = self.update_name();
        let lifecycle = self.cs.spec.lifecycle.as_ref();

        // Most Pods have nothing to refresh at most reconciles, and that is decided here
        // without a future: making one per Pod copied 10 to 20 KiB per Pod per reconcile, the
        // largest cost of a reconcile of a large CloneSet. Only the others get one.
        // A Pod that did not change since a refresh had nothing to do for it is not asked
        // again (see `workload::quiet`): the work then follows the Pods that changed.
        let mut quiet = self.ctx.quiet.begin(
            self.key,
            Basis {
                generation: self.cs.metadata.generation,
                update_revision: update_name.clone(),
            },
        );
        let mut to_write = Vec::new();
        for (i, pod) in pods.iter().enumerate() {
            if quiet.was_quiet(pod) {
                continue;
            }
            match self.refresh_unwritten(pod, &hooks, &opts, &update_name, lifecycle) {
                Some(None) => quiet.quiet(pod),
                Some(after) => requeue.push(after),
                None => to_write.push(i),
            }
        }
        quiet.finish();
        // Pods are independent: their refreshes (completion checks, InPlaceUpdateReady back to
        // True) run side by side, so the last pod of a large batch does not wait for every
        // round trip of the ones before it.
        // Made one at a time as slots free up (an iterator, not a Vec: see
        // `concurrently_in_order`).
        let refreshed: Vec<Result<(bool, Option<Duration>), Error>> =
            concurrently_in_order(to_write.len(), |k| {
                self.refresh_pod(pods[to_write[k]], &hooks, &opts, &update_name, lifecycle)
            })
            .await;
        let mut modified = false;
        let mut first_err = None;
        for r in refreshed {
            match r {
                Ok((m, after)) => {
                    modified |= m;
                    requeue.push(after);
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        if modified {
            return Ok(());
        }

        let strategy = &self.cs.spec.update_strategy;
        if strategy.type_ == Some(CloneSetUpdateStrategyType::OnDelete) {
            return Ok(());
        }
        let rolling = strategy.rolling_update.as_ref();
        if rolling.is_some_and(|r| r.paused) {
            return Ok(());
        }
        let diffs = by_revision.unwrap_or_else(|| {
            diff::calculate_diffs(
                &self.settings,
                facts,
                &|p| p.is_at_revision(&update_name),
                self.now,
            )
            .0
        });
        if diffs.update_num == 0 {
            return Ok(());
        }
        // Negative only under CloneSetPartitionRollback: Pods go back to the current revision.
        let target = if diffs.update_num < 0 {
            self.current
        } else {
            self.update
        };
        let chosen = self.choose(pods, facts, &diffs, &update_name, target);
        let chosen = self.within_budget(pods, chosen, requeue).await?;
        // Every chosen pod is already within maxUnavailable/partition, so their updates are
        // sent together (bounded) rather than one pod's round trips after another's.
        let results: Vec<(Result<(), Error>, Requeue)> = concurrently_in_order(chosen.len(), |k| {
            self.update_pod_alone(pods[chosen[k]], target, &opts)
        })
        .await;
        let mut first_err = None;
        for (res, r) in results {
            requeue.push(r.0);
            if let Err(e) = res {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// The Pods to move to `target` now, in order (upstream `Update` steps 3 to 5): those
    /// waiting, sorted, cut to the update number and maxUnavailable.
    fn choose(
        &self,
        pods: &[&Pod],
        facts: &[PodFacts<'_>],
        diffs: &diff::Diffs,
        update_name: &str,
        target: &ControllerRevision,
    ) -> Vec<usize> {
        let rolling = self.cs.spec.update_strategy.rolling_update.as_ref();
        let back = diffs.update_num < 0;
        let (wait, skipped) = update::candidates(pods, facts, update_name, back);
        for (i, why) in skipped {
            tracing::debug!(pod = podutil::name(pods[i]), ?why, "not updating pod now");
        }
        let sorted = update::sort_candidates(
            pods,
            wait,
            rolling.and_then(|r| r.priority_strategy.as_ref()),
            rolling.map(|r| r.scatter_strategy.as_slice()),
        );
        update::limit_candidates(
            facts,
            sorted,
            diffs,
            target.metadata.name.as_deref().unwrap_or_default(),
            self.settings.min_ready_seconds,
            self.now,
        )
    }

    /// When [`Self::refresh_pod`] would write nothing for `pod`: `Some` of the requeue it would
    /// answer, decided without a future; `None` when it would write (or fail).
    fn refresh_unwritten(
        &self,
        pod: &Pod,
        hooks: &CloneSetPodHooks,
        opts: &UpdateOptions,
        update_name: &str,
        lifecycle: Option<&Lifecycle>,
    ) -> Option<Option<Duration>> {
        let out = InPlaceControl::refresh_unwritten(hooks, pod, opts, self.now)?;
        let completed = hooks.pod_update_completed(pod).is_ok();
        next_lifecycle_state(lifecycle, pod, update_name, completed)
            .is_none()
            .then_some(out.requeue_after)
    }

    /// One pod's share of the refresh: completion check and InPlaceUpdateReady, then the
    /// lifecycle state. Returns whether the lifecycle changed and when to look again.
    async fn refresh_pod(
        &self,
        pod: &Pod,
        hooks: &CloneSetPodHooks,
        opts: &UpdateOptions,
        update_name: &str,
        lifecycle: Option<&Lifecycle>,
    ) -> Result<(bool, Option<Duration>), Error> {
        let out = self.ctx.inplace.refresh(hooks, pod, opts, self.now).await?;
        self.ctx.expect_version(
            pod.metadata.uid.as_deref(),
            out.new_resource_version.as_deref(),
        );
        let completed = hooks.pod_update_completed(pod).is_ok();
        let Some(next) = next_lifecycle_state(lifecycle, pod, update_name, completed) else {
            return Ok((false, out.requeue_after));
        };
        let was_updating = podutil::lifecycle_state(pod) == Some(LifecycleStateType::Updating);
        if !self.set_lifecycle(pod, next, None).await? {
            return Ok((false, out.requeue_after));
        }
        if was_updating {
            self.ctx.metrics.inplace_completed(METRIC_NAME);
            self.event_about(
                pod,
                EventType::Normal,
                "SuccessfulUpdatePodInPlaceCompleted",
                format!("pod {} finished its in-place update", podutil::name(pod)),
            )
            .await;
        }
        Ok((true, out.requeue_after))
    }

    /// The chosen Pods, in order, up to the first one its PodUnavailableBudget does not let go
    /// now (upstream's check before `updatePod`, under `PodUnavailableBudgetUpdateGate`); that
    /// Pod gets upstream's Event and the CloneSet looks again in a second.
    async fn within_budget(
        &self,
        pods: &[&Pod],
        chosen: Vec<usize>,
        requeue: &mut Requeue,
    ) -> Result<Vec<usize>, Error> {
        if !self.ctx.gates.enabled(Gate::PodUnavailableBudgetUpdateGate) {
            return Ok(chosen);
        }
        let vertical = self.ctx.gates.enabled(Gate::InPlacePodVerticalScaling);
        let mut allowed = Vec::with_capacity(chosen.len());
        for i in chosen {
            match budget::charge_update(
                &self.ctx.client,
                &self.ctx.recorder,
                &self.ctx.metrics.protection,
                pods[i],
                vertical,
            )
            .await?
            {
                budget::Verdict::Allowed => allowed.push(i),
                budget::Verdict::Refused(why) => {
                    tracing::debug!(pod = podutil::name(pods[i]), %why, "update waits for its PodUnavailableBudget");
                    requeue.push(Some(Duration::from_secs(1)));
                    break;
                }
            }
        }
        Ok(allowed)
    }

    /// [`Self::update_pod`] with its own requeue, so several can run at once.
    async fn update_pod_alone(
        &self,
        pod: &Pod,
        target: &ControllerRevision,
        opts: &UpdateOptions,
    ) -> (Result<(), Error>, Requeue) {
        let mut r = Requeue::default();
        let res = self.update_pod(pod, target, opts, &mut r).await;
        (res, r)
    }

    /// Upstream `updatePod`: decide the Pod's [`UpdateStep`] toward `target` (the update
    /// revision, or the current one for a rollback) and perform it.
    async fn update_pod(
        &self,
        pod: &Pod,
        target: &ControllerRevision,
        opts: &UpdateOptions,
        requeue: &mut Requeue,
    ) -> Result<(), Error> {
        let hooks = CloneSetPodHooks::new(&self.ctx.gates);
        let policy = pod_update_policy(self.cs);
        let old = self.revisions.iter().find(|r| {
            r.metadata
                .name
                .as_deref()
                .is_some_and(|n| podutil::is_at_revision(pod, n))
        });
        let in_place_hook = self
            .cs
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.in_place_update.as_ref());
        let step = update_step(policy, pod, in_place_hook, || {
            inplace::can_update_in_place(&hooks, old, target, opts)
        });
        match step {
            UpdateStep::PrepareUpdateHook { handler } => {
                self.set_lifecycle(pod, LifecycleStateType::PreparingUpdate, handler)
                    .await?;
                Ok(())
            }
            UpdateStep::Wait => Ok(()),
            UpdateStep::InPlace => {
                let Some(reason) = self
                    .update_in_place(pod, old, target, opts, requeue)
                    .await?
                else {
                    return Ok(());
                };
                match fallback(policy, reason) {
                    Fallback::Recreate(reason) => self.recreate(pod, Some(&reason)).await,
                    Fallback::Refuse(r) => self.refuse(pod, r).await,
                }
            }
            UpdateStep::Recreate { reason } => self.recreate(pod, reason.as_ref()).await,
            UpdateStep::Refuse(r) => self.refuse(pod, r).await,
        }
    }

    /// Updates `pod` in place (lifecycle Updating). `Ok(Some(reason))` when the engine found it
    /// cannot be done in place after all.
    async fn update_in_place(
        &self,
        pod: &Pod,
        old: Option<&ControllerRevision>,
        target: &ControllerRevision,
        opts: &UpdateOptions,
        requeue: &mut Requeue,
    ) -> Result<Option<NotInPlace>, Error> {
        let pname = podutil::name(pod);
        let update_name = target.metadata.name.clone().unwrap_or_default();
        let mut opts = opts.clone();
        opts.lifecycle_state = Some(LifecycleStateType::Updating);
        match self
            .ctx
            .inplace
            .update(
                &CloneSetPodHooks::new(&self.ctx.gates),
                pod,
                old,
                target,
                &opts,
                self.now,
            )
            .await
        {
            Ok(UpdateOutcome::Updated {
                new_resource_version,
                requeue_after,
            }) => {
                self.ctx
                    .expect_version(pod.metadata.uid.as_deref(), new_resource_version.as_deref());
                requeue.push(requeue_after);
                self.event_about(
                    pod,
                    EventType::Normal,
                    "SuccessfulUpdatePodInPlace",
                    format!("successfully update pod {pname} in-place(revision {update_name})"),
                )
                .await;
                Ok(None)
            }
            Ok(UpdateOutcome::NotInPlace(r)) => Ok(Some(r)),
            Err(e) => {
                self.event_about(
                    pod,
                    EventType::Warning,
                    "FailedUpdatePodInPlace",
                    format!("failed to update pod {pname} in-place(revision {update_name}): {e}"),
                )
                .await;
                Err(e.into())
            }
        }
    }

    /// The error for a refused update; under InPlaceOnly also a Warning Event saying why.
    pub(super) async fn refuse(&self, pod: &Pod, refusal: Refusal) -> Result<(), Error> {
        let pname = podutil::name(pod).to_string();
        match refusal {
            Refusal::BadLifecycle(state) => Err(Error::BadLifecycle {
                pod: pname,
                state: state.to_string(),
            }),
            Refusal::InPlaceOnly(reason) => {
                let update_name = self.update_name();
                self.event_about(
                    pod,
                    EventType::Warning,
                    "FailedUpdate",
                    format!(
                        "pod {pname} cannot be updated in place to {update_name} and the policy is InPlaceOnly: {reason}"
                    ),
                )
                .await;
                Err(Error::InPlaceOnly { pod: pname, reason })
            }
        }
    }

    /// Recreate `pod`: label it specified-delete, so the scale half deletes it and creates its
    /// replacement at the update revision. `reason` is why not in place, if it was tried.
    pub(super) async fn recreate(
        &self,
        pod: &Pod,
        reason: Option<&NotInPlace>,
    ) -> Result<(), Error> {
        let pname = podutil::name(pod);
        let update_name = self.update_name();
        if let Some(reason) = reason {
            tracing::info!(pod = %pname, %reason, "cannot update in place, recreating");
        }
        let patch = specifieddelete::mark_patch();
        match patch_pod(&self.api()?, pod, PodPart::Object, patch).await {
            Ok(written) => {
                self.ctx.expect_written(&written);
                self.ctx.metrics.recreate_started(METRIC_NAME);
                self.event_about(
                    pod,
                    EventType::Normal,
                    "SuccessfulUpdatePodReCreate",
                    format!(
                        "successfully patch pod {pname} specified-delete for update(revision {update_name})"
                    ),
                )
                .await;
                Ok(())
            }
            Err(e) => {
                self.event_about(
                    pod,
                    EventType::Warning,
                    "FailedUpdatePodReCreate",
                    format!(
                        "failed to patch pod specified-delete {pname} for update(revision {update_name}): {e}"
                    ),
                )
                .await;
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloneset::context::Context;
    use crate::cloneset::spec::settings_of;
    use crate::podcache::PodCache;
    use kruise_api::apps::v1beta1::CloneSet;
    use serde_json::json;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;

    /// How big one Pod's refresh and update futures are before they first run: a reconcile
    /// makes one of each per Pod, so their size times the Pod count is what a reconcile holds
    /// if it builds them all up front.
    #[tokio::test]
    async fn per_pod_future_sizes() {
        let cfg = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(cfg).expect("client");
        let token = CancellationToken::new();
        let pods = PodCache::start(client.clone(), Some("none"), token.clone());
        let shared = crate::registry::Shared::start(
            client,
            pods,
            Arc::new(crate::metrics::Metrics::new()),
            Default::default(),
            Some("none".into()),
            token.clone(),
        );
        let ctx = Context::new(&shared);
        let cs: CloneSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "c", "namespace": "n"},
            "spec": {"selector": {}, "template": {}}
        }))
        .expect("cloneset");
        let rev = ControllerRevision::default();
        let sync = Syncer {
            ctx: &ctx,
            cs: &cs,
            key: "n/c",
            settings: settings_of(&cs),
            current: &rev,
            update: &rev,
            revisions: &[],
            pvcs: &[],
            now: jiff::Timestamp::now(),
        };
        let pod = Pod::default();
        let (hooks, opts) = (CloneSetPodHooks::default(), update_options(&cs, &ctx.gates));
        let refresh = sync.refresh_pod(&pod, &hooks, &opts, "r", None);
        let update = sync.update_pod_alone(&pod, &rev, &opts);
        eprintln!(
            "refresh_pod future: {} B, update_pod_alone future: {} B",
            std::mem::size_of_val(&refresh),
            std::mem::size_of_val(&update)
        );
        token.cancel();
    }
}
