//! The `Adaptive` schedule strategy (upstream `reschedule.go`): a Pod that stays unschedulable in
//! its subset past `rescheduleCriticalSeconds` is deleted so that its workload creates it again,
//! and the subset is marked `Schedulable=False`, which makes the Pod webhook pass it over. After
//! five minutes the subset is opened again. The last subset is never closed: it takes what the
//! others cannot. Pure: `now` is passed in, the caller deletes the Pods and writes the status.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1alpha1::{
    SCHEDULE_ADAPTIVE, SUBSET_SCHEDULABLE, WorkloadSpread, WorkloadSpreadSubsetCondition,
    WorkloadSpreadSubsetStatus,
};
use kruise_api::condition;
use kruise_api::keys::{self, k8s};

use crate::workload::podutil::{self, Pending};

/// What the strategy decided for one subset.
#[derive(Debug, Default)]
pub struct Rescheduled<'a> {
    /// Pods unschedulable past the critical seconds: to delete.
    pub failed: Vec<&'a Pod>,
    /// When to look again: the next Pod's deadline, or the subset's reopening.
    pub requeue: Option<Duration>,
    /// The subset was opened again now (upstream records a `RecoverSchedulable` Event).
    pub recovered: bool,
}

/// `rescheduleCriticalSeconds` when the strategy is `Adaptive` with a positive value: only then
/// does upstream reschedule (and keep the `Schedulable` condition).
pub fn critical_seconds(ws: &WorkloadSpread) -> Option<Duration> {
    let st = &ws.spec.schedule_strategy;
    if st.type_ != SCHEDULE_ADAPTIVE {
        return None;
    }
    let secs = st.adaptive.as_ref()?.reschedule_critical_seconds?;
    (secs > 0).then(|| Duration::from_secs(secs.unsigned_abs().into()))
}

/// Upstream `GetTimeBeforePendingTimeout` ([`podutil::pending_timeout`]): whether the Pod has
/// waited unscheduled longer than `timeout` since it was created, and otherwise how long until
/// it has.
pub fn pending_timeout(pod: &Pod, timeout: Duration, now: Timestamp) -> (bool, Option<Duration>) {
    let secs = i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX);
    match podutil::pending_timeout(pod, secs, now) {
        Pending::TimedOut => (true, None),
        Pending::Until(d) => (false, Some(d)),
        Pending::No => (false, None),
    }
}

/// The subset's `Schedulable` condition; [`condition::set`] keeps a condition of the same
/// status as it is (upstream `setWorkloadSpreadSubsetCondition`).
fn schedulable(status: &str, now: Timestamp) -> WorkloadSpreadSubsetCondition {
    WorkloadSpreadSubsetCondition {
        type_: SUBSET_SCHEDULABLE.to_owned(),
        status: status.to_owned(),
        last_transition_time: Some(Time(now)),
        ..Default::default()
    }
}

/// Upstream `calculateWorkloadSpreadSubsetStatuses`' rescheduling part for the subset at
/// `index`: sets `st`'s `Schedulable` condition from `old`'s and the subset's Pods, and says
/// which Pods to delete. Without a critical time the condition is removed.
pub fn reschedule<'a>(
    ws: &WorkloadSpread,
    index: usize,
    st: &mut WorkloadSpreadSubsetStatus,
    old: Option<&WorkloadSpreadSubsetStatus>,
    pods: &[&'a Pod],
    now: Timestamp,
) -> Rescheduled<'a> {
    condition::remove(&mut st.conditions, SUBSET_SCHEDULABLE);
    let mut out = Rescheduled::default();
    let Some(critical) = critical_seconds(ws) else {
        return out;
    };
    let old_cond = old.and_then(|o| condition::get(&o.conditions, SUBSET_SCHEDULABLE));
    if index + 1 == ws.spec.subsets.len() {
        if let Some(c) = old_cond {
            st.conditions.push(c.clone());
        }
        condition::set(&mut st.conditions, schedulable(k8s::CONDITION_TRUE, now));
        return out;
    }
    let soonest = |r: Option<Duration>, d: Duration| Some(r.map_or(d, |r: Duration| r.min(d)));
    for pod in pods {
        match pending_timeout(pod, critical, now) {
            (true, _) => out.failed.push(pod),
            (false, Some(d)) => out.requeue = soonest(out.requeue, d),
            (false, None) => {}
        }
    }
    let unschedulable = !out.failed.is_empty();
    let Some(old_cond) = old_cond else {
        let status = if unschedulable {
            k8s::CONDITION_FALSE
        } else {
            k8s::CONDITION_TRUE
        };
        st.conditions.push(schedulable(status, now));
        return out;
    };
    st.conditions.push(old_cond.clone());
    if unschedulable {
        condition::set(&mut st.conditions, schedulable(k8s::CONDITION_FALSE, now));
    } else if old_cond.status == k8s::CONDITION_FALSE {
        let closed = Duration::from_secs(keys::WS_MAX_SCHEDULED_FAILED_SECS.unsigned_abs());
        let since = old_cond.last_transition_time.as_ref().map_or(now, |t| t.0);
        let reopen = since.checked_add(closed).unwrap_or(since);
        if reopen < now {
            condition::set(&mut st.conditions, schedulable(k8s::CONDITION_TRUE, now));
            out.recovered = true;
        } else if let Ok(d) = now.duration_until(reopen).try_into() {
            out.requeue = soonest(out.requeue, d);
        }
    }
    out
}
