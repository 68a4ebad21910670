//! The decisions of the launch-priority controller, free of I/O: which priorities still wait,
//! which barrier key to release next and when the pod is done.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::launch_priority::{self, barrier_key, barrier_priority};
use kruise_api::keys::k8s;

/// Name of the barrier ConfigMap of a pod (see `launch_priority::barrier_configmap_name`).
pub fn barrier_name(pod_name: &str) -> String {
    launch_priority::barrier_configmap_name(pod_name)
}

/// Whether the controller already marked the pod as fully released.
pub fn is_completed(pod: &Pod) -> bool {
    launch_priority::is_launch_completed(pod)
}

fn containers_ready(pod: &Pod) -> bool {
    kruise_api::pod::is_condition_true(pod, k8s::CONTAINERS_READY)
}

/// Priorities of the containers that are not ready yet, ascending. A container without a
/// status (the pod is not running yet) counts as not ready.
pub fn pending_priorities(pod: &Pod) -> Vec<i64> {
    let ready: BTreeSet<&str> = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|s| s.ready)
        .map(|s| s.name.as_str())
        .collect();
    let mut out: Vec<i64> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter(|c| !ready.contains(c.name.as_str()))
        .filter_map(barrier_priority)
        .collect();
    out.sort_unstable();
    out
}

/// Whether a pod event is worth a reconcile. Cheap: runs on every pod event of the manager.
pub fn wants_reconcile(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.metadata.name.is_some()
        && !is_completed(pod)
        && !containers_ready(pod)
        && !pending_priorities(pod).is_empty()
}

/// What to do with a pod whose barrier ConfigMap exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Add `key` to the barrier; with `then_complete` it was the last one.
    Release { key: String, then_complete: bool },
    /// Every priority is released: annotate the pod.
    Complete,
    /// The released priority is still starting; the next pod event brings us back.
    Wait,
}

/// Upstream's rule: release the highest priority that is not ready; once the lowest pending
/// priority is released there is nothing left to do.
pub fn next_step(pending: &[i64], released: impl Fn(&str) -> bool) -> Step {
    let (Some(lowest), Some(highest)) = (pending.first(), pending.last()) else {
        return Step::Complete;
    };
    if released(&barrier_key(*lowest)) {
        return Step::Complete;
    }
    let key = barrier_key(*highest);
    if released(&key) {
        return Step::Wait;
    }
    Step::Release {
        key,
        then_complete: lowest == highest,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
