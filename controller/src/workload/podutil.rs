//! Pod predicates and orderings the workload decisions are built on. Pure: time is a parameter.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{LifecycleHook, LifecycleStateType};
use kruise_api::keys::{self, k8s};
use kruise_api::pod::{is_condition_true, is_ready};

use super::podfacts::{PodFacts, Readiness, held_by_lifecycle};

pub fn labels(pod: &Pod) -> Option<&BTreeMap<String, String>> {
    pod.metadata.labels.as_ref()
}

pub fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    labels(pod)?.get(key).map(String::as_str)
}

pub fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

pub fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// The lifecycle state label; `None` when absent or not a state we know.
pub fn lifecycle_state(pod: &Pod) -> Option<LifecycleStateType> {
    LifecycleStateType::from_labels(labels(pod))
}

/// Whether the pod still counts: not finished and not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    let p = phase(pod);
    p != k8s::POD_SUCCEEDED && p != k8s::POD_FAILED && pod.metadata.deletion_timestamp.is_none()
}

pub fn is_scheduled(pod: &Pod) -> bool {
    is_condition_true(pod, k8s::POD_SCHEDULED)
}

/// Ready for at least `min_ready_seconds` (Kubernetes' `IsPodAvailable`).
pub fn is_available_k8s(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    Readiness::of(pod).is_available_k8s(min_ready_seconds, now)
}

/// How long until `pod` becomes available by the passing of time alone: it is Running, Ready,
/// InPlaceUpdateReady (or without the condition) and in lifecycle Normal, but has not been
/// Ready for `min_ready_seconds` yet. `None` when it is available already or needs more than
/// time (the requeue for those comes from their own events).
pub fn available_in(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
    PodFacts::of(pod).available_in(min_ready_seconds, now)
}

/// Whether no in-place update holds the pod out of service: the InPlaceUpdateReady condition is
/// absent or True. The kubelet's status writer can put Ready back to True from a stale view just
/// after the engine set this condition False, so Ready alone may count a pod mid-update.
pub fn is_inplace_update_ready(pod: &Pod) -> bool {
    Readiness::of(pod).is_inplace_update_ready()
}

/// Running, available, and the InPlaceUpdateReady condition (when present) is True.
pub fn is_update_ready(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    Readiness::of(pod).is_update_ready(min_ready_seconds, now)
}

/// What CloneSet counts as available: lifecycle Normal (or none) and update-ready.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    !held_by_lifecycle(label(pod, keys::LIFECYCLE_STATE_LABEL))
        && is_update_ready(pod, min_ready_seconds, now)
}

pub fn revision_hash(pod: &Pod) -> Option<&str> {
    kruise_api::revision::pod_revision(labels(pod))
}

pub fn is_at_revision(pod: &Pod, revision_name: &str) -> bool {
    kruise_api::revision::labels_match_revision(labels(pod), revision_name)
}

pub fn has_finalizer(pod: &Pod, f: &str) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|fs| fs.iter().any(|x| x == f))
}

/// Any label or finalizer of the hook is on the pod.
pub fn is_hooked(hook: Option<&LifecycleHook>, pod: &Pod) -> bool {
    let Some(hook) = hook else { return false };
    hook.finalizers_handler
        .iter()
        .any(|f| has_finalizer(pod, f))
        || hook
            .labels_handler
            .iter()
            .any(|(k, v)| label(pod, k) == Some(v.as_str()))
}

/// Every label and finalizer of the hook is on the pod (an empty hook counts as all hooked).
pub fn is_all_hooked(hook: Option<&LifecycleHook>, pod: &Pod) -> bool {
    let Some(hook) = hook else { return false };
    hook.finalizers_handler
        .iter()
        .all(|f| has_finalizer(pod, f))
        && hook
            .labels_handler
            .iter()
            .all(|(k, v)| label(pod, k) == Some(v.as_str()))
}

fn phase_ordinal(pod: &Pod) -> i32 {
    match phase(pod) {
        k8s::POD_UNKNOWN => 1,
        k8s::POD_RUNNING => 2,
        // Pending, and phases that sort like it.
        _ => 0,
    }
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).max().unwrap_or(0))
        .unwrap_or(0)
}

/// Upstream's deletion-cost parsing: invalid values count as 0.
pub fn deletion_cost(pod: &Pod) -> i32 {
    let Some(v) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(k8s::POD_DELETION_COST_ANNOTATION))
    else {
        return 0;
    };
    let valid_first = match v.as_bytes().first() {
        Some(b'-') => true,
        Some(b'0') => v == "0",
        Some(b) => b.is_ascii_digit(),
        None => false,
    };
    if !valid_first {
        return 0;
    }
    v.parse::<i32>().unwrap_or(0)
}

/// Time ordering where a missing time sorts as "after" every real time: `a` comes first when it
/// is later or missing.
fn later_or_missing_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Ordering> {
    if a == b {
        return None;
    }
    Some(match (a, b) {
        (None, _) => Ordering::Less,
        (_, None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    })
}

/// Kubernetes' `ActivePods` order: the pod to sacrifice first (least valuable) sorts first:
/// unscheduled < scheduled, pending < unknown < running, not-ready < ready, ready more recently
/// < ready longer, more restarts < fewer, newer < older.
pub fn active_pods_cmp(a: &Pod, b: &Pod) -> Ordering {
    order_pods(a, b, false, None, None)
}

/// The ranked variant CloneSet uses to choose pods to delete: adds availability, deletion cost and
/// a rank pair (higher rank first) between readiness and ready time.
pub fn ranked_cmp(
    a: &Pod,
    b: &Pod,
    available: Option<&dyn Fn(&Pod) -> bool>,
    ranks: Option<(f64, f64)>,
) -> Ordering {
    order_pods(a, b, true, available, ranks)
}

fn order_pods(
    a: &Pod,
    b: &Pod,
    use_deletion_cost: bool,
    available: Option<&dyn Fn(&Pod) -> bool>,
    ranks: Option<(f64, f64)>,
) -> Ordering {
    let (na, nb) = (node_name(a), node_name(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return if na.is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    let (pa, pb) = (phase_ordinal(a), phase_ordinal(b));
    if pa != pb {
        return pa.cmp(&pb);
    }
    if let Some(avail) = available {
        let (aa, ab) = (avail(a), avail(b));
        if aa != ab {
            return if aa {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
    }
    let (ra, rb) = (is_ready(a), is_ready(b));
    if ra != rb {
        return if ra {
            Ordering::Greater
        } else {
            Ordering::Less
        };
    }
    if use_deletion_cost {
        let (ca, cb) = (deletion_cost(a), deletion_cost(b));
        if ca != cb {
            return ca.cmp(&cb);
        }
    }
    if let Some((ka, kb)) = ranks
        && ka != kb
    {
        return kb.partial_cmp(&ka).unwrap_or(Ordering::Equal);
    }
    if ra
        && rb
        && let Some(o) = later_or_missing_first(
            Readiness::of(a).ready_since(),
            Readiness::of(b).ready_since(),
        )
    {
        return o;
    }
    let (xa, xb) = (max_restarts(a), max_restarts(b));
    if xa != xb {
        return xb.cmp(&xa);
    }
    let (ta, tb) = (
        a.metadata.creation_timestamp.as_ref().map(|t| t.0),
        b.metadata.creation_timestamp.as_ref().map(|t| t.0),
    );
    later_or_missing_first(ta, tb).unwrap_or(Ordering::Equal)
}

#[cfg(test)]
pub(crate) mod testpod;

#[cfg(test)]
mod tests;

/// Where a Pod stands against the reschedule deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pending {
    /// Not a Pod the scheduler refused (scheduled, running, being deleted, or not yet tried).
    No,
    /// Refused by the scheduler; the deadline is this far away.
    Until(Duration),
    /// Refused by the scheduler and past the deadline.
    TimedOut,
}

/// Upstream `GetTimeBeforePendingTimeout`: a Pending, unbound Pod with
/// `PodScheduled=False/Unschedulable` times out `timeout_secs` after its creation.
pub fn pending_timeout(pod: &Pod, timeout_secs: i64, now: Timestamp) -> Pending {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if pod.metadata.deletion_timestamp.is_some() || phase != k8s::POD_PENDING || bound {
        return Pending::No;
    }
    let refused = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == k8s::POD_SCHEDULED
                && c.status == k8s::CONDITION_FALSE
                && c.reason.as_deref() == Some(k8s::POD_REASON_UNSCHEDULABLE)
        });
    let Some(created) = pod.metadata.creation_timestamp.as_ref() else {
        return Pending::No;
    };
    if !refused {
        return Pending::No;
    }
    let deadline = created
        .0
        .checked_add(SignedDuration::from_secs(timeout_secs))
        .unwrap_or(created.0);
    // Upstream times out strictly after the deadline.
    if deadline < now {
        Pending::TimedOut
    } else {
        Pending::Until(Duration::try_from(deadline.duration_since(now)).unwrap_or_default())
    }
}
