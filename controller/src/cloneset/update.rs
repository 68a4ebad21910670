//! Which pods to update next and in what order (upstream `cloneset_update.go` decisions).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{
    LifecycleStateType, UpdatePriorityStrategy, UpdateScatterTerm, UpdateSpec,
};

use super::diff::Diffs;
use crate::workload::podfacts::PodFacts;
use crate::workload::podutil;
use crate::workload::updatesort::{scatter, sort_by_priority};

/// Why a pod that is not at the target revision is not a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    PreparingDelete,
    InGracePeriod,
}

/// Indexes (into `pods`) of pods waiting for the update revision, plus skipped ones for logs.
/// `facts` are those of `pods`, in the same order. `back`: the update moves Pods back to the
/// current revision (a negative `update_num`), so the Pods waiting are those at the update
/// revision (upstream's `waitUpdate` for a rollback).
pub fn candidates(
    pods: &[&Pod],
    facts: &[PodFacts],
    update_revision: &str,
    back: bool,
) -> (Vec<usize>, Vec<(usize, Skip)>) {
    let mut wait = Vec::new();
    let mut skipped = Vec::new();
    for (i, (pod, f)) in pods.iter().zip(facts).enumerate() {
        if f.is_at_revision(update_revision) != back {
            continue;
        }
        match f.lifecycle {
            Some(LifecycleStateType::PreparingDelete) => skipped.push((i, Skip::PreparingDelete)),
            Some(LifecycleStateType::Updated) => wait.push(i),
            _ if UpdateSpec::in_grace(pod.metadata.annotations.as_ref()) => {
                skipped.push((i, Skip::InGracePeriod));
            }
            _ => wait.push(i),
        }
    }
    (wait, skipped)
}

/// The full update order: ActivePods order, then priority, then scatter, then PreparingUpdate
/// pods first.
pub fn sort_candidates(
    pods: &[&Pod],
    mut idx: Vec<usize>,
    priority: Option<&UpdatePriorityStrategy>,
    scatter_terms: Option<&[UpdateScatterTerm]>,
) -> Vec<usize> {
    idx.sort_by(|&a, &b| podutil::active_pods_cmp(pods[a], pods[b]));
    if let Some(p) = priority {
        sort_by_priority(p, pods, &mut idx);
    }
    if let Some(s) = scatter_terms {
        idx = scatter(s, pods, idx);
    }
    idx.sort_by_key(|&i| {
        podutil::lifecycle_state(pods[i]) != Some(LifecycleStateType::PreparingUpdate)
    });
    idx
}

/// Cut the sorted candidates to what maxUnavailable allows: stop before the number of
/// unavailable pods (or unavailable pods at the target revision plus updating ones) would exceed
/// the limit. Updating a pod that is already unavailable costs nothing.
pub fn limit_candidates(
    pods: &[PodFacts],
    idx: Vec<usize>,
    diffs: &Diffs,
    target_revision: &str,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Vec<usize> {
    let want = usize::try_from(diffs.update_num.unsigned_abs()).unwrap_or(usize::MAX);
    let mut idx = idx;
    idx.truncate(want);
    let avail = |p: &PodFacts| p.is_available(min_ready_seconds, now);
    let mut unavailable = 0;
    let mut target_unavailable = 0;
    for p in pods {
        if !avail(p) {
            unavailable += 1;
            if p.is_at_revision(target_revision) {
                target_unavailable += 1;
            }
        }
    }
    let mut allowed = 0usize;
    for &i in &idx {
        let updating = i32::try_from(allowed).unwrap_or(i32::MAX);
        if target_unavailable + updating >= diffs.update_max_unavailable {
            break;
        }
        if avail(&pods[i]) {
            if unavailable >= diffs.update_max_unavailable {
                break;
            }
            unavailable += 1;
        }
        allowed += 1;
    }
    idx.truncate(allowed);
    idx
}

#[cfg(test)]
#[path = "update_tests.rs"]
mod tests;
