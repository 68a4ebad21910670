//! Which Pods a workload's refresh found nothing to write for, by Pod resource version.
//!
//! A workload reconciles on every event of any of its Pods and refreshes every Pod each time
//! (in-place completion, `InPlaceUpdateReady`, lifecycle). For a Pod that did not change since
//! a refresh wrote nothing for it, the answer is the same again: the refresh reads only the Pod
//! and the workload's spec and update revision (no clock, once no grace period is pending).
//! Parsing the in-place state annotation and comparing container statuses for every Pod on
//! every reconcile was a large share of a big CloneSet's reconcile, and a rollout of 2,000 Pods
//! ran about 700 reconciles: work that grew with N².
//!
//! A [`Pass`] remembers, per workload, the Pods answered "nothing to write, nothing to wait
//! for" at their resource version, under the [`Basis`] (generation and update revision) of
//! that pass. Any write to a Pod changes its resource version; any change of the spec changes
//! the generation; a new update revision changes the basis. Pods not seen by a pass are
//! forgotten by it, so the memory follows the workload's Pods.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::Lifecycle;

use super::lifecycle::next_lifecycle_state;
use crate::inplace::{InPlaceControl, InPlaceHooks, UpdateOptions};

/// What a refresh's answer depends on besides the Pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Basis {
    /// The workload's `metadata.generation` (its lifecycle hooks, its update options).
    pub generation: Option<i64>,
    /// The workload's update revision.
    pub update_revision: String,
}

/// Pod uid → the resource version at which its refresh had nothing to do, and the last pass
/// that found it so. foldhash rather than SipHash: the keys are uids the API server chose, so a
/// defence against chosen keys buys nothing here, and every Pod is looked up at every pass.
type Seen = HashMap<String, (String, u64), foldhash::fast::RandomState>;

#[derive(Debug, Default)]
struct Remembered {
    basis: Basis,
    pods: Seen,
}

/// Per workload (`namespace/name`), the Pods whose refresh had nothing to do.
#[derive(Debug, Default)]
pub struct QuietPods {
    workloads: Mutex<HashMap<String, Remembered>>,
}

impl QuietPods {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a pass over the Pods of workload `key`. What was remembered under another basis
    /// is dropped. Passes of one workload never overlap (the runner reconciles an object once
    /// at a time); were they to, the second would only start empty.
    pub fn begin(&self, key: &str, basis: Basis) -> Pass<'_> {
        let pods = self
            .lock()
            .remove(key)
            .filter(|r| r.basis == basis)
            .map(|r| r.pods)
            .unwrap_or_default();
        Pass {
            memo: self,
            key: key.to_string(),
            basis,
            pods,
            // Entries of earlier passes carry a smaller number; only this pass's are kept.
            pass: PASSES.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }

    /// Forgets a deleted workload.
    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Forgets every workload `keep` refuses (after a relist: those deleted meanwhile).
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.lock().retain(|k, _| keep(k));
    }

    /// How many Pods are remembered in all (for tests).
    pub fn len(&self) -> usize {
        self.lock().values().map(|r| r.pods.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Remembered>> {
        // The map is only ever left consistent (no panics while held), so a poisoned lock's
        // content is still good.
        self.workloads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Numbers every pass of the process, so that a pass tells its own entries from older ones.
static PASSES: AtomicU64 = AtomicU64::new(0);

/// One pass over a workload's Pods; [`Pass::finish`] keeps what it learned.
#[derive(Debug)]
pub struct Pass<'a> {
    memo: &'a QuietPods,
    key: String,
    basis: Basis,
    pods: Seen,
    pass: u64,
}

fn id(pod: &Pod) -> Option<(&str, &str)> {
    Some((
        pod.metadata.uid.as_deref()?,
        pod.metadata.resource_version.as_deref()?,
    ))
}

impl Pass<'_> {
    /// Whether an earlier pass found nothing to do for `pod` at this very resource version;
    /// it is then remembered for the next pass too.
    pub fn was_quiet(&mut self, pod: &Pod) -> bool {
        let Some((uid, rv)) = id(pod) else {
            return false;
        };
        match self.pods.get_mut(uid) {
            Some((seen, pass)) if seen == rv => {
                *pass = self.pass;
                true
            }
            _ => false,
        }
    }

    /// Remembers that the refresh had nothing to do for `pod` at its resource version.
    pub fn quiet(&mut self, pod: &Pod) {
        if let Some((uid, rv)) = id(pod) {
            match self.pods.get_mut(uid) {
                Some(entry) => *entry = (rv.to_string(), self.pass),
                None => {
                    self.pods
                        .insert(uid.to_string(), (rv.to_string(), self.pass));
                }
            }
        }
    }

    /// Keeps the Pods this pass found quiet (and only those) for the next pass.
    pub fn finish(self) {
        let Pass {
            memo,
            key,
            basis,
            mut pods,
            pass,
        } = self;
        pods.retain(|_, (_, p)| *p == pass);
        memo.lock().insert(key, Remembered { basis, pods });
    }
}

/// Whether a refresh of `pod` would write nothing and wait for nothing: the in-place engine's
/// step (grace period, next batch, `InPlaceUpdateReady`) and the lifecycle state after it. Such
/// a Pod may be remembered by [`Pass::quiet`]; a pending grace period (a wait with a requeue)
/// is not quiet, since its answer depends on the clock.
pub fn is_quiet(
    hooks: &dyn InPlaceHooks,
    pod: &Pod,
    opts: &UpdateOptions,
    lifecycle: Option<&Lifecycle>,
    update_revision: &str,
    now: Timestamp,
) -> bool {
    let Some(out) = InPlaceControl::refresh_unwritten(hooks, pod, opts, now) else {
        return false;
    };
    out.requeue_after.is_none()
        && next_lifecycle_state(
            lifecycle,
            pod,
            update_revision,
            hooks.pod_update_completed(pod).is_ok(),
        )
        .is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inplace::CloneSetHooks;
    use crate::workload::podutil::testpod;
    use k8s_openapi::api::core::v1::PodReadinessGate;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kruise_api::appspub::LifecycleStateType;
    use kruise_api::keys;

    fn pod(uid: &str, rv: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some(uid.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn basis(generation: i64, rev: &str) -> Basis {
        Basis {
            generation: Some(generation),
            update_revision: rev.into(),
        }
    }

    #[test]
    fn a_pod_is_quiet_only_at_the_version_and_basis_it_was_seen_quiet() {
        let memo = QuietPods::new();
        let mut pass = memo.begin("ns/a", basis(1, "r1"));
        assert!(!pass.was_quiet(&pod("u1", "10")));
        pass.quiet(&pod("u1", "10"));
        pass.quiet(&pod("u2", "20"));
        pass.finish();

        let mut pass = memo.begin("ns/a", basis(1, "r1"));
        assert!(pass.was_quiet(&pod("u1", "10")));
        // Written since: a new resource version is asked again.
        assert!(!pass.was_quiet(&pod("u2", "21")));
        pass.finish();
        // u2 was not found quiet by the second pass, so it is gone; u1 stays.
        assert_eq!(memo.len(), 1);

        let mut pass = memo.begin("ns/a", basis(1, "r1"));
        assert!(pass.was_quiet(&pod("u1", "10")));
        pass.finish();

        for changed in [basis(2, "r1"), basis(1, "r2")] {
            let mut pass = memo.begin("ns/a", basis(1, "r1"));
            assert!(pass.was_quiet(&pod("u1", "10")));
            pass.finish();
            let mut pass = memo.begin("ns/a", changed);
            assert!(!pass.was_quiet(&pod("u1", "10")), "a new basis forgets");
            pass.finish();
            let mut pass = memo.begin("ns/a", basis(1, "r1"));
            pass.quiet(&pod("u1", "10"));
            pass.finish();
        }
    }

    #[test]
    fn workloads_are_apart_and_pods_not_seen_are_forgotten() {
        let memo = QuietPods::new();
        let mut pass = memo.begin("ns/a", basis(1, "r"));
        pass.quiet(&pod("u1", "1"));
        pass.finish();
        let mut pass = memo.begin("ns/b", basis(1, "r"));
        assert!(
            !pass.was_quiet(&pod("u1", "1")),
            "another workload's memory"
        );
        pass.quiet(&pod("u9", "1"));
        pass.finish();
        assert_eq!(memo.len(), 2);

        // A pass that does not see u1 (deleted) drops it.
        memo.begin("ns/a", basis(1, "r")).finish();
        assert_eq!(memo.len(), 1);
        memo.forget("ns/b");
        assert!(memo.is_empty());

        // A pass dropped without finishing (a failed reconcile) forgets the workload.
        let mut pass = memo.begin("ns/a", basis(1, "r"));
        pass.quiet(&pod("u1", "1"));
        pass.finish();
        let pass = memo.begin("ns/a", basis(1, "r"));
        drop(pass);
        let mut pass = memo.begin("ns/a", basis(1, "r"));
        assert!(!pass.was_quiet(&pod("u1", "1")));
        pass.finish();
    }

    fn gated(inplace_ready: &str) -> testpod::P {
        let mut p =
            testpod::pod("a")
                .running_ready(0)
                .cond(keys::INPLACE_UPDATE_READY, inplace_ready, 0);
        p.0.spec.get_or_insert_default().readiness_gates = Some(vec![PodReadinessGate {
            condition_type: keys::INPLACE_UPDATE_READY.into(),
        }]);
        p
    }

    #[test]
    fn quiet_means_no_write_no_wait_and_no_lifecycle_step() {
        let opts = UpdateOptions::default();
        let quiet = |p: &Pod| is_quiet(&CloneSetHooks, p, &opts, None, "r1", testpod::ts(5));
        assert!(quiet(&gated("True").build()));
        assert!(
            quiet(&gated("True").state(LifecycleStateType::Normal).build()),
            "Normal stays Normal"
        );
        // InPlaceUpdateReady goes back to True: a write.
        assert!(!quiet(&gated("False").build()));
        // A finished update moves the lifecycle from Updating on: a write.
        assert!(!quiet(
            &gated("True").state(LifecycleStateType::Updating).build()
        ));
        // A grace period is never quiet (a wait on the clock, or an unreadable annotation).
        assert!(!quiet(
            &gated("True")
                .annotation(
                    keys::INPLACE_UPDATE_GRACE_ANNOTATION,
                    r#"{"revision":"r1","graceSeconds":30}"#
                )
                .build()
        ));
    }

    #[test]
    fn a_pod_without_uid_or_version_is_never_quiet() {
        let memo = QuietPods::new();
        let mut pass = memo.begin("ns/a", basis(1, "r"));
        let mut p = pod("u1", "1");
        p.metadata.resource_version = None;
        pass.quiet(&p);
        pass.finish();
        assert!(memo.is_empty());
        let mut pass = memo.begin("ns/a", basis(1, "r"));
        assert!(!pass.was_quiet(&p));
        pass.finish();
    }
}
