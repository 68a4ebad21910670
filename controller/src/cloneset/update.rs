//! Which pods to update next and in what order (upstream `cloneset_update.go` decisions).

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{
    Lifecycle, LifecycleStateType, UpdatePriorityStrategy, UpdateScatterTerm, UpdateSpec,
};
use kruise_api::selector;

use super::diff::Diffs;
use super::podutil;

/// Why a pod that is not at the target revision is not a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    PreparingDelete,
    InGracePeriod,
}

/// Indexes (into `pods`) of pods waiting for the update revision, plus skipped ones for logs.
pub fn candidates(pods: &[&Pod], update_revision: &str) -> (Vec<usize>, Vec<(usize, Skip)>) {
    let mut wait = Vec::new();
    let mut skipped = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        if podutil::is_at_revision(pod, update_revision) {
            continue;
        }
        match podutil::lifecycle_state(pod) {
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

fn int_suffix(v: &str) -> i64 {
    let digits = v.bytes().rev().take_while(u8::is_ascii_digit).count();
    v[v.len() - digits..].parse().unwrap_or(0)
}

/// Stable sort of `idx` by the priority strategy: higher weight first; or, for order priority,
/// pods without any ordered key first, then by the first key present, higher suffix first.
pub fn sort_by_priority(strategy: &UpdatePriorityStrategy, pods: &[&Pod], idx: &mut [usize]) {
    let empty = BTreeMap::new();
    let labels = |i: usize| podutil::labels(pods[i]).unwrap_or(&empty);
    if !strategy.weight_priority.is_empty() {
        let weight = |i: usize| -> i64 {
            strategy
                .weight_priority
                .iter()
                .filter(|t| selector::matches(&t.match_selector, labels(i)))
                .map(|t| i64::from(t.weight))
                .sum()
        };
        idx.sort_by_key(|&i| std::cmp::Reverse(weight(i)));
    } else if !strategy.order_priority.is_empty() {
        let key = |i: usize| -> (i64, std::cmp::Reverse<i64>) {
            for (level, term) in strategy.order_priority.iter().enumerate() {
                if let Some(v) = labels(i).get(&term.ordered_key) {
                    let level = i64::try_from(level).unwrap_or(i64::MAX);
                    return (level, std::cmp::Reverse(int_suffix(v)));
                }
            }
            (-1, std::cmp::Reverse(0))
        };
        idx.sort_by_key(|&i| key(i));
    }
}

fn term_matches(pod: &Pod, t: &UpdateScatterTerm) -> bool {
    podutil::label(pod, &t.key) == Some(t.value.as_str())
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ScatterGroup {
    count: usize,
    matched_size: usize,
    unmatched_size: usize,
    unmatched_remainder: usize,
}

fn round_div(a: usize, b: usize) -> usize {
    if b == 0 {
        return 0;
    }
    // Go's math.Round rounds half away from zero.
    (a * 2 + b) / (2 * b)
}

fn scatter_group(matched: usize, unmatched: usize) -> ScatterGroup {
    let count = matched.min(unmatched);
    ScatterGroup {
        count,
        matched_size: round_div(matched, count),
        unmatched_size: round_div(unmatched, count),
        unmatched_remainder: 0,
    }
}

fn group_by_density(
    total_matched: usize,
    total_unmatched: usize,
    upd_matched: usize,
    upd_unmatched: usize,
) -> ScatterGroup {
    let update_group = scatter_group(upd_matched, upd_unmatched);
    // Compare unmatched/matched densities without division: a/b >= c/d  <=>  a*d >= c*b.
    if total_unmatched * upd_matched >= upd_unmatched * total_matched {
        return update_group;
    }
    let total_group = scatter_group(total_matched, total_unmatched);
    let mut g = ScatterGroup {
        matched_size: total_group.matched_size.max(1),
        unmatched_size: total_group.unmatched_size.max(1),
        ..Default::default()
    };
    g.count = (upd_matched / g.matched_size).min(upd_unmatched / g.unmatched_size);
    g.unmatched_remainder = upd_unmatched - g.count * g.unmatched_size;
    g
}

fn scatter_by_term(term: &UpdateScatterTerm, pods: &[&Pod], idx: Vec<usize>) -> Vec<usize> {
    let (mut matched, mut unmatched): (Vec<usize>, Vec<usize>) =
        idx.iter().partition(|&&i| term_matches(pods[i], term));
    if matched.len() <= 1 || unmatched.len() <= 1 {
        return idx;
    }
    let total_matched = pods.iter().filter(|p| term_matches(p, term)).count();
    let total_unmatched = pods.len() - total_matched;

    // The last matched pod is kept for the very end.
    let last = matched.pop();
    let g = group_by_density(
        total_matched - 1,
        total_unmatched,
        matched.len(),
        unmatched.len(),
    );
    let mut out = Vec::with_capacity(idx.len());
    let take = |src: &mut Vec<usize>, out: &mut Vec<usize>, n: usize| {
        let n = n.min(src.len());
        out.extend(src.drain(..n));
    };
    take(&mut unmatched, &mut out, g.unmatched_remainder);
    for _ in 0..g.count {
        take(&mut matched, &mut out, g.matched_size);
        take(&mut unmatched, &mut out, g.unmatched_size);
    }
    out.append(&mut matched);
    out.append(&mut unmatched);
    out.extend(last);
    out
}

/// Spread pods that match each scatter term over the update order, most common term first.
pub fn scatter(terms: &[UpdateScatterTerm], pods: &[&Pod], idx: Vec<usize>) -> Vec<usize> {
    if terms.is_empty() || idx.len() <= 1 {
        return idx;
    }
    let ordered: Vec<UpdateScatterTerm> = if terms.len() == 1 {
        terms.to_vec()
    } else {
        let mut counted: Vec<(UpdateScatterTerm, usize)> = Vec::new();
        for t in terms {
            let n = idx.iter().filter(|&&i| term_matches(pods[i], t)).count();
            if n > 0 && !counted.iter().any(|(c, _)| c == t) {
                counted.push((t.clone(), n));
            }
        }
        counted.sort_by_key(|c| std::cmp::Reverse(c.1));
        counted.into_iter().map(|(t, _)| t).collect()
    };
    ordered
        .iter()
        .fold(idx, |acc, t| scatter_by_term(t, pods, acc))
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
    pods: &[&Pod],
    idx: Vec<usize>,
    diffs: &Diffs,
    target_revision: &str,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Vec<usize> {
    let want = usize::try_from(diffs.update_num.unsigned_abs()).unwrap_or(usize::MAX);
    let mut idx = idx;
    idx.truncate(want);
    let avail = |p: &Pod| podutil::is_available(p, min_ready_seconds, now);
    let mut unavailable = 0;
    let mut target_unavailable = 0;
    for p in pods {
        if !avail(p) {
            unavailable += 1;
            if podutil::is_at_revision(p, target_revision) {
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
        if avail(pods[i]) {
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

/// The lifecycle state a pod moves to on refresh, if any (upstream `refreshPodState`):
/// PreparingNormal → Normal once scheduled (or once the preNormal hook is all set);
/// PreparingUpdate at the update revision and finished Updating → Updated while the inPlaceUpdate
/// hook is not all set, else Normal; Updated → Normal once the hook is all set.
pub fn next_lifecycle_state(
    lifecycle: Option<&Lifecycle>,
    pod: &Pod,
    update_revision: &str,
    update_completed: bool,
) -> Option<LifecycleStateType> {
    let in_place_hook = lifecycle.and_then(|l| l.in_place_update.as_ref());
    let after_update = || {
        if lifecycle.is_some() && !podutil::is_all_hooked(in_place_hook, pod) {
            LifecycleStateType::Updated
        } else {
            LifecycleStateType::Normal
        }
    };
    match podutil::lifecycle_state(pod)? {
        LifecycleStateType::PreparingNormal => {
            let ready = match lifecycle.and_then(|l| l.pre_normal.as_ref()) {
                None => podutil::is_scheduled(pod),
                Some(hook) => podutil::is_all_hooked(Some(hook), pod),
            };
            ready.then_some(LifecycleStateType::Normal)
        }
        LifecycleStateType::PreparingUpdate => {
            podutil::is_at_revision(pod, update_revision).then(after_update)
        }
        LifecycleStateType::Updating => update_completed.then(after_update),
        LifecycleStateType::Updated => (in_place_hook.is_none()
            || podutil::is_all_hooked(in_place_hook, pod))
        .then_some(LifecycleStateType::Normal),
        LifecycleStateType::Normal | LifecycleStateType::PreparingDelete => None,
    }
}

#[cfg(test)]
mod tests;
