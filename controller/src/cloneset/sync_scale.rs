//! The scale half of a sync (upstream `cloneset_scale.go`): cancel or start pre-deletes, create
//! missing Pods with their PVCs (slow start, creation backoff), delete surplus or specified Pods.

use std::collections::BTreeSet;
use std::time::Instant;

use futures::future;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps::v1beta1::CloneSet;
use kruise_api::appspub::LifecycleStateType;
use kruise_api::features::Gate;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::hooks::CloneSetPodHooks;
use super::pod::{instance_id, new_pod, new_pvcs};
use super::revisions::template_of;
use super::sync::{Requeue, Syncer};
use super::{diff, scale};
use crate::expectations::ScaleAction;
use crate::workload::podfacts::PodFacts;
use crate::workload::podutil;

/// Pod creations start with this many at once and double while they succeed.
const INITIAL_CREATE_BATCH: usize = 1;

impl Syncer<'_> {
    /// One scale step; returns whether it wrote anything. `deferred` is set when pods are
    /// missing but their creation waits for the CloneSet's creation backoff (`requeue` gets the
    /// moment it ends). `by_revision` gets the diffs when they split the Pods by their
    /// revision label alone (without the `PreparingUpdateAsUpdate` gate), as the update half
    /// does. `facts` are those of `pods`, in the same order.
    pub(super) async fn scale(
        &self,
        pods: &[&Pod],
        facts: &[PodFacts<'_>],
        requeue: &mut Requeue,
        deferred: &mut bool,
        by_revision: &mut Option<diff::Diffs>,
    ) -> Result<bool, Error> {
        let planned = scale::planned_deletes(&self.settings, facts);
        if self.cancel_pre_deletes(pods, facts, &planned).await? {
            return Ok(true);
        }

        let update_name = self.update_name();
        let preparing_as_update = self.ctx.gates.enabled(Gate::PreparingUpdateAsUpdate);
        let (mut diffs, _) = diff::calculate_diffs(
            &self.settings,
            facts,
            &|p| scale::counts_as_updated(p, &update_name, preparing_as_update),
            self.now,
        );
        *by_revision = (!preparing_as_update).then_some(diffs);
        if diffs.scale_up_num > 0
            && let Some(wait) = self.ctx.create_backoff.remaining(self.key, Instant::now())
        {
            tracing::debug!(
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                "pod creation backs off after a failure"
            );
            requeue.push(Some(wait));
            *deferred = true;
            return Ok(false);
        }
        if diffs.scale_up_num > diffs.scale_up_limit {
            self.ctx
                .event(
                    self.cs,
                    EventType::Warning,
                    "ScaleUpLimited",
                    format!(
                        "scaleUp is limited because of scaleStrategy.maxUnavailable, limit: {}",
                        diffs.scale_up_limit
                    ),
                    None,
                )
                .await;
        }

        if diffs.scale_up_num > 0 {
            return self
                .create_pods(pods, diffs.scale_up_limit, diffs.scale_up_num_old_revision)
                .await;
        }

        if !planned.pre_delete.is_empty() {
            let chosen: Vec<&Pod> = planned.pre_delete.iter().map(|&i| pods[i]).collect();
            if self.delete_pods(&chosen).await? {
                return Ok(true);
            }
        }

        let specified: Vec<usize> = planned
            .specified
            .iter()
            .copied()
            .filter(|i| !planned.pre_delete.contains(i))
            .collect();
        if !specified.is_empty() {
            let can = scale::limit_ready_deletes(
                facts,
                &specified,
                &mut diffs.delete_ready_limit,
                self.now,
            );
            let chosen: Vec<&Pod> = can.iter().map(|&i| pods[i]).collect();
            if self.delete_pods(&chosen).await? {
                return Ok(true);
            }
        }

        if diffs.scale_down_num > 0 {
            if planned.count > 0 {
                tracing::debug!("scale-in waits for pods already being deleted");
                return Ok(false);
            }
            let (updated, not_updated): (Vec<usize>, Vec<usize>) =
                (0..pods.len()).partition(|&i| facts[i].is_at_revision(&update_name));
            let chosen = scale::choose_pods_to_delete(
                pods,
                diffs.scale_down_num,
                diffs.scale_down_num_old_revision,
                not_updated,
                updated,
                self.settings.min_ready_seconds,
                self.now,
            );
            let can =
                scale::limit_ready_deletes(facts, &chosen, &mut diffs.delete_ready_limit, self.now);
            let chosen: Vec<&Pod> = can.iter().map(|&i| pods[i]).collect();
            return self.delete_pods(&chosen).await;
        }
        Ok(false)
    }

    /// Pods in PreparingDelete go back to PreparingNormal when replicas grew again; returns
    /// whether any did.
    async fn cancel_pre_deletes(
        &self,
        pods: &[&Pod],
        facts: &[PodFacts<'_>],
        planned: &scale::PlannedDeletes,
    ) -> Result<bool, Error> {
        let lifecycle = self.cs.spec.lifecycle.as_ref();
        let mut modified = false;
        for i in scale::pre_deletes_to_cancel(&self.settings, lifecycle, facts, planned) {
            tracing::info!(
                pod = podutil::name(pods[i]),
                "cancelling deletion: PreparingDelete -> PreparingNormal"
            );
            modified |= self
                .set_lifecycle(pods[i], LifecycleStateType::PreparingNormal, None)
                .await?;
        }
        Ok(modified)
    }

    async fn create_pods(
        &self,
        pods: &[&Pod],
        total: i32,
        old_revision: i32,
    ) -> Result<bool, Error> {
        let total = usize::try_from(total.max(0)).unwrap_or(0);
        if total == 0 {
            return Ok(false);
        }
        let old_n = usize::try_from(old_revision.max(0)).unwrap_or(0).min(total);
        let pod_ids: BTreeSet<String> = pods
            .iter()
            .filter_map(|p| instance_id(*p).map(str::to_string))
            .collect();
        let pvc_ids: BTreeSet<String> = self
            .pvcs
            .iter()
            .filter_map(|p| instance_id(p).map(str::to_string))
            .collect();
        let existing_pvcs: BTreeSet<String> = self
            .pvcs
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let ids = scale::available_ids(total, &pod_ids, &pvc_ids, &mut rand::rng());
        let current_tpl = template_of(self.current)?;
        let update_tpl = template_of(self.update)?;
        let current_name = self.current.metadata.name.clone().unwrap_or_default();
        let update_name = self.update_name();
        let hooks = CloneSetPodHooks::new(&self.ctx.gates);
        let new: Vec<(Pod, String)> = ids
            .iter()
            .enumerate()
            .map(|(k, id)| {
                let (tpl, rev) = if k < old_n {
                    (&current_tpl, &current_name)
                } else {
                    (&update_tpl, &update_name)
                };
                (new_pod(&hooks, self.cs, tpl, rev, id, self.now), id.clone())
            })
            .collect();
        // The one line that still names the CloneSet itself, beside the span's `object`: the
        // scale e2e suite counts creation attempts by `cloneset=<ns>/<name>` on it.
        tracing::info!(cloneset = %self.key, count = total, current_revision = old_n, "creating pods");
        for (p, _) in &new {
            self.ctx
                .scale_exp
                .expect(self.key, ScaleAction::Create, podutil::name(p));
        }

        let mut created = 0usize;
        let mut first_err = None;
        let mut batch = INITIAL_CREATE_BATCH;
        let mut next = 0usize;
        // Slow start: a batch of 1, then 2, 4...; stop at the first failing batch so a quota or
        // webhook error costs one call, not hundreds.
        while next < new.len() {
            let end = (next + batch).min(new.len());
            let results = future::join_all(
                new[next..end]
                    .iter()
                    .map(|(p, id)| self.create_one(p, id, &existing_pvcs)),
            )
            .await;
            let mut failed = false;
            for (r, (p, _)) in results.into_iter().zip(&new[next..end]) {
                match r {
                    Ok(()) => created += 1,
                    Err(e) => {
                        self.ctx
                            .scale_exp
                            .observe(self.key, ScaleAction::Create, podutil::name(p));
                        failed = true;
                        first_err.get_or_insert(e);
                    }
                }
            }
            next = end;
            if failed {
                break;
            }
            batch *= 2;
        }
        // Pods never attempted will never be observed either.
        for (p, _) in &new[next..] {
            self.ctx
                .scale_exp
                .observe(self.key, ScaleAction::Create, podutil::name(p));
        }
        match first_err {
            Some(e) => {
                let wait = self.ctx.create_backoff.fail(self.key, Instant::now());
                tracing::warn!(error = %e, created, retry_in_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX), "pods could not be created");
                Err(e)
            }
            None => {
                self.ctx.create_backoff.reset(self.key);
                Ok(created > 0)
            }
        }
    }

    async fn create_one(
        &self,
        pod: &Pod,
        id: &str,
        existing_pvcs: &BTreeSet<String>,
    ) -> Result<(), Error> {
        let pvc_api = self.api::<PersistentVolumeClaim>()?;
        for pvc in new_pvcs(self.cs, id) {
            let pname = pvc.metadata.name.clone().unwrap_or_default();
            if existing_pvcs.contains(&pname) {
                continue;
            }
            match pvc_api.create(&PostParams::default(), &pvc).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => {
                    self.ctx
                        .event(
                            self.cs,
                            EventType::Warning,
                            "FailedCreate",
                            format!("failed to create pvc {pname}: {e}"),
                            None,
                        )
                        .await;
                    return Err(e.into());
                }
            }
        }
        let pname = podutil::name(pod).to_string();
        match self.api::<Pod>()?.create(&PostParams::default(), pod).await {
            Ok(_) => {
                self.event_about(
                    pod,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("succeed to create pod {pname}"),
                )
                .await;
                Ok(())
            }
            Err(e) => {
                self.event_about(
                    pod,
                    EventType::Warning,
                    "FailedCreate",
                    format!("failed to create pod {pname}: {e}"),
                )
                .await;
                Err(e.into())
            }
        }
    }

    async fn delete_pods(&self, chosen: &[&Pod]) -> Result<bool, Error> {
        let mut modified = false;
        let api = self.api::<Pod>()?;
        let pre_delete = self
            .cs
            .spec
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_delete.as_ref());
        for pod in chosen {
            let pname = podutil::name(pod).to_string();
            if podutil::is_hooked(pre_delete, pod) {
                if self
                    .set_lifecycle(pod, LifecycleStateType::PreparingDelete, None)
                    .await?
                {
                    tracing::info!(pod = %pname, "pod held by preDelete hook: PreparingDelete");
                    modified = true;
                }
                continue;
            }
            self.ctx
                .scale_exp
                .expect(self.key, ScaleAction::Delete, &pname);
            match api.delete(&pname, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_not_found() => {
                    // Already gone: its delete event has passed, so do not wait for it.
                    self.ctx
                        .scale_exp
                        .observe(self.key, ScaleAction::Delete, &pname);
                    continue;
                }
                Err(e) => {
                    self.ctx
                        .scale_exp
                        .observe(self.key, ScaleAction::Delete, &pname);
                    self.event_about(
                        *pod,
                        EventType::Warning,
                        "FailedDelete",
                        format!("failed to delete pod {pname}: {e}"),
                    )
                    .await;
                    return Err(e.into());
                }
            }
            modified = true;
            self.event_about(
                *pod,
                EventType::Normal,
                "SuccessfulDelete",
                format!("succeed to delete pod {pname}"),
            )
            .await;
            let id = instance_id(*pod);
            let pvc_api = self.api::<PersistentVolumeClaim>()?;
            for pvc in self.pvcs {
                if id.is_none() || instance_id(pvc) != id {
                    continue;
                }
                let n = pvc.metadata.name.clone().unwrap_or_default();
                let res = pvc_api.delete(&n, &DeleteParams::default()).await;
                self.ctx
                    .pvc_written(self.cs, pvc, res, "FailedDelete", |e| {
                        format!("failed to delete pvc {n}: {e}")
                    })
                    .await?;
            }
        }
        Ok(modified)
    }
}

pub(super) async fn truncate_pods_to_delete(
    ctx: &Context,
    cs: &CloneSet,
    pods: &[&Pod],
) -> Result<(), Error> {
    let wanted = &cs.spec.scale_strategy.pods_to_delete;
    if wanted.is_empty() {
        return Ok(());
    }
    let live: Vec<String> = wanted
        .iter()
        .filter(|n| pods.iter().any(|p| podutil::name(p) == n.as_str()))
        .cloned()
        .collect();
    if live.len() == wanted.len() {
        return Ok(());
    }
    let ns = cs.namespace().ok_or(Error::Unnamed)?;
    // The same path in both versions.
    ctx.stored_api(&ns)
        .patch(
            &cs.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "spec": { "scaleStrategy": { "podsToDelete": live } } })),
        )
        .await?;
    Ok(())
}
