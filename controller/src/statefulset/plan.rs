//! Pure decisions of one sync (upstream `updateStatefulSet` and `rollingUpdateStatefulsetPods`):
//! which pods are replicas and which are condemned, what to create and delete this round, and
//! which pods to update. Time is a parameter; nothing here talks to the API.

use std::collections::BTreeSet;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys::k8s;

use kruise_api::appspub::{LifecycleStateType, UpdatePriorityStrategy};

use super::identity::{OrdinalRange, ordinal_of};
use crate::workload::updatesort::sort_by_priority;
use crate::workload::{podutil, specifieddelete};

/// The set's pods by role: `replicas[i]` holds the pod of ordinal `start + i` (reserved and
/// missing ordinals are `None`); `condemned` holds pods outside the range, highest ordinal
/// first. Pods whose name carries no ordinal are ignored, as upstream does.
#[derive(Debug, Default)]
pub struct Slots<'a> {
    pub replicas: Vec<Option<&'a Pod>>,
    pub condemned: Vec<(i32, &'a Pod)>,
}

pub fn slots<'a>(set: &str, range: &OrdinalRange, pods: &[&'a Pod]) -> Slots<'a> {
    let mut out = Slots {
        replicas: vec![None; range.slots()],
        condemned: Vec::new(),
    };
    for &pod in pods {
        let Some(ord) = ordinal_of(set, podutil::name(pod)) else {
            continue;
        };
        if range.contains(ord) {
            if let Ok(i) = usize::try_from(ord - range.start) {
                out.replicas[i] = Some(pod);
            }
        } else {
            out.condemned.push((ord, pod));
        }
    }
    out.condemned.sort_by_key(|c| std::cmp::Reverse(c.0));
    out
}

pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn is_finished(pod: &Pod) -> bool {
    let p = podutil::phase(pod);
    p == k8s::POD_FAILED || p == k8s::POD_SUCCEEDED
}

/// Running and Ready (upstream `isRunningAndReady`).
pub fn is_running_and_ready(pod: &Pod) -> bool {
    podutil::phase(pod) == k8s::POD_RUNNING && kruise_api::pod::is_ready(pod)
}

/// Running, Ready and not being deleted (upstream `isHealthy`).
pub fn is_healthy(pod: &Pod) -> bool {
    is_running_and_ready(pod) && !is_terminating(pod)
}

/// Running and Ready for `min_ready_seconds` (upstream `isRunningAndAvailable`); else how long
/// until time alone makes it available, when that is all it lacks.
pub fn running_and_available(
    pod: &Pod,
    min_ready_seconds: i32,
    now: Timestamp,
) -> (bool, Option<Duration>) {
    if podutil::phase(pod) != k8s::POD_RUNNING || is_terminating(pod) {
        return (false, None);
    }
    if podutil::is_available_k8s(pod, min_ready_seconds, now) {
        return (true, None);
    }
    (false, podutil::available_in(pod, min_ready_seconds, now))
}

/// One write of the scale half of a sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScaleOp {
    /// Create the PVCs and then the pod of this ordinal.
    Create(i32),
    /// Delete this pod (a condemned one, or a failed replica to be recreated).
    Delete { name: String, ordinal: i32 },
}

/// The scale half of a sync.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ScalePlan {
    pub ops: Vec<ScaleOp>,
    /// OrderedReady is waiting on a pod: no updates this round.
    pub exit: bool,
    /// Come back after this long (a pod becomes available by time alone).
    pub wait: Option<Duration>,
    /// Why the plan stopped, for the logs.
    pub blocked_by: Option<String>,
}

/// Spends one unit of `scaleStrategy.maxUnavailable`; true when none is left (upstream
/// `decreaseAndCheckMaxUnavailable`).
fn spend(budget: &mut Option<i32>) -> bool {
    match budget {
        None => false,
        Some(n) => {
            *n -= 1;
            *n <= 0
        }
    }
}

/// What to create and delete (upstream `processReplica` over the replicas, then
/// `processCondemned`). `monotonic` is OrderedReady: one pod at a time, each only once its
/// predecessors are Running and available, scale-down from the highest ordinal and one at a
/// time. Parallel creates and deletes everything at once, within `scale_max_unavailable`.
pub fn plan_scale(
    range: &OrdinalRange,
    slots: &Slots<'_>,
    monotonic: bool,
    scale_max_unavailable: Option<i32>,
    min_ready_seconds: i32,
    now: Timestamp,
) -> ScalePlan {
    let mut plan = ScalePlan::default();
    let mut budget = scale_max_unavailable;
    for (i, slot) in slots.replicas.iter().enumerate() {
        let ord = range.start + i32::try_from(i).unwrap_or(i32::MAX);
        if range.reserved.contains(&ord) {
            continue;
        }
        let (exit, stop) = match slot {
            None => {
                plan.ops.push(ScaleOp::Create(ord));
                if monotonic {
                    (true, false)
                } else {
                    (false, spend(&mut budget))
                }
            }
            Some(pod) if is_finished(pod) => {
                if spend(&mut budget) {
                    (false, true)
                } else {
                    if !is_terminating(pod) {
                        plan.ops.push(ScaleOp::Delete {
                            name: podutil::name(pod).to_string(),
                            ordinal: ord,
                        });
                    }
                    (true, false)
                }
            }
            Some(pod) if is_terminating(pod) => {
                if monotonic {
                    (true, false)
                } else {
                    (false, spend(&mut budget))
                }
            }
            Some(pod) if monotonic || budget.is_some() => {
                let (available, wait) = running_and_available(pod, min_ready_seconds, now);
                if available {
                    (false, false)
                } else {
                    plan.wait = min_wait(plan.wait, wait);
                    if monotonic {
                        (true, false)
                    } else {
                        (false, spend(&mut budget))
                    }
                }
            }
            Some(_) => (false, false),
        };
        if exit && monotonic {
            plan.exit = true;
            plan.blocked_by = Some(format!("ordinal {ord}"));
            return plan;
        }
        if stop {
            break;
        }
    }

    // Upstream's firstUnhealthyPod: the lowest ordinal that is not healthy, replicas or not.
    let first_unhealthy = slots
        .replicas
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|p| (range.start + i32::try_from(i).unwrap_or(0), p)))
        .chain(slots.condemned.iter().copied())
        .filter(|(_, p)| !is_healthy(p))
        .min_by_key(|(o, _)| *o)
        .map(|(o, _)| o);
    for &(ord, pod) in &slots.condemned {
        if is_terminating(pod) {
            if monotonic {
                plan.exit = true;
                return plan;
            }
            continue;
        }
        let first = first_unhealthy == Some(ord);
        let (available, wait) = running_and_available(pod, min_ready_seconds, now);
        if monotonic && !first && (!is_running_and_ready(pod) || !available) {
            plan.wait = min_wait(plan.wait, wait);
            plan.exit = true;
            return plan;
        }
        plan.ops.push(ScaleOp::Delete {
            name: podutil::name(pod).to_string(),
            ordinal: ord,
        });
        if monotonic {
            plan.exit = true;
            return plan;
        }
    }
    plan
}

fn min_wait(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The rolling settings the update half reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Rolling {
    /// Slots below this index keep their revision (or, unordered, this many pods).
    pub partition: i32,
    /// At least 1.
    pub max_unavailable: i32,
    /// `unorderedUpdate` is set: updated pods first, then the rest, highest ordinal first.
    pub unordered: bool,
    /// `unorderedUpdate.priorityStrategy`: the order of the pods still to update.
    pub priority: Option<UpdatePriorityStrategy>,
    /// `spec.replicas`.
    pub replicas: i32,
    pub min_ready_seconds: i32,
    /// `PreparingUpdateAsUpdate`: a Pod held in PreparingUpdate counts as updated where
    /// upstream asks `revision.IsPodUpdate` (the unordered update order, the revision of a
    /// new Pod).
    pub preparing_update_as_update: bool,
}

impl Rolling {
    /// Upstream `revision.IsPodUpdate`: at the update revision (`is_updated`), or held in
    /// PreparingUpdate under [`Rolling::preparing_update_as_update`].
    pub fn counts_as_updated(&self, pod: &Pod, is_updated: &dyn Fn(&Pod) -> bool) -> bool {
        (self.preparing_update_as_update
            && podutil::lifecycle_state(pod) == Some(LifecycleStateType::PreparingUpdate))
            || is_updated(pod)
    }

    /// Whether the Pod created for slot `idx` starts at the current revision (upstream
    /// `isCurrentRevisionNeeded`): ordered, below the partition; unordered, while fewer than
    /// `partition` Pods are not updated (`not_updated` counts [`Self::counts_as_updated`]'s
    /// complement, Pods created this round included).
    pub fn starts_at_current(&self, idx: i32, not_updated: usize) -> bool {
        if self.unordered {
            i32::try_from(not_updated).unwrap_or(i32::MAX) < self.partition
        } else {
            idx < self.partition
        }
    }
}

/// The update half of a sync.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UpdatePlan {
    /// Slot indexes of Pods labelled `apps.kruise.io/specified-delete` to delete now (the scale
    /// half recreates them), whatever the partition; never updated in the same round.
    pub specified_delete: Vec<usize>,
    /// Slot indexes to update now, in order.
    pub targets: Vec<usize>,
    /// Come back after this long (a pod becomes available by time alone).
    pub wait: Option<Duration>,
    /// Pods counted unavailable before any update of this round.
    pub unavailable: BTreeSet<String>,
}

/// The order slots are considered for update (upstream `sortPodsToUpdate`).
pub fn update_order(
    rolling: &Rolling,
    slots: &Slots<'_>,
    is_updated: &dyn Fn(&Pod) -> bool,
) -> Vec<usize> {
    let partition = usize::try_from(rolling.partition).unwrap_or(0);
    let max_update = usize::try_from(rolling.replicas - rolling.partition).unwrap_or(0);
    if max_update == 0 {
        return Vec::new();
    }
    let present = |i: &usize| slots.replicas[*i].is_some();
    if !rolling.unordered {
        return (partition..slots.replicas.len())
            .rev()
            .filter(present)
            .take(max_update)
            .collect();
    }
    let (mut done, mut waiting): (Vec<usize>, Vec<usize>) = (0..slots.replicas.len())
        .rev()
        .filter(present)
        .partition(|&i| {
            slots.replicas[i]
                .is_some_and(|p| is_terminating(p) || rolling.counts_as_updated(p, is_updated))
        });
    if let Some(strategy) = &rolling.priority {
        // CloneSet's priority sort (upstream `updatesort`), stable, so equal priorities keep
        // the highest-ordinal-first order.
        let pods: Vec<&Pod> = waiting.iter().filter_map(|&i| slots.replicas[i]).collect();
        let mut local: Vec<usize> = (0..pods.len()).collect();
        sort_by_priority(strategy, &pods, &mut local);
        waiting = local.into_iter().map(|j| waiting[j]).collect();
    }
    done.extend(waiting);
    done.truncate(max_update);
    done
}

/// Where a Pod's claims stand against the set's templates when they follow the Pods' update
/// (`volumeClaimUpdateStrategy: OnPodRollingUpdate` under `StatefulSetAutoResizePVCGate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimState {
    /// Every claim is compatible with its template (requests at least its size).
    pub matched: bool,
    /// Every claim's capacity reached its request.
    pub ready: bool,
}

impl ClaimState {
    /// Nothing to do for the claims (their strategy leaves them alone).
    pub const SETTLED: ClaimState = ClaimState {
        matched: true,
        ready: true,
    };
}

/// Which pods to update this round (upstream `rollingUpdateStatefulsetPods`): from the highest
/// ordinal down to the partition, never leaving more than `max_unavailable` pods unavailable
/// (unhealthy, mid in-place update, not yet available for minReadySeconds, or with a claim
/// still resizing), for both pod management policies. `in_place_pending` says whether a pod's
/// in-place update has not completed; `claims` where its claims stand (a Pod at the update
/// revision whose claims do not match yet is a target too: its claims are resized).
pub fn plan_update(
    rolling: &Rolling,
    slots: &Slots<'_>,
    is_updated: &dyn Fn(&Pod) -> bool,
    in_place_pending: &dyn Fn(&Pod) -> bool,
    claims: &dyn Fn(&Pod) -> ClaimState,
    now: Timestamp,
) -> UpdatePlan {
    let mut plan = UpdatePlan::default();
    for pod in slots.replicas.iter().flatten() {
        let name = podutil::name(pod).to_string();
        if !is_healthy(pod) || in_place_pending(pod) {
            plan.unavailable.insert(name);
            continue;
        }
        let (available, wait) = running_and_available(pod, rolling.min_ready_seconds, now);
        if !available {
            plan.unavailable.insert(name);
            plan.wait = min_wait(plan.wait, wait);
        } else if !claims(pod).ready {
            plan.unavailable.insert(name);
        }
    }
    let mut unavailable = plan.unavailable.clone();
    let max = usize::try_from(rolling.max_unavailable.max(1)).unwrap_or(1);
    // Upstream `handleSpecifiedDeletedPods`: highest ordinal first, under maxUnavailable (an
    // available Pod waits at the limit; the others go on), the partition not applying.
    for (i, pod) in slots.replicas.iter().enumerate().rev() {
        let Some(pod) = pod else { continue };
        if !specifieddelete::is_specified_delete(pod) || is_terminating(pod) {
            continue;
        }
        let name = podutil::name(pod);
        if unavailable.len() >= max && !unavailable.contains(name) {
            continue;
        }
        plan.specified_delete.push(i);
        unavailable.insert(name.to_string());
    }
    for i in update_order(rolling, slots, is_updated) {
        let Some(pod) = slots.replicas[i] else {
            continue;
        };
        if (is_updated(pod) && claims(pod).matched) || plan.specified_delete.contains(&i) {
            continue;
        }
        let name = podutil::name(pod);
        if unavailable.len() >= max && !unavailable.contains(name) {
            break;
        }
        if !is_terminating(pod) {
            plan.targets.push(i);
            unavailable.insert(name.to_string());
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kruise_api::keys;

    fn pod(ord: i32, phase: &str, ready: bool, rev: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(format!("web-{ord}"));
        p.metadata.labels = Some(
            [(
                keys::CONTROLLER_REVISION_HASH_LABEL.to_string(),
                rev.to_string(),
            )]
            .into(),
        );
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            conditions: Some(vec![PodCondition {
                type_: k8s::POD_READY.into(),
                status: if ready { "True" } else { "False" }.into(),
                last_transition_time: Some(Time(Timestamp::UNIX_EPOCH)),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    fn ok(ord: i32) -> Pod {
        pod(ord, "Running", true, "old")
    }

    fn range(start: i32, end: i32, reserved: &[i32]) -> OrdinalRange {
        OrdinalRange {
            start,
            end,
            reserved: reserved.iter().copied().collect(),
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_000).expect("time")
    }

    fn scale(r: &OrdinalRange, pods: &[Pod], monotonic: bool, budget: Option<i32>) -> ScalePlan {
        let refs: Vec<&Pod> = pods.iter().collect();
        plan_scale(r, &slots("web", r, &refs), monotonic, budget, 0, now())
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time_after_its_predecessor_is_ready() {
        let r = range(0, 3, &[]);
        let p = scale(&r, &[], true, None);
        assert_eq!(p.ops, vec![ScaleOp::Create(0)]);
        assert!(p.exit);
        // web-0 exists but is not ready: wait, create nothing.
        let p = scale(&r, &[pod(0, "Running", false, "old")], true, None);
        assert_eq!(p.ops, vec![]);
        assert!(p.exit);
        let p = scale(&r, &[ok(0)], true, None);
        assert_eq!(p.ops, vec![ScaleOp::Create(1)]);
    }

    #[test]
    fn parallel_creates_all_missing_at_once_within_scale_max_unavailable() {
        let r = range(0, 4, &[]);
        let p = scale(&r, &[ok(1)], false, None);
        assert_eq!(
            p.ops,
            vec![ScaleOp::Create(0), ScaleOp::Create(2), ScaleOp::Create(3)]
        );
        assert!(!p.exit);
        let p = scale(&r, &[ok(1)], false, Some(2));
        assert_eq!(p.ops, vec![ScaleOp::Create(0), ScaleOp::Create(2)]);
    }

    #[test]
    fn reserved_ordinals_are_skipped_and_their_pods_condemned() {
        let r = range(0, 4, &[1]);
        let pods = [ok(0), ok(1), ok(2)];
        let p = scale(&r, &pods, false, None);
        assert_eq!(
            p.ops,
            vec![
                ScaleOp::Create(3),
                ScaleOp::Delete {
                    name: "web-1".into(),
                    ordinal: 1
                }
            ]
        );
    }

    #[test]
    fn ordered_scale_down_deletes_the_highest_ordinal_first_one_at_a_time() {
        let r = range(0, 1, &[]);
        let pods = [ok(0), ok(1), ok(2)];
        let p = scale(&r, &pods, true, None);
        assert_eq!(
            p.ops,
            vec![ScaleOp::Delete {
                name: "web-2".into(),
                ordinal: 2
            }]
        );
        // Parallel: all condemned at once.
        let p = scale(&r, &pods, false, None);
        assert_eq!(p.ops.len(), 2);
        // A terminating condemned pod blocks OrderedReady.
        let mut gone = ok(2);
        gone.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let p = scale(&r, &[ok(0), ok(1), gone], true, None);
        assert_eq!(p.ops, vec![]);
        assert!(p.exit);
    }

    #[test]
    fn failed_replicas_are_deleted_for_recreation() {
        let r = range(0, 2, &[]);
        let p = scale(&r, &[ok(0), pod(1, "Failed", false, "old")], true, None);
        assert_eq!(
            p.ops,
            vec![ScaleOp::Delete {
                name: "web-1".into(),
                ordinal: 1
            }]
        );
    }

    fn settled(_: &Pod) -> ClaimState {
        ClaimState::SETTLED
    }

    #[test]
    fn claims_resizing_count_unavailable_and_unmatched_claims_make_a_target() {
        let pods = [
            pod(0, "Running", true, "new"),
            pod(1, "Running", true, "new"),
            pod(2, "Running", true, "new"),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let r = range(0, 3, &[]);
        let s = slots("web", &r, &refs);
        let updated = |_: &Pod| true;
        let pend = |_: &Pod| false;
        let r1 = rolling(0, 1, 3);
        // Every Pod is at the update revision; web-2's claims are smaller than the template.
        let unmatched = |p: &Pod| ClaimState {
            matched: podutil::name(p) != "web-2",
            ready: true,
        };
        let p = plan_update(&r1, &s, &updated, &pend, &unmatched, now());
        assert_eq!(p.targets, vec![2]);
        // web-2's claims were patched and are resizing: it is unavailable and web-1, whose
        // claims do not match either, waits for it.
        let resizing = |p: &Pod| ClaimState {
            matched: podutil::name(p) != "web-1",
            ready: podutil::name(p) != "web-2",
        };
        let p = plan_update(&r1, &s, &updated, &pend, &resizing, now());
        assert!(p.unavailable.contains("web-2"), "{p:?}");
        assert_eq!(p.targets, Vec::<usize>::new());
        assert_eq!(
            plan_update(&r1, &s, &updated, &pend, &settled, now()).targets,
            Vec::<usize>::new()
        );
    }

    fn rolling(partition: i32, max_unavailable: i32, replicas: i32) -> Rolling {
        Rolling {
            partition,
            max_unavailable,
            unordered: false,
            priority: None,
            replicas,
            min_ready_seconds: 0,
            preparing_update_as_update: false,
        }
    }

    fn update(rolling: &Rolling, pods: &[Pod], pending: &[&str]) -> Vec<usize> {
        let refs: Vec<&Pod> = pods.iter().collect();
        let r = range(0, i32::try_from(pods.len()).unwrap_or(0), &[]);
        let s = slots("web", &r, &refs);
        let updated = |p: &Pod| podutil::revision_hash(p) == Some("new");
        let pend = |p: &Pod| pending.contains(&podutil::name(p));
        plan_update(rolling, &s, &updated, &pend, &settled, now()).targets
    }

    #[test]
    fn updates_go_from_the_highest_ordinal_down_to_the_partition() {
        let pods = [ok(0), ok(1), ok(2)];
        assert_eq!(update(&rolling(1, 1, 3), &pods, &[]), vec![2]);
        // web-2 done and ready: next is web-1; web-0 stays below the partition.
        let pods = [ok(0), ok(1), pod(2, "Running", true, "new")];
        assert_eq!(update(&rolling(1, 1, 3), &pods, &[]), vec![1]);
        let pods = [
            ok(0),
            pod(1, "Running", true, "new"),
            pod(2, "Running", true, "new"),
        ];
        assert_eq!(update(&rolling(1, 1, 3), &pods, &[]), Vec::<usize>::new());
        assert_eq!(update(&rolling(0, 1, 3), &pods, &[]), vec![0]);
    }

    #[test]
    fn max_unavailable_bounds_the_pods_updated_at_once() {
        let pods = [ok(0), ok(1), ok(2), ok(3)];
        assert_eq!(update(&rolling(0, 2, 4), &pods, &[]), vec![3, 2]);
        // web-3 is mid in-place update (unavailable): only one more may go.
        let pods = [ok(0), ok(1), ok(2), pod(3, "Running", true, "new")];
        assert_eq!(update(&rolling(0, 2, 4), &pods, &["web-3"]), vec![2]);
        // An unavailable pod that still needs the update may go even at the limit ...
        let pods = [ok(0), ok(1), pod(2, "Running", false, "old")];
        assert_eq!(update(&rolling(0, 1, 3), &pods, &[]), vec![2]);
        // ... but an available one above it waits (upstream blocks on the first such pod).
        let pods = [ok(0), pod(1, "Running", false, "old"), ok(2)];
        assert_eq!(update(&rolling(0, 1, 3), &pods, &[]), Vec::<usize>::new());
    }

    #[test]
    fn specified_delete_goes_first_whatever_the_partition_under_max_unavailable() {
        let marked = |ord| labelled(ord, &[(keys::SPECIFIED_DELETE_LABEL, "true")]);
        let plan_of = |r: &Rolling, pods: &[Pod]| {
            let refs: Vec<&Pod> = pods.iter().collect();
            let rg = range(0, i32::try_from(pods.len()).unwrap_or(0), &[]);
            let s = slots("web", &rg, &refs);
            let updated = |p: &Pod| podutil::revision_hash(p) == Some("old");
            let pend = |_: &Pod| false;
            let p = plan_update(r, &s, &updated, &pend, &settled, now());
            (p.specified_delete, p.targets)
        };
        // Every pod is at the update revision; web-0 is below the partition and still goes.
        let pods = [marked(0), ok(1), ok(2)];
        assert_eq!(plan_of(&rolling(3, 1, 3), &pods), (vec![0], vec![]));
        // maxUnavailable 1: only the highest marked pod this round.
        let pods = [marked(0), marked(1), ok(2)];
        assert_eq!(plan_of(&rolling(0, 1, 3), &pods), (vec![1], vec![]));
        // At the limit (web-2 not ready), an available marked pod waits ...
        let pods = [marked(0), ok(1), pod(2, "Running", false, "old")];
        assert_eq!(plan_of(&rolling(0, 1, 3), &pods), (vec![], vec![]));
        // ... but an unavailable one goes, and is not also updated.
        let mut sick = pod(1, "Running", false, "new");
        sick.metadata
            .labels
            .get_or_insert_default()
            .insert(keys::SPECIFIED_DELETE_LABEL.into(), "true".into());
        let pods = [ok(0), sick, ok(2)];
        assert_eq!(plan_of(&rolling(0, 2, 3), &pods), (vec![1], vec![]));
    }

    #[test]
    fn unordered_update_counts_updated_pods_against_the_partition() {
        let mut r = rolling(1, 3, 3);
        r.unordered = true;
        let pods = [ok(0), pod(1, "Running", true, "new"), ok(2)];
        // Two may be updated; web-1 already is, so only web-2 (highest first) goes.
        assert_eq!(update(&r, &pods, &[]), vec![2]);
    }

    /// Upstream `sortPodsToUpdate` with `revision.IsPodUpdate`: under PreparingUpdateAsUpdate
    /// a Pod held in PreparingUpdate is among the updated ones, first and within the partition.
    #[test]
    fn preparing_update_counts_as_updated_in_the_unordered_order_with_the_gate() {
        let mut r = rolling(2, 3, 3);
        r.unordered = true;
        let held = labelled(1, &[(keys::LIFECYCLE_STATE_LABEL, "PreparingUpdate")]);
        let pods = [ok(0), held, ok(2)];
        assert_eq!(update_order_of(&r, &pods), vec![2]);
        r.preparing_update_as_update = true;
        assert_eq!(update_order_of(&r, &pods), vec![1]);
        // Ordered updates go by ordinal whatever the gate says.
        r.unordered = false;
        assert_eq!(update_order_of(&r, &pods), vec![2]);
    }

    /// Upstream `isCurrentRevisionNeeded`: ordered, below the partition; unordered, while
    /// fewer than `partition` Pods are not updated.
    #[test]
    fn new_pods_start_at_the_current_revision_within_the_partition() {
        let mut r = rolling(2, 1, 5);
        assert!(r.starts_at_current(1, 5));
        assert!(!r.starts_at_current(2, 0));
        r.unordered = true;
        assert!(r.starts_at_current(4, 1));
        assert!(!r.starts_at_current(0, 2));
    }

    fn labelled(ord: i32, labels: &[(&str, &str)]) -> Pod {
        let mut p = ok(ord);
        let l = p.metadata.labels.get_or_insert_default();
        for (k, v) in labels {
            l.insert((*k).to_string(), (*v).to_string());
        }
        p
    }

    fn update_order_of(r: &Rolling, pods: &[Pod]) -> Vec<usize> {
        let refs: Vec<&Pod> = pods.iter().collect();
        let rg = range(0, i32::try_from(pods.len()).unwrap_or(0), &[]);
        let s = slots("web", &rg, &refs);
        let updated = |p: &Pod| podutil::revision_hash(p) == Some("new");
        update_order(r, &s, &updated)
    }

    #[test]
    fn weight_priority_orders_the_pods_still_to_update() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
        use kruise_api::appspub::UpdatePriorityWeightTerm;
        let term = |v: &str, weight| UpdatePriorityWeightTerm {
            weight,
            match_selector: LabelSelector {
                match_labels: Some([("tier".to_string(), v.to_string())].into()),
                ..Default::default()
            },
        };
        let mut r = rolling(0, 1, 4);
        r.unordered = true;
        r.priority = Some(UpdatePriorityStrategy {
            weight_priority: vec![term("high", 100), term("mid", 50)],
            ..Default::default()
        });
        let pods = [
            labelled(0, &[("tier", "high")]),
            labelled(1, &[("tier", "mid")]),
            ok(2),
            pod(3, "Running", true, "new"),
        ];
        // Updated pods first (web-3), then by weight, ties highest ordinal first.
        assert_eq!(update_order_of(&r, &pods), vec![3, 0, 1, 2]);
        assert_eq!(update(&r, &pods, &[]), vec![0]);
        // Without unorderedUpdate the strategy is never read.
        r.unordered = false;
        assert_eq!(update_order_of(&r, &pods), vec![3, 2, 1, 0]);
    }

    #[test]
    fn order_priority_sorts_by_the_label_values_integer() {
        use kruise_api::appspub::UpdatePriorityOrderTerm;
        let mut r = rolling(0, 1, 3);
        r.unordered = true;
        r.priority = Some(UpdatePriorityStrategy {
            order_priority: vec![UpdatePriorityOrderTerm {
                ordered_key: "rank".into(),
            }],
            ..Default::default()
        });
        let pods = [
            labelled(0, &[("rank", "r-9")]),
            labelled(1, &[("rank", "r-1")]),
            labelled(2, &[("rank", "r-5")]),
        ];
        assert_eq!(update_order_of(&r, &pods), vec![0, 2, 1]);
    }
}
