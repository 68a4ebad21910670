//! Pod predicates and orderings the CloneSet decisions are built on. Pure: time is a parameter.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kruise_api::appspub::{LifecycleHook, LifecycleStateType};
use kruise_api::keys;

use crate::revision;

/// Kubernetes' annotation ranking pods for deletion (lower is deleted first).
// TODO(api): kruise_api::keys has no constant for this Kubernetes annotation yet.
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

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

pub fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// The lifecycle state label; `None` when absent or not a state we know.
pub fn lifecycle_state(pod: &Pod) -> Option<LifecycleStateType> {
    LifecycleStateType::from_labels(labels(pod))
}

/// Whether the pod still counts: not finished and not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    let p = phase(pod);
    p != "Succeeded" && p != "Failed" && pod.metadata.deletion_timestamp.is_none()
}

pub fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

pub fn is_scheduled(pod: &Pod) -> bool {
    condition(pod, "PodScheduled").is_some_and(|c| c.status == "True")
}

fn ready_since(pod: &Pod) -> Option<Timestamp> {
    condition(pod, "Ready")
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// Ready for at least `min_ready_seconds` (Kubernetes' `IsPodAvailable`).
pub fn is_available_k8s(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    // Kubernetes: `lastTransitionTime + minReadySeconds` is before `now`. Comparing whole
    // seconds instead would add up to a second, and a requeue made for the exact moment would
    // then find the pod still unavailable and wait another `minReadySeconds`.
    match ready_since(pod) {
        Some(t) => now.duration_since(t) > SignedDuration::from_secs(i64::from(min_ready_seconds)),
        None => false,
    }
}

/// Margin past the exact moment of availability, so the check at the requeue is strictly after
/// it (Kubernetes' comparison is strict) despite timer rounding.
const AVAILABILITY_MARGIN: Duration = Duration::from_millis(20);

/// How long until `pod` becomes available by the passing of time alone: it is Running, Ready,
/// InPlaceUpdateReady (or without the condition) and in lifecycle Normal, but has not been
/// Ready for `min_ready_seconds` yet. `None` when it is available already or needs more than
/// time (the requeue for those comes from their own events).
pub fn available_in(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
    if min_ready_seconds <= 0 || is_available(pod, min_ready_seconds, now) {
        return None;
    }
    // Available as soon as it has been Ready long enough: everything else already holds.
    if !is_available(pod, 0, now) {
        return None;
    }
    let since = ready_since(pod)?;
    let at = since
        .checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
        .ok()?;
    let left = Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO);
    Some(left + AVAILABILITY_MARGIN)
}

/// Running, available, and the InPlaceUpdateReady condition (when present) is True.
pub fn is_update_ready(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if phase(pod) != "Running" || !is_available_k8s(pod, min_ready_seconds, now) {
        return false;
    }
    condition(pod, keys::INPLACE_UPDATE_READY).is_none_or(|c| c.status == "True")
}

/// What CloneSet counts as available: lifecycle Normal (or none) and update-ready.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if label(pod, keys::LIFECYCLE_STATE_LABEL)
        .is_some_and(|s| s != LifecycleStateType::Normal.as_str())
    {
        return false;
    }
    is_update_ready(pod, min_ready_seconds, now)
}

pub fn revision_hash(pod: &Pod) -> Option<&str> {
    label(pod, keys::CONTROLLER_REVISION_HASH_LABEL)
}

pub fn is_at_revision(pod: &Pod, revision_name: &str) -> bool {
    revision::equal_to_revision_hash(revision_hash(pod), revision_name)
}

pub fn has_specified_delete(pod: &Pod) -> bool {
    label(pod, keys::SPECIFIED_DELETE_LABEL).is_some()
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
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
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
        .and_then(|a| a.get(POD_DELETION_COST_ANNOTATION))
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
        && let Some(o) = later_or_missing_first(ready_since(a), ready_since(b))
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
pub(crate) mod testpod {
    //! A small pod builder for the CloneSet tests.
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    pub struct P(pub Pod);

    pub fn pod(name: &str) -> P {
        let mut p = Pod::default();
        p.metadata.name = Some(name.to_string());
        p.metadata.uid = Some(format!("uid-{name}"));
        p.metadata.namespace = Some("ns".to_string());
        p.spec = Some(PodSpec::default());
        p.status = Some(PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        });
        P(p)
    }

    pub fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("ts")
    }

    impl P {
        pub fn rev(mut self, r: &str) -> Self {
            self.0
                .metadata
                .labels
                .get_or_insert_default()
                .insert(keys::CONTROLLER_REVISION_HASH_LABEL.into(), r.into());
            self
        }
        pub fn label(mut self, k: &str, v: &str) -> Self {
            self.0
                .metadata
                .labels
                .get_or_insert_default()
                .insert(k.into(), v.into());
            self
        }
        pub fn annotation(mut self, k: &str, v: &str) -> Self {
            self.0
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(k.into(), v.into());
            self
        }
        pub fn state(self, s: LifecycleStateType) -> Self {
            self.label(keys::LIFECYCLE_STATE_LABEL, s.as_str())
        }
        pub fn node(mut self, n: &str) -> Self {
            self.0.spec.get_or_insert_default().node_name = Some(n.into());
            self
        }
        pub fn phase(mut self, ph: &str) -> Self {
            self.0.status.get_or_insert_default().phase = Some(ph.into());
            self
        }
        pub fn cond(mut self, t: &str, status: &str, since: i64) -> Self {
            let st = self.0.status.get_or_insert_default();
            let conds = st.conditions.get_or_insert_default();
            conds.retain(|c| c.type_ != t);
            conds.push(PodCondition {
                type_: t.into(),
                status: status.into(),
                last_transition_time: Some(Time(ts(since))),
                ..Default::default()
            });
            self
        }
        /// Running, scheduled and Ready since `since`.
        pub fn running_ready(self, since: i64) -> Self {
            self.node("n1")
                .phase("Running")
                .cond("PodScheduled", "True", since)
                .cond("Ready", "True", since)
        }
        pub fn created(mut self, secs: i64) -> Self {
            self.0.metadata.creation_timestamp = Some(Time(ts(secs)));
            self
        }
        pub fn restarts(mut self, n: i32) -> Self {
            self.0.status.get_or_insert_default().container_statuses =
                Some(vec![ContainerStatus {
                    name: "c".into(),
                    restart_count: n,
                    ..Default::default()
                }]);
            self
        }
        pub fn finalizer(mut self, f: &str) -> Self {
            self.0
                .metadata
                .finalizers
                .get_or_insert_default()
                .push(f.into());
            self
        }
        pub fn build(self) -> Pod {
            self.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testpod::*;
    use super::*;

    #[test]
    fn availability_needs_running_ready_and_min_ready() {
        let now = ts(100);
        let p = pod("a").running_ready(90).build();
        assert!(is_update_ready(&p, 0, now));
        assert!(is_update_ready(&p, 5, now));
        assert!(!is_update_ready(&p, 10, now));
        assert!(!is_update_ready(&pod("b").build(), 0, now));
    }

    #[test]
    fn availability_is_strictly_after_min_ready_to_the_subsecond() {
        let t = |ms: i64| Timestamp::from_millisecond(1_700_000_000_000 + ms).expect("ts");
        let p = pod("a").running_ready(90).build();
        assert!(!is_available(&p, 10, t(100_000)), "exactly 10 s: not yet");
        assert!(is_available(&p, 10, t(100_001)), "just past 10 s");
        assert!(is_available(&p, 10, t(100_500)));
    }

    #[test]
    fn available_in_is_the_moment_the_pod_becomes_available() {
        let t = |ms: i64| Timestamp::from_millisecond(1_700_000_000_000 + ms).expect("ts");
        let p = pod("a").running_ready(90).build();
        // Ready at 90 s, minReadySeconds 10: due at 100 s, plus the margin.
        assert_eq!(
            available_in(&p, 10, t(95_300)),
            Some(Duration::from_millis(4_700) + AVAILABILITY_MARGIN)
        );
        assert_eq!(
            available_in(&p, 10, t(100_000)),
            Some(AVAILABILITY_MARGIN),
            "at the exact moment it is not available yet"
        );
        assert_eq!(available_in(&p, 10, t(100_001)), None, "available already");
        // Following the answer lands on an available pod.
        let now = t(93_250);
        let wait = available_in(&p, 10, now).expect("due");
        let later = now
            .checked_add(SignedDuration::try_from(wait).expect("fits"))
            .expect("ts");
        assert!(is_available(&p, 10, later));
        assert_eq!(available_in(&p, 0, now), None, "no minReadySeconds");
    }

    #[test]
    fn available_in_ignores_pods_that_need_more_than_time() {
        let now = ts(95);
        assert_eq!(available_in(&pod("b").build(), 10, now), None, "not ready");
        let held = pod("a")
            .running_ready(90)
            .cond(keys::INPLACE_UPDATE_READY, "False", 0)
            .build();
        assert_eq!(
            available_in(&held, 10, now),
            None,
            "in-place update not ready"
        );
        let updating = pod("a")
            .running_ready(90)
            .state(LifecycleStateType::Updating)
            .build();
        assert_eq!(
            available_in(&updating, 10, now),
            None,
            "lifecycle not Normal"
        );
    }

    #[test]
    fn inplace_update_ready_false_blocks_readiness() {
        let now = ts(100);
        let p = pod("a")
            .running_ready(0)
            .cond(keys::INPLACE_UPDATE_READY, "False", 0)
            .build();
        assert!(!is_update_ready(&p, 0, now));
        let p = pod("a")
            .running_ready(0)
            .cond(keys::INPLACE_UPDATE_READY, "True", 0)
            .build();
        assert!(is_update_ready(&p, 0, now));
    }

    #[test]
    fn lifecycle_other_than_normal_is_unavailable() {
        let now = ts(100);
        let base = || pod("a").running_ready(0);
        assert!(is_available(&base().build(), 0, now));
        assert!(is_available(
            &base().state(LifecycleStateType::Normal).build(),
            0,
            now
        ));
        assert!(!is_available(
            &base().state(LifecycleStateType::PreparingNormal).build(),
            0,
            now
        ));
        assert!(!is_available(
            &base().state(LifecycleStateType::Updating).build(),
            0,
            now
        ));
    }

    #[test]
    fn active_pods_order() {
        let unscheduled = pod("u").build();
        let pending = pod("p").node("n").build();
        let running_notready = pod("r").node("n").phase("Running").build();
        let ready_recent = pod("rr").running_ready(50).build();
        let ready_old = pod("ro").running_ready(10).build();
        let mut v = [
            ready_old.clone(),
            ready_recent.clone(),
            running_notready.clone(),
            pending.clone(),
            unscheduled.clone(),
        ];
        v.sort_by(active_pods_cmp);
        let names: Vec<&str> = v.iter().map(name).collect();
        assert_eq!(names, vec!["u", "p", "r", "rr", "ro"]);
    }

    #[test]
    fn restarts_and_age_break_ties() {
        let a = pod("a").node("n").restarts(5).created(10).build();
        let b = pod("b").node("n").restarts(1).created(10).build();
        assert_eq!(active_pods_cmp(&a, &b), Ordering::Less);
        let newer = pod("n").node("n").created(20).build();
        let older = pod("o").node("n").created(10).build();
        assert_eq!(active_pods_cmp(&newer, &older), Ordering::Less);
        let no_time = pod("z").node("n").build();
        assert_eq!(active_pods_cmp(&no_time, &older), Ordering::Less);
    }

    #[test]
    fn deletion_cost_parsing() {
        assert_eq!(
            deletion_cost(
                &pod("a")
                    .annotation(POD_DELETION_COST_ANNOTATION, "-5")
                    .build()
            ),
            -5
        );
        assert_eq!(
            deletion_cost(
                &pod("a")
                    .annotation(POD_DELETION_COST_ANNOTATION, "10")
                    .build()
            ),
            10
        );
        assert_eq!(
            deletion_cost(
                &pod("a")
                    .annotation(POD_DELETION_COST_ANNOTATION, "+10")
                    .build()
            ),
            0
        );
        assert_eq!(
            deletion_cost(
                &pod("a")
                    .annotation(POD_DELETION_COST_ANNOTATION, "007")
                    .build()
            ),
            0
        );
        assert_eq!(deletion_cost(&pod("a").build()), 0);
    }

    #[test]
    fn hooks() {
        let hook = LifecycleHook {
            labels_handler: [("a".to_string(), "1".to_string())].into(),
            finalizers_handler: vec!["f".into()],
            mark_pod_not_ready: false,
        };
        let none = pod("x").build();
        let label_only = pod("x").label("a", "1").build();
        let both = pod("x").label("a", "1").finalizer("f").build();
        assert!(!is_hooked(Some(&hook), &none));
        assert!(is_hooked(Some(&hook), &label_only));
        assert!(!is_all_hooked(Some(&hook), &label_only));
        assert!(is_all_hooked(Some(&hook), &both));
        assert!(!is_all_hooked(None, &both));
        assert!(is_all_hooked(Some(&LifecycleHook::default()), &none));
    }
}
