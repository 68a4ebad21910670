//! The `Adaptive` schedule strategy within a reconcile: each subset of the spec with a
//! workload is judged from its Pods in the cache and its previous `Schedulable` condition
//! ([`adaptive`] by default, [`reserve`] when reserving unschedulable Pods, whose reserved
//! labels are written here, before the allocation, as upstream does); the view then drives the
//! allocation, the status and the requeue.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{
    UD_CONDITION_UPDATED, UD_RESERVED_POD_LABEL, UD_SUBSET_REASON_CREATED, UnitedDeployment,
    UnitedDeploymentSpec, UnitedDeploymentSubsetCondition,
};
use kruise_api::keys::k8s;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::adaptive::{self, set_condition};
use super::child;
use super::context::Context;
use super::error::Error;
use super::plan::{AllocError, Observed};
use super::reserve;
use super::revisions::Revisions;

/// What the Adaptive strategy found of the subsets.
#[derive(Default)]
pub(super) struct View {
    reserve: bool,
    plain: BTreeMap<String, adaptive::Existing>,
    reserved: BTreeMap<String, (reserve::Existing, reserve::Assessment)>,
    /// The subsets' conditions for the status.
    pub conditions: BTreeMap<String, Vec<UnitedDeploymentSubsetCondition>>,
    /// The nearest deadline or recovery.
    pub requeue: Option<Duration>,
}

impl View {
    /// The replicas of each subset (upstream's adaptive or reservation allocator).
    pub fn allocate(
        &self,
        spec: &UnitedDeploymentSpec,
    ) -> Result<BTreeMap<String, i32>, AllocError> {
        if self.reserve {
            let existing = self
                .reserved
                .iter()
                .map(|(k, (e, _))| (k.clone(), *e))
                .collect();
            reserve::allocate(spec, &existing)
        } else {
            adaptive::allocate(spec, &self.plain)
        }
    }

    /// Marks again a subset that just recovered and grows (reservation only).
    pub fn after_allocation(&mut self, next: &BTreeMap<String, i32>, now: Timestamp) {
        for (name, (e, a)) in &mut self.reserved {
            reserve::after_allocation(a, e, next.get(name).copied().unwrap_or(0), now);
            self.conditions.insert(name.clone(), a.conditions.clone());
        }
    }

    /// The reserved Pods per subset, when reserving.
    pub fn reserved_pods(&self) -> Option<BTreeMap<String, i32>> {
        self.reserve.then(|| {
            self.reserved
                .iter()
                .map(|(k, (_, a))| (k.clone(), a.reserved_pods))
                .collect()
        })
    }

    /// The `maxUnavailable` an unschedulable subset's workload gets on an update.
    pub fn max_unavailable(
        &self,
        spec: &UnitedDeploymentSpec,
        subset: &str,
        ready: i32,
    ) -> Option<i32> {
        let (e, a) = self.reserved.get(subset)?;
        let strategy = &spec.topology.schedule_strategy;
        reserve::max_unavailable(strategy, a, e.spec_replicas, ready)
    }

    fn wake(&mut self, d: Option<Duration>) {
        if let Some(d) = d {
            self.requeue = Some(self.requeue.map_or(d, |r| r.min(d)));
        }
    }
}

/// Judges the subsets of `ud` (and writes the reserved labels that changed).
#[tracing::instrument(level = "debug", name = "adaptive", skip_all)]
pub(super) async fn prepare(
    ctx: &Context,
    ud: &UnitedDeployment,
    observed: &[Observed],
    revs: &Revisions,
    now: Timestamp,
) -> Result<View, Error> {
    let strategy = &ud.spec.topology.schedule_strategy;
    let ns = ud.namespace().unwrap_or_default();
    let pods = ctx.pods.in_namespace(&ns);
    let status = ud.status.as_ref();
    let previous = status
        .map(|s| s.subset_statuses.as_slice())
        .unwrap_or_default();
    let mut view = View {
        reserve: strategy.should_reserve_unschedulable_pods(),
        ..Default::default()
    };
    let clock = reserve::Clock {
        now,
        pending_timeout: strategy.reschedule_critical_seconds(),
        min_ready: strategy.unschedulable_duration_seconds(),
        updated_since: updated_since(ud, revs, now),
    };
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    for s in &ud.spec.topology.subsets {
        let prev = previous.iter().find(|p| p.name == s.name);
        let prev_conditions = prev.map(|p| p.conditions.as_slice()).unwrap_or_default();
        // The first workload of a subset is the one kept (as `plan::steps` does).
        let Some(o) = observed.iter().find(|o| o.subset == s.name) else {
            // Upstream `initStatus`: a subset added to a reserving UnitedDeployment starts
            // marked, so that its first Pods are reserved until they run.
            if view.reserve && prev.is_none() && !previous.is_empty() {
                let mut c = Vec::new();
                set_condition(
                    &mut c,
                    k8s::CONDITION_FALSE,
                    UD_SUBSET_REASON_CREATED,
                    "newly-created subsets in reservation strategy".to_owned(),
                    now,
                );
                view.conditions.insert(s.name.clone(), c);
            }
            continue;
        };
        let want = child::pod_selector(ud, &s.name);
        let mine: Vec<&Pod> = pods
            .iter()
            .filter(|p| child::matches_labels(p, &want))
            .map(AsRef::as_ref)
            .collect();
        if !view.reserve {
            let a = adaptive::assess(
                strategy,
                prev_conditions,
                o.replicas,
                o.ready_replicas,
                &mine,
                now,
            );
            tracing::debug!(
                subset = %s.name,
                unschedulable = a.unschedulable,
                pending = a.pending_pods,
                requeue = ?a.requeue,
                "adaptive subset assessed"
            );
            let e = adaptive::Existing {
                ready_replicas: o.ready_replicas,
                unschedulable: a.unschedulable,
            };
            view.plain.insert(s.name.clone(), e);
            view.conditions.insert(s.name.clone(), a.conditions);
            view.wake(a.requeue);
            continue;
        }
        // Pods on their way out are neither reserved nor temporary.
        let live: Vec<&Pod> = mine
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let a = reserve::assess(prev_conditions, &live, &revs.update, &clock);
        tracing::debug!(
            subset = %s.name,
            reserved = a.reserved_pods,
            unschedulable = a.unschedulable,
            requeue = ?a.requeue,
            "reserving subset assessed"
        );
        for (name, reserved) in &a.relabel {
            let patch =
                json!({"metadata": {"labels": {UD_RESERVED_POD_LABEL: reserved.to_string()}}});
            match pod_api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                // A Pod deleted meanwhile needs no label.
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        let e = reserve::Existing {
            spec_replicas: o.spec_replicas,
            reserved_pods: a.reserved_pods,
            unschedulable: a.unschedulable,
            marked: a.marked,
        };
        view.conditions.insert(s.name.clone(), a.conditions.clone());
        view.wake(a.requeue);
        view.reserved.insert(s.name.clone(), (e, a));
    }
    Ok(view)
}

/// The transition time the `UnitedDeploymentUpdated` condition has after this reconcile (kept
/// while its status stays, as the status code does).
fn updated_since(ud: &UnitedDeployment, revs: &Revisions, now: Timestamp) -> Timestamp {
    let updated = revs.current == revs.update;
    let prev = ud.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == UD_CONDITION_UPDATED)
    });
    match prev {
        Some(c) if (c.status == k8s::CONDITION_TRUE) == updated => {
            c.last_transition_time.as_ref().map_or(now, |t| t.0)
        }
        _ => now,
    }
}
