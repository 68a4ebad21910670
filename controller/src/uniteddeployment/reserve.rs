//! `Adaptive` with `reserveUnschedulablePods`, pure (upstream
//! `calculateSubsetsStatusForReservedAdaptiveStrategy`, `CheckPodReallyInReservedStatus`,
//! `reservationAllocator`, `postProcessSubsetStatusForReservedAdaptiveStrategy`): a Pod that
//! stays unschedulable is not deleted but labelled reserved, its subset keeps its replicas and
//! as many temporary Pods are added to the next subsets; once the reserved Pod has been ready
//! for `unschedulableDuration` it is no longer reserved and the temporary Pods go.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{
    UD_RESERVED_POD_LABEL, UD_SUBSET_CONDITION_SCHEDULABLE, UD_SUBSET_REASON_RESCHEDULE,
    UnitedDeploymentScheduleStrategy, UnitedDeploymentSpec, UnitedDeploymentSubsetCondition,
};
use kruise_api::keys::{self, k8s};

use super::adaptive::{self, Pending, set_condition};
use super::plan::{self, AllocError};

/// The reserved label of a Pod: `Some(true|false)` when set.
pub fn reserved_label(pod: &Pod) -> Option<bool> {
    let v = pod.metadata.labels.as_ref()?.get(UD_RESERVED_POD_LABEL)?;
    Some(v == "true")
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

fn until(deadline: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(deadline.duration_since(now)).unwrap_or_default()
}

/// What the reserved check says of one Pod.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PodVerdict {
    pub reserved: bool,
    /// When the verdict may change.
    pub check_after: Option<Duration>,
    /// An old-revision Pod reserved because the update has lasted too long.
    pub update_timeout: bool,
}

/// The clock of one subset's reserved checks.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub now: Timestamp,
    /// `rescheduleCriticalSeconds`.
    pub pending_timeout: i64,
    /// `unschedulableDuration`: how long a reserved Pod must have been ready to leave.
    pub min_ready: i64,
    /// The transition time of the `UnitedDeploymentUpdated` condition of this reconcile.
    pub updated_since: Timestamp,
}

/// Upstream `CheckPodReallyInReservedStatus`. A reserved Pod stays reserved until it has run
/// at the update revision and been ready for `min_ready`. Another Pod becomes reserved once
/// unschedulable past the pending timeout, or, at an old revision, once the update has lasted
/// past it.
pub fn verdict(pod: &Pod, update_revision: &str, clock: &Clock) -> PodVerdict {
    let revision = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL))
        .map_or("", String::as_str);
    let at_update = revision == update_revision;
    let hold = secs(clock.min_ready);
    if reserved_label(pod) == Some(true) {
        let status = pod.status.as_ref();
        let running = status.and_then(|s| s.phase.as_deref()) == Some(k8s::POD_RUNNING);
        let ready_since = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == k8s::POD_READY && c.status == k8s::CONDITION_TRUE)
            .map(|c| c.last_transition_time.as_ref().map_or(clock.now, |t| t.0));
        if running
            && at_update
            && let Some(since) = ready_since
        {
            let out = since
                .checked_add(SignedDuration::from_secs(clock.min_ready))
                .unwrap_or(since);
            return if out < clock.now {
                PodVerdict::default()
            } else {
                PodVerdict {
                    reserved: true,
                    check_after: Some(until(out, clock.now)),
                    update_timeout: false,
                }
            };
        }
        return PodVerdict {
            reserved: true,
            check_after: Some(hold),
            update_timeout: false,
        };
    }
    let (timed_out, after) = if at_update {
        match adaptive::pending(pod, clock.pending_timeout, clock.now) {
            Pending::TimedOut => (true, None),
            Pending::Until(d) => (false, Some(d)),
            Pending::No => (false, None),
        }
    } else if pod.metadata.deletion_timestamp.is_some() {
        (false, None)
    } else {
        // Upstream `GetTimeBeforeUpdateTimeout`: the update started too long ago.
        let since = clock.updated_since;
        let deadline = since
            .checked_add(SignedDuration::from_secs(clock.pending_timeout))
            .unwrap_or(since);
        if deadline < clock.now {
            (true, None)
        } else {
            (false, Some(until(deadline, clock.now)))
        }
    };
    PodVerdict {
        reserved: timed_out,
        check_after: if timed_out { Some(hold) } else { after },
        update_timeout: timed_out && !at_update,
    }
}

/// One existing subset under the reservation strategy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assessment {
    /// Reserved Pods are in it.
    pub unschedulable: bool,
    /// It was `Schedulable=False` before this reconcile.
    pub marked: bool,
    pub reserved_pods: i32,
    pub update_timeout_pods: i32,
    pub conditions: Vec<UnitedDeploymentSubsetCondition>,
    pub requeue: Option<Duration>,
    /// Pods whose reserved label to write: `(name, reserved)`.
    pub relabel: Vec<(String, bool)>,
}

/// Upstream `calculateSubsetsStatusForReservedAdaptiveStrategy`: in a subset marked
/// unschedulable, a Pod without the label is reserved at once (it was created there while
/// marked); the others get [`verdict`]. The subset is `Schedulable=False` while any Pod is
/// reserved, `True` otherwise.
pub fn assess(
    previous: &[UnitedDeploymentSubsetCondition],
    pods: &[&Pod],
    update_revision: &str,
    clock: &Clock,
) -> Assessment {
    let marked = previous
        .iter()
        .any(|c| c.type_ == UD_SUBSET_CONDITION_SCHEDULABLE && c.status == k8s::CONDITION_FALSE);
    let mut out = Assessment {
        marked,
        conditions: previous.to_vec(),
        ..Default::default()
    };
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let label = reserved_label(pod);
        if marked && label.is_none() {
            out.reserved_pods += 1;
            out.relabel.push((name, true));
            continue;
        }
        let v = verdict(pod, update_revision, clock);
        if v.reserved {
            out.reserved_pods += 1;
        }
        if v.update_timeout {
            out.update_timeout_pods += 1;
        }
        if let Some(d) = v.check_after {
            out.requeue = Some(out.requeue.map_or(d, |r| r.min(d)));
        }
        if label != Some(v.reserved) {
            out.relabel.push((name, v.reserved));
        }
    }
    out.unschedulable = out.reserved_pods > 0;
    let (status, message) = if out.unschedulable {
        (k8s::CONDITION_FALSE, "reserved pods found")
    } else {
        (k8s::CONDITION_TRUE, "no reserved pods")
    };
    set_condition(
        &mut out.conditions,
        status,
        UD_SUBSET_REASON_RESCHEDULE,
        message.to_owned(),
        clock.now,
    );
    out
}

/// What the reservation allocator knows of an existing subset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Existing {
    pub spec_replicas: i32,
    pub reserved_pods: i32,
    pub unschedulable: bool,
    pub marked: bool,
}

/// One subset during the reservation allocation (upstream `reservationAllocatorSubsetRecord`).
struct Record {
    /// Replicas it can still take that will run; below zero, that many are expected to stay
    /// reserved.
    max_allocatable: i64,
    allocated: i64,
}

impl Record {
    /// Raises the subset towards `to` out of `rest`; returns how many of the added replicas
    /// are expected to run (the others are covered by temporary Pods elsewhere).
    fn allocate(&mut self, to: i64, rest: i64) -> i64 {
        let add = (to - self.allocated).min(rest);
        self.allocated += add;
        self.max_allocatable -= add;
        if self.max_allocatable < 0 {
            (add + self.max_allocatable).max(0)
        } else {
            add
        }
    }
}

/// Upstream `reservationAllocator`: minimums first, then each subset up to its maximum (or,
/// when unschedulable, its current replicas), in order; a replica given to an unschedulable
/// subset beyond what can run there is not counted, so the next subsets get a temporary one.
pub fn allocate(
    spec: &UnitedDeploymentSpec,
    existing: &BTreeMap<String, Existing>,
) -> Result<BTreeMap<String, i32>, AllocError> {
    let bounds = plan::min_max_of(spec)?;
    let subsets = &spec.topology.subsets;
    let mut rest = i64::from(spec.replicas.unwrap_or(0));
    let mut records: Vec<Record> = subsets
        .iter()
        .map(|s| match existing.get(&s.name) {
            Some(e) if e.unschedulable || e.marked => Record {
                max_allocatable: i64::from(e.spec_replicas - e.reserved_pods),
                allocated: 0,
            },
            _ => Record {
                max_allocatable: i64::from(i32::MAX),
                allocated: 0,
            },
        })
        .collect();
    let export = |records: &[Record]| -> BTreeMap<String, i32> {
        subsets
            .iter()
            .zip(records)
            .map(|(s, r)| {
                let n = i32::try_from(r.allocated).unwrap_or(i32::MAX);
                (s.name.clone(), n)
            })
            .collect()
    };
    for (r, (min, _)) in records.iter_mut().zip(&bounds) {
        rest -= r.allocate(i64::from(*min), rest);
        if rest <= 0 {
            return Ok(export(&records));
        }
    }
    for ((r, s), (_, max)) in records.iter_mut().zip(subsets).zip(&bounds) {
        let to = match existing.get(&s.name) {
            Some(e) if e.unschedulable => e.spec_replicas,
            _ => *max,
        };
        rest -= r.allocate(i64::from(to), rest);
        if rest <= 0 {
            break;
        }
    }
    Ok(export(&records))
}

/// Upstream's post-processing: a subset that just recovered and is given more replicas is
/// marked again, so that its new Pods are reserved until they run and the temporary Pods
/// elsewhere stay until then.
pub fn after_allocation(
    a: &mut Assessment,
    existing: &Existing,
    next_replicas: i32,
    now: Timestamp,
) {
    if !a.unschedulable && a.marked && next_replicas > existing.spec_replicas {
        set_condition(
            &mut a.conditions,
            k8s::CONDITION_FALSE,
            UD_SUBSET_REASON_RESCHEDULE,
            "subset just recovered scaled up".to_owned(),
            now,
        );
    }
}

/// Whether an unschedulable subset's workload gets its `maxUnavailable` overwritten on an
/// update, and to what (upstream `UpdateSubset`): its not-ready Pods plus the old-revision
/// Pods reserved by the update timeout, so that the rollout is not blocked by them.
pub fn max_unavailable(
    strategy: &UnitedDeploymentScheduleStrategy,
    a: &Assessment,
    spec_replicas: i32,
    ready_replicas: i32,
) -> Option<i32> {
    (strategy.should_reserve_unschedulable_pods() && a.unschedulable)
        .then_some(spec_replicas - ready_replicas + a.update_timeout_pods)
}
