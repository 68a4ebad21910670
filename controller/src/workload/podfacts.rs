//! What a workload's pass reads of each Pod, read once per reconcile.
//!
//! A CloneSet reconcile walks its Pods several times (planned deletes, the scale and update
//! diffs, update candidates and their limit, status counts, the availability requeue), and each
//! walk looked up the same labels and scanned the same conditions again: at 2,000 Pods and
//! hundreds of reconciles per rollout, those lookups were a large share of the manager's CPU.
//! [`PodFacts::of`] reads them once; the walks read the facts.
//!
//! [`Readiness`] is the part that decides availability; `podutil`'s predicates are built on
//! it, so the facts and the predicates cannot disagree.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::LifecycleStateType;
use kruise_api::keys::{self, k8s};
use kruise_api::revision::{equal_to_revision_hash, pod_revision};

/// Margin past the exact moment of availability, so the check at the requeue is strictly after
/// it (Kubernetes' comparison is strict) despite timer rounding.
pub(crate) const AVAILABILITY_MARGIN: Duration = Duration::from_millis(20);

/// The phase and conditions availability is decided from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    running: bool,
    ready: bool,
    /// When Ready last became True (only when it is True).
    ready_since: Option<Timestamp>,
    /// The InPlaceUpdateReady condition is absent or True.
    inplace_ready: bool,
}

impl Readiness {
    /// One scan of the Pod's conditions.
    pub fn of(pod: &Pod) -> Self {
        let mut r = Readiness {
            running: pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(k8s::POD_RUNNING),
            inplace_ready: true,
            ..Default::default()
        };
        let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        // First match of each type wins, as a lookup by type does.
        let (mut seen_ready, mut seen_inplace) = (false, false);
        for c in conditions.into_iter().flatten() {
            if !seen_ready && c.type_ == k8s::POD_READY {
                seen_ready = true;
                r.ready = c.status == k8s::CONDITION_TRUE;
                if r.ready {
                    r.ready_since = c.last_transition_time.as_ref().map(|t| t.0);
                }
            } else if !seen_inplace && c.type_ == keys::INPLACE_UPDATE_READY {
                seen_inplace = true;
                r.inplace_ready = c.status == k8s::CONDITION_TRUE;
            }
        }
        r
    }

    /// The Ready condition is True (upstream `IsPodReady`).
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// When Ready last became True, if it is True.
    pub fn ready_since(&self) -> Option<Timestamp> {
        self.ready_since
    }

    /// No in-place update holds the Pod out of service: InPlaceUpdateReady absent or True.
    pub fn is_inplace_update_ready(&self) -> bool {
        self.inplace_ready
    }

    /// Ready for at least `min_ready_seconds` (Kubernetes' `IsPodAvailable`).
    pub fn is_available_k8s(&self, min_ready_seconds: i32, now: Timestamp) -> bool {
        if !self.ready {
            return false;
        }
        if min_ready_seconds <= 0 {
            return true;
        }
        // Kubernetes: `lastTransitionTime + minReadySeconds` is before `now`. Comparing whole
        // seconds instead would add up to a second, and a requeue made for the exact moment
        // would then find the Pod still unavailable and wait another `minReadySeconds`.
        self.ready_since.is_some_and(|t| {
            now.duration_since(t) > SignedDuration::from_secs(i64::from(min_ready_seconds))
        })
    }

    /// Running, available, and not held by an in-place update.
    pub fn is_update_ready(&self, min_ready_seconds: i32, now: Timestamp) -> bool {
        self.running && self.is_available_k8s(min_ready_seconds, now) && self.inplace_ready
    }

    /// How long until a Pod that is update-ready but not yet Ready for `min_ready_seconds`
    /// becomes so by the passing of time alone; `None` when it already is or needs more than
    /// time.
    fn ready_in(&self, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
        if min_ready_seconds <= 0
            || self.is_update_ready(min_ready_seconds, now)
            || !self.is_update_ready(0, now)
        {
            return None;
        }
        let at = self
            .ready_since?
            .checked_add(SignedDuration::from_secs(i64::from(min_ready_seconds)))
            .ok()?;
        let left = Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO);
        Some(left + AVAILABILITY_MARGIN)
    }
}

/// A lifecycle label other than Normal holds a Pod out of service (an unknown value too).
pub fn held_by_lifecycle(state_label: Option<&str>) -> bool {
    state_label.is_some_and(|s| s != LifecycleStateType::Normal.as_str())
}

/// What the walks of a workload's reconcile read of one Pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PodFacts<'a> {
    pub name: &'a str,
    revision: Option<&'a str>,
    /// The lifecycle state label, when it names a state we know.
    pub lifecycle: Option<LifecycleStateType>,
    held: bool,
    /// The specified-delete label is set.
    pub marked_for_delete: bool,
    pub readiness: Readiness,
}

impl<'a> PodFacts<'a> {
    pub fn of(pod: &'a Pod) -> Self {
        let labels = pod.metadata.labels.as_ref();
        let state = labels
            .and_then(|l| l.get(keys::LIFECYCLE_STATE_LABEL))
            .map(String::as_str);
        PodFacts {
            name: pod.metadata.name.as_deref().unwrap_or_default(),
            revision: pod_revision(labels),
            lifecycle: state.and_then(|s| s.parse().ok()),
            held: held_by_lifecycle(state),
            marked_for_delete: labels.is_some_and(|l| l.contains_key(keys::SPECIFIED_DELETE_LABEL)),
            readiness: Readiness::of(pod),
        }
    }

    /// The facts of each Pod, in the same order.
    pub fn all(pods: &[&'a Pod]) -> Vec<Self> {
        pods.iter().map(|p| Self::of(p)).collect()
    }

    /// The `controller-revision-hash` label names `revision` (`podutil::is_at_revision`).
    pub fn is_at_revision(&self, revision: &str) -> bool {
        equal_to_revision_hash(self.revision, revision)
    }

    /// What CloneSet counts as available (`podutil::is_available`).
    pub fn is_available(&self, min_ready_seconds: i32, now: Timestamp) -> bool {
        !self.held && self.readiness.is_update_ready(min_ready_seconds, now)
    }

    /// `podutil::available_in`.
    pub fn available_in(&self, min_ready_seconds: i32, now: Timestamp) -> Option<Duration> {
        if self.held {
            return None;
        }
        self.readiness.ready_in(min_ready_seconds, now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::podutil;
    use crate::workload::podutil::testpod::{pod, ts};

    /// Pods across the states the facts distinguish: phases, Ready and its time,
    /// InPlaceUpdateReady, lifecycle labels (known, unknown, Normal), the revision and the
    /// specified-delete label, and a condition listed twice.
    fn variety() -> Vec<Pod> {
        let mut out = Vec::new();
        for phase in ["Pending", "Running", "Succeeded"] {
            for ready in [None, Some("True"), Some("False")] {
                for inplace in [None, Some("True"), Some("False")] {
                    for state in [None, Some("Normal"), Some("PreparingUpdate"), Some("Bogus")] {
                        let mut p = pod("p").phase(phase).rev("cs-abc12");
                        if let Some(r) = ready {
                            p = p.cond("Ready", r, 100);
                        }
                        if let Some(i) = inplace {
                            p = p.cond(keys::INPLACE_UPDATE_READY, i, 90);
                        }
                        if let Some(s) = state {
                            p = p.label(keys::LIFECYCLE_STATE_LABEL, s);
                        }
                        out.push(p.build());
                    }
                }
            }
        }
        let mut twice = pod("twice")
            .phase("Running")
            .cond("Ready", "True", 50)
            .build();
        if let Some(cs) = twice.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            let mut second = cs[0].clone();
            second.status = "False".into();
            cs.push(second);
        }
        out.push(twice);
        out.push(
            pod("marked")
                .label(keys::SPECIFIED_DELETE_LABEL, "true")
                .build(),
        );
        out
    }

    /// The facts answer as the per-Pod predicates do, for every Pod, minReadySeconds and time.
    #[test]
    fn facts_agree_with_the_predicates() {
        let pods = variety();
        for p in &pods {
            let f = PodFacts::of(p);
            assert_eq!(f.name, podutil::name(p));
            assert_eq!(f.lifecycle, podutil::lifecycle_state(p));
            assert_eq!(
                f.marked_for_delete,
                crate::workload::specifieddelete::is_specified_delete(p)
            );
            assert_eq!(f.readiness.is_ready(), kruise_api::pod::is_ready(p));
            for rev in ["cs-abc12", "other-abc12", "cs-zzz99", ""] {
                assert_eq!(f.is_at_revision(rev), podutil::is_at_revision(p, rev));
            }
            for min_ready in [0, 5, 100] {
                for at in [90, 104, 106, 300] {
                    let now = ts(at);
                    assert_eq!(
                        f.is_available(min_ready, now),
                        podutil::is_available(p, min_ready, now),
                        "{p:?} min_ready {min_ready} at {at}"
                    );
                    assert_eq!(
                        f.readiness.is_update_ready(min_ready, now),
                        podutil::is_update_ready(p, min_ready, now)
                    );
                    assert_eq!(
                        f.available_in(min_ready, now),
                        podutil::available_in(p, min_ready, now)
                    );
                }
            }
        }
    }

    #[test]
    fn available_in_counts_from_ready_time() {
        let p = pod("p").phase("Running").cond("Ready", "True", 100).build();
        let f = PodFacts::of(&p);
        assert_eq!(
            f.available_in(10, ts(104)),
            Some(Duration::from_secs(6) + AVAILABILITY_MARGIN)
        );
        assert_eq!(f.available_in(10, ts(111)), None, "available already");
        assert_eq!(f.available_in(0, ts(104)), None, "no minReadySeconds");
        let held = pod("h")
            .phase("Running")
            .cond("Ready", "True", 100)
            .state(LifecycleStateType::PreparingUpdate)
            .build();
        assert_eq!(PodFacts::of(&held).available_in(10, ts(104)), None);
    }
}
