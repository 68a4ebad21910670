//! The `Adaptive` schedule strategy, pure (upstream `calculateSubsetsStatusForDefaultAdaptiveStrategy`,
//! `adaptiveAllocator` and `GetTimeBeforePendingTimeout`): a subset whose Pods stayed
//! unschedulable past `rescheduleCriticalSeconds` is marked `Schedulable=False` for
//! `unschedulableDuration`; while marked, it keeps only its ready Pods and the rest of the
//! replicas go to the next subsets in order. Time is passed in, never read here.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1alpha1::{
    UD_SUBSET_CONDITION_SCHEDULABLE, UD_SUBSET_REASON_RECOVER, UD_SUBSET_REASON_RESCHEDULE,
    UnitedDeploymentScheduleStrategy, UnitedDeploymentSpec, UnitedDeploymentSubsetCondition,
};
use kruise_api::condition;
use kruise_api::keys::k8s;

use super::plan::{self, AllocError};

pub use crate::workload::podutil::{Pending, pending_timeout as pending};

fn to_std(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or_default()
}

/// What Adaptive makes of one existing subset in this reconcile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assessment {
    /// The subset only keeps its ready Pods (its new replicas go elsewhere).
    pub unschedulable: bool,
    /// Its Pods past the reschedule deadline.
    pub pending_pods: i32,
    /// The subset's conditions for the status.
    pub conditions: Vec<UnitedDeploymentSubsetCondition>,
    /// When to look again (the nearest deadline or recovery), if any.
    pub requeue: Option<Duration>,
}

fn earliest(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// Upstream `SetCondition` of a subset's `Schedulable`: nothing changes when the status and
/// reason are the same; otherwise the condition is rewritten with `now` as its transition time
/// ([`condition::set`]).
pub fn set_condition(
    conditions: &mut Vec<UnitedDeploymentSubsetCondition>,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let cond = UnitedDeploymentSubsetCondition {
        type_: UD_SUBSET_CONDITION_SCHEDULABLE.to_owned(),
        status: status.to_owned(),
        last_transition_time: Some(Time(now)),
        reason: reason.to_owned(),
        message,
    };
    condition::set(conditions, cond);
}

/// One existing subset under the default Adaptive strategy: a `Schedulable=False` mark holds
/// for `unschedulableDuration` after its transition, then turns `True` (`recover`); with fewer
/// ready Pods than Pods, any Pod past the reschedule deadline marks it (again) `False`.
pub fn assess(
    strategy: &UnitedDeploymentScheduleStrategy,
    previous: &[UnitedDeploymentSubsetCondition],
    replicas: i32,
    ready_replicas: i32,
    pods: &[&Pod],
    now: Timestamp,
) -> Assessment {
    let hold = strategy.unschedulable_duration_seconds();
    let mut out = Assessment {
        conditions: previous.to_vec(),
        ..Default::default()
    };
    let marked = previous
        .iter()
        .find(|c| c.type_ == UD_SUBSET_CONDITION_SCHEDULABLE && c.status == k8s::CONDITION_FALSE);
    if let Some(c) = marked {
        let since = c.last_transition_time.as_ref().map_or(now, |t| t.0);
        let recover = since
            .checked_add(SignedDuration::from_secs(hold))
            .unwrap_or(since);
        if now < recover {
            out.unschedulable = true;
            out.requeue = Some(to_std(recover.duration_since(now)));
        } else {
            set_condition(
                &mut out.conditions,
                k8s::CONDITION_TRUE,
                UD_SUBSET_REASON_RECOVER,
                // Upstream prints the seconds as a Go `%f`.
                format!("unschedulable subset recovered after {hold}.000000 seconds"),
                now,
            );
        }
    }
    // Pending Pods only exist while fewer Pods are ready than run.
    if ready_replicas < replicas {
        let timeout = strategy.reschedule_critical_seconds();
        for pod in pods {
            match pending(pod, timeout, now) {
                Pending::TimedOut => out.pending_pods += 1,
                Pending::Until(d) => out.requeue = earliest(out.requeue, d),
                Pending::No => {}
            }
        }
        if out.pending_pods > 0 {
            out.unschedulable = true;
            set_condition(
                &mut out.conditions,
                k8s::CONDITION_FALSE,
                UD_SUBSET_REASON_RESCHEDULE,
                "timeout pending pods found".to_owned(),
                now,
            );
            let d = Duration::from_secs(u64::try_from(hold).unwrap_or(0));
            out.requeue = earliest(out.requeue, d);
        }
    }
    out
}

/// What the Adaptive allocator knows of an existing subset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Existing {
    pub ready_replicas: i32,
    pub unschedulable: bool,
}

/// Upstream `adaptiveAllocator`: the min/max allocation where an unschedulable subset is held
/// to its ready Pods (both bounds become them, within its own), and a schedulable one never
/// gets fewer than its ready Pods (healthy Pods are not moved). Subsets without a workload are
/// schedulable with none ready.
pub fn allocate(
    spec: &UnitedDeploymentSpec,
    existing: &BTreeMap<String, Existing>,
) -> Result<BTreeMap<String, i32>, AllocError> {
    let total = spec.replicas.unwrap_or(0);
    let mut bounds = plan::min_max_of(spec)?;
    for (s, (min, max)) in spec.topology.subsets.iter().zip(bounds.iter_mut()) {
        let e = existing.get(&s.name).copied();
        let unschedulable = e.is_some_and(|e| e.unschedulable);
        let ready = e.map_or(0, |e| e.ready_replicas);
        if unschedulable {
            *min = (*min).max(ready);
            *max = (*max).min(ready);
        } else if ready > *min {
            *min = ready.min(*max);
        }
    }
    Ok(plan::fill_by_bounds(total, &spec.topology.subsets, &bounds))
}
