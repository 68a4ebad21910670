//! Pure decisions of a reconcile: which subset each Pod is in, each subset's status
//! (upstream `calculateWorkloadSpreadSubsetStatus`) and the deletion cost of each Pod
//! (upstream `syncSubsetPodDeletionCost`). No API calls; `now` is passed in.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1alpha1::{
    MatchedWorkloadSpread, WorkloadSpread, WorkloadSpreadSubset, WorkloadSpreadSubsetStatus,
    pod_version,
};
use kruise_api::keys::{self, k8s};

use super::adaptive;

/// Whether the Pod still counts (upstream `kubecontroller.IsPodActive`).
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

/// The Pods of each subset, in the spec's order: those whose
/// `apps.kruise.io/matched-workloadspread` names this WorkloadSpread and the subset. Pods of
/// another WorkloadSpread, of no subset, or of a subset since removed are left out.
pub fn group<'a>(ws: &WorkloadSpread, pods: &'a [std::sync::Arc<Pod>]) -> Vec<Vec<&'a Pod>> {
    let name = ws.metadata.name.as_deref().unwrap_or_default();
    let mut groups = vec![Vec::new(); ws.spec.subsets.len()];
    for pod in pods {
        let Some(m) = MatchedWorkloadSpread::of(pod.metadata.annotations.as_ref()) else {
            continue;
        };
        if m.name != name {
            continue;
        }
        if let Some(i) = ws.spec.subsets.iter().position(|s| s.name == m.subset) {
            groups[i].push(pod.as_ref());
        }
    }
    groups
}

fn age(t: &Time, now: Timestamp) -> Duration {
    now.duration_since(t.0).try_into().unwrap_or(Duration::ZERO)
}

/// One subset's status from its Pods and the previous status, and when to look again (the
/// next expiry of a reservation that is kept).
pub fn subset_status(
    subset: &WorkloadSpreadSubset,
    old: Option<&WorkloadSpreadSubsetStatus>,
    pods: &[&Pod],
    workload_replicas: i32,
    now: Timestamp,
) -> (WorkloadSpreadSubsetStatus, Option<Duration>) {
    let create_timeout = Duration::from_secs(keys::WS_CREATE_POD_TIMEOUT_SECS.unsigned_abs());
    let delete_timeout = Duration::from_secs(keys::WS_DELETE_POD_TIMEOUT_SECS.unsigned_abs());
    let max = subset.max_replicas_of(workload_replicas);
    let mut st = WorkloadSpreadSubsetStatus {
        name: subset.name.clone(),
        missing_replicas: max.map_or(-1, |m| m.max(0)),
        // The Schedulable condition, the only one, is [`adaptive::reschedule`]'s.
        ..Default::default()
    };
    let mut creating = old.map(|o| o.creating_pods.clone()).unwrap_or_default();
    let old_deleting = old.map(|o| o.deleting_pods.clone()).unwrap_or_default();
    let mut requeue: Option<Duration> = None;
    let mut soonest = |d: Duration| requeue = Some(requeue.map_or(d, |r: Duration| r.min(d)));
    let mut active = 0;
    for pod in pods {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        // Seen: the reservation has become a Pod.
        let m = MatchedWorkloadSpread::of(pod.metadata.annotations.as_ref());
        match m.as_ref() {
            Some(m) if !m.uid.is_empty() => creating.remove(&m.uid),
            _ => creating.remove(name),
        };
        if !is_active(pod) {
            continue;
        }
        active += 1;
        if st.missing_replicas > 0 {
            st.missing_replicas -= 1;
        }
        if let Some(t) = old_deleting.get(name) {
            let waited = age(t, now);
            if waited < delete_timeout {
                st.deleting_pods.insert(name.to_owned(), t.clone());
                // Counted as gone already: its place is free for a new Pod.
                if let Some(max) = max
                    && st.missing_replicas < max
                {
                    st.missing_replicas += 1;
                }
                soonest(delete_timeout - waited);
            }
        }
    }
    st.replicas = active;
    for (key, t) in creating {
        let waited = age(&t, now);
        if waited < create_timeout {
            if st.missing_replicas > 0 {
                st.missing_replicas -= 1;
            }
            st.creating_pods.insert(key, t);
            soonest(create_timeout - waited);
        }
    }
    (st, requeue)
}

/// The subsets' statuses of one reconcile, and what the `Adaptive` strategy asks for.
#[derive(Debug, Default)]
pub struct Statuses<'a> {
    /// One per subset of the spec, in its order.
    pub statuses: Vec<WorkloadSpreadSubsetStatus>,
    /// When to look again: a reservation's expiry, a Pending Pod's deadline, a reopening.
    pub requeue: Option<Duration>,
    /// Per subset name, the Pods unschedulable past `rescheduleCriticalSeconds`: to delete.
    pub unschedulable: Vec<(String, Vec<&'a Pod>)>,
    /// Subsets opened again in this reconcile.
    pub recovered: Vec<String>,
}

/// The statuses of every subset of the spec, in its order, from the Pods grouped by subset
/// ([`group`]) and the previous statuses (upstream `calculateWorkloadSpreadSubsetStatuses`,
/// with [`adaptive::reschedule`] for each subset).
pub fn subset_statuses<'a>(
    ws: &WorkloadSpread,
    old: &[WorkloadSpreadSubsetStatus],
    groups: &[Vec<&'a Pod>],
    workload_replicas: i32,
    now: Timestamp,
) -> Statuses<'a> {
    let mut out = Statuses {
        statuses: Vec::with_capacity(ws.spec.subsets.len()),
        ..Default::default()
    };
    let soonest = |r: &mut Option<Duration>, d: Option<Duration>| {
        if let Some(d) = d {
            *r = Some(r.map_or(d, |r| r.min(d)));
        }
    };
    for (i, (subset, pods)) in ws.spec.subsets.iter().zip(groups).enumerate() {
        let prev = old.iter().find(|s| s.name == subset.name);
        let (mut st, next) = subset_status(subset, prev, pods, workload_replicas, now);
        soonest(&mut out.requeue, next);
        let r = adaptive::reschedule(ws, i, &mut st, prev, pods, now);
        soonest(&mut out.requeue, r.requeue);
        if !r.failed.is_empty() {
            out.unschedulable.push((subset.name.clone(), r.failed));
        }
        if r.recovered {
            out.recovered.push(subset.name.clone());
        }
        out.statuses.push(st);
    }
    out
}

/// Whether a version's statuses hold nothing: no Pod, no reservation, no deletion (upstream
/// `isEmptySubsetStatuses`); such a version is dropped once it has no Pods.
pub fn is_empty(statuses: &[WorkloadSpreadSubsetStatus]) -> bool {
    statuses
        .iter()
        .all(|s| s.replicas == 0 && s.creating_pods.is_empty() && s.deleting_pods.is_empty())
}

/// The Pods by the revision they are counted under ([`pod_version`]).
pub fn by_version(pods: &[Arc<Pod>]) -> BTreeMap<String, Vec<Arc<Pod>>> {
    let mut out: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for pod in pods {
        out.entry(pod_version(pod))
            .or_default()
            .push(Arc::clone(pod));
    }
    out
}

/// Upstream's order of Pods to delete first (`controller.ActivePods.Less`): unassigned before
/// assigned, Pending before Unknown before Running, not Ready before Ready, more restarts
/// before fewer, newer before older.
fn delete_first(a: &Pod, b: &Pod) -> Ordering {
    let assigned = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
    let phase = |p: &Pod| match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Pending") => 0,
        Some("Running") => 2,
        _ => 1,
    };
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let restarts = |p: &Pod| -> i32 {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum())
    };
    let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    assigned(a)
        .cmp(&assigned(b))
        .then(phase(a).cmp(&phase(b)))
        .then(ready(a).cmp(&ready(b)))
        .then(restarts(b).cmp(&restarts(a)))
        .then(created(b).cmp(&created(a)))
}

/// The deletion cost each Pod should carry, for the Pods whose annotation differs (upstream
/// `syncSubsetPodDeletionCost`): a subset within its cap (or uncapped) keeps
/// `100 × (subsets − index)`; the Pods over a cap get `-100 × (index + 1)`, the least
/// valuable first. Later subsets thus lose Pods first, and over-cap Pods before any.
/// `old_revision` reverses the index (upstream `updateDeletionCostBySubset`): during a rollout
/// the old revision's Pods go from the first subset first, keeping the spread of the whole.
pub fn deletion_costs(
    ws: &WorkloadSpread,
    groups: &[Vec<&Pod>],
    workload_replicas: i32,
    old_revision: bool,
) -> Vec<(String, String)> {
    let count = ws.spec.subsets.len();
    let n = i32::try_from(count).unwrap_or(i32::MAX);
    let mut out = Vec::new();
    for ((i, subset), pods) in ws.spec.subsets.iter().enumerate().zip(groups) {
        let i = if old_revision { count - 1 - i } else { i };
        let i = i32::try_from(i).unwrap_or(i32::MAX);
        let positive = (keys::WS_DELETION_COST_POSITIVE * (n - i)).to_string();
        let negative = (keys::WS_DELETION_COST_NEGATIVE * (i + 1)).to_string();
        let mut active: Vec<&Pod> = pods.iter().copied().filter(|p| is_active(p)).collect();
        let surplus = match (
            subset.max_replicas.is_some(),
            subset.max_replicas_of(workload_replicas),
        ) {
            (false, _) => 0,
            (true, Some(max)) => active
                .len()
                .saturating_sub(usize::try_from(max.max(0)).unwrap_or(0)),
            // A malformed cap (refused by the webhook): leave the Pods alone, as upstream.
            (true, None) => continue,
        };
        active.sort_by(|a, b| delete_first(a, b));
        for (k, pod) in active.iter().enumerate() {
            let want = if k < surplus { &negative } else { &positive };
            let have = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(k8s::POD_DELETION_COST_ANNOTATION));
            if have != Some(want) {
                out.push((pod.metadata.name.clone().unwrap_or_default(), want.clone()));
            }
        }
    }
    out
}
