//! Update order shared by the workloads (upstream `pkg/util/updatesort`): the priority strategy
//! (weight or order terms) and the scatter strategy that spreads Pods matching a term over the
//! update order. Pure: both reorder indexes into a Pod slice.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{UpdatePriorityStrategy, UpdateScatterTerm};
use kruise_api::selector;

use super::podutil;

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

#[cfg(test)]
mod tests;
