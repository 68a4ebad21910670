//! The invariants, checked over a recorded [`History`]: pure functions, so each is tested on
//! hand-made histories, a breaking one included.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::history::{History, ObjObs, PodObs};

pub const ROLLOUT: &str = "every rollout completes";
pub const SLOT_DOUBLED: &str = "no Pod created twice for one slot";
pub const INPLACE_ONCE: &str = "each Pod updated in place at most once per revision";
pub const BUDGET: &str = "a PodUnavailableBudget never exceeded";
pub const SPREAD_CAP: &str = "a WorkloadSpread subset cap never exceeded";
pub const RUNS: &str = "no CRR, ImagePullJob or cron run lost or doubled";
pub const OBJECT_LOST: &str = "no object lost";

/// A broken invariant: which, about what (a Pod's owner `Kind/name`, or an object), when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub invariant: &'static str,
    pub subject: String,
    pub t_ms: u64,
    pub detail: String,
}

/// A budget over one owner's Pods: once all `replicas` were available, never fewer than
/// `replicas - max_unavailable`.
#[derive(Clone, Debug)]
pub struct Budget {
    pub owner: String,
    pub replicas: usize,
    pub max_unavailable: usize,
}

/// A WorkloadSpread subset (`ws/subset`) and its cap.
#[derive(Clone, Debug)]
pub struct SpreadCap {
    pub subset: String,
    pub max: usize,
}

/// What the campaign expects of its history.
#[derive(Clone, Debug, Default)]
pub struct Expect {
    /// Owners (prefixes of `Kind/name`) whose every slot has one Pod for the whole campaign:
    /// updated in place, or run once.
    pub one_pod_per_slot: Vec<String>,
    /// Owners (prefixes) whose Pods are updated in place.
    pub in_place: Vec<String>,
    pub budgets: Vec<Budget>,
    pub spreads: Vec<SpreadCap>,
    /// When the kubelet was killed (ms): a kubelet that dies between creating a container and
    /// starting it creates it again once back, one restart more than the update asked for.
    pub kubelet_kills_ms: Vec<u64>,
}

fn owned_by(owner: &str, prefixes: &[String]) -> bool {
    prefixes.iter().any(|p| owner.starts_with(p.as_str()))
}

/// Every check over the whole history.
pub fn check(h: &History, e: &Expect) -> Vec<Violation> {
    let mut v = slots_doubled(&h.pods);
    v.extend(slots_recreated(&h.pods, &e.one_pod_per_slot));
    v.extend(in_place_once(&h.pods, &e.in_place, &e.kubelet_kills_ms));
    for owner in &e.in_place {
        if !h.pods.iter().any(|p| p.owner.starts_with(owner.as_str())) {
            v.push(unobserved(INPLACE_ONCE, owner));
        }
    }
    for b in &e.budgets {
        v.extend(budget(&h.pods, b));
        if !h.pods.iter().any(|p| p.owner == b.owner) {
            v.push(unobserved(BUDGET, &b.owner));
        }
    }
    for s in &e.spreads {
        v.extend(spread_cap(&h.pods, s));
        if !h
            .pods
            .iter()
            .any(|p| p.spread.as_deref() == Some(s.subset.as_str()))
        {
            v.push(unobserved(SPREAD_CAP, &s.subset));
        }
    }
    v.extend(cron_runs_doubled(&h.objects));
    v.sort_by_key(|x| x.t_ms);
    v
}

/// A check that had nothing to check: it would pass whatever happened.
fn unobserved(invariant: &'static str, what: &str) -> Violation {
    Violation {
        invariant,
        subject: what.to_owned(),
        t_ms: 0,
        detail: format!("no Pod of {what} was ever observed: the check proved nothing"),
    }
}

/// Two live Pods, neither terminating, filling one slot of one owner at the same moment.
pub fn slots_doubled(pods: &[PodObs]) -> Vec<Violation> {
    let mut live: BTreeMap<&str, &PodObs> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    let mut out = Vec::new();
    for p in pods.iter().filter(|p| !p.owner.is_empty()) {
        if p.deleted || p.terminating {
            live.remove(p.uid.as_str());
            continue;
        }
        live.insert(p.uid.as_str(), p);
        let twins: Vec<&str> = live
            .values()
            .filter(|o| o.slot == p.slot)
            .map(|o| o.name.as_str())
            .collect();
        if twins.len() > 1 && reported.insert(p.slot.clone()) {
            out.push(Violation {
                invariant: SLOT_DOUBLED,
                subject: p.owner.clone(),
                t_ms: p.t_ms,
                detail: format!(
                    "slot {} filled by {} Pods at once: {twins:?}",
                    p.slot,
                    twins.len()
                ),
            });
        }
    }
    out
}

/// A slot of an owner that keeps its Pods (in place, run once) that had a second Pod.
pub fn slots_recreated(pods: &[PodObs], owners: &[String]) -> Vec<Violation> {
    let mut uids: BTreeMap<&str, Vec<(&str, &str, u64)>> = BTreeMap::new();
    for p in pods.iter().filter(|p| owned_by(&p.owner, owners)) {
        let list = uids.entry(p.slot.as_str()).or_default();
        if !list.iter().any(|(u, _, _)| *u == p.uid) {
            list.push((p.uid.as_str(), p.name.as_str(), p.t_ms));
        }
    }
    uids.into_iter()
        .filter(|(_, l)| l.len() > 1)
        .map(|(slot, l)| Violation {
            invariant: SLOT_DOUBLED,
            subject: pods
                .iter()
                .find(|p| p.slot == slot)
                .map(|p| p.owner.clone())
                .unwrap_or_default(),
            t_ms: l[1].2,
            detail: format!(
                "slot {slot} of a workload that keeps its Pods had {} Pods: {:?}",
                l.len(),
                l.iter()
                    .map(|(u, n, _)| format!("{n} ({u})"))
                    .collect::<Vec<_>>()
            ),
        })
        .collect()
}

/// A container restarted more than once while its spec asked for one image: an in-place
/// update applies a revision with one restart. Read from both restartCount (at most one
/// increase) and the container ids seen (the old one and the new one). Each kubelet kill
/// since the revision was first seen allows one restart more (`kubelet_kills_ms`): the
/// kubelet, not the update, restarted the container again.
pub fn in_place_once(
    pods: &[PodObs],
    owners: &[String],
    kubelet_kills_ms: &[u64],
) -> Vec<Violation> {
    struct Segment {
        image: String,
        since_ms: u64,
        restarts_at_start: i32,
        ids: BTreeSet<String>,
        last_id: String,
    }
    let mut seg: BTreeMap<(String, String), Segment> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    let mut out = Vec::new();
    for p in pods
        .iter()
        .filter(|p| owned_by(&p.owner, owners) && !p.deleted)
    {
        for c in &p.containers {
            let key = (p.uid.clone(), c.name.clone());
            let s = seg.entry(key.clone()).or_insert_with(|| Segment {
                image: c.spec_image.clone(),
                since_ms: p.t_ms,
                restarts_at_start: c.restarts,
                ids: BTreeSet::new(),
                last_id: String::new(),
            });
            if s.image != c.spec_image {
                // A new revision: its segment starts from the container that ran so far.
                let last = s.last_id.clone();
                *s = Segment {
                    image: c.spec_image.clone(),
                    since_ms: p.t_ms,
                    restarts_at_start: c.restarts,
                    ids: std::iter::once(last.clone())
                        .filter(|i| !i.is_empty())
                        .collect(),
                    last_id: last,
                };
            }
            if !c.id.is_empty() {
                s.ids.insert(c.id.clone());
                s.last_id = c.id.clone();
            }
            let kills = kubelet_kills_ms
                .iter()
                .filter(|k| (s.since_ms..=p.t_ms).contains(*k))
                .count();
            let allowed = 1 + i32::try_from(kills).unwrap_or(i32::MAX);
            let restarts = c.restarts - s.restarts_at_start;
            let too_many_ids = s.ids.len() > usize::try_from(allowed).unwrap_or(usize::MAX) + 1;
            if (restarts > allowed || too_many_ids) && reported.insert(key) {
                out.push(Violation {
                    invariant: INPLACE_ONCE,
                    subject: p.owner.clone(),
                    t_ms: p.t_ms,
                    detail: format!(
                        "Pod {} container {} restarted {restarts} times ({} container ids) for image {} \
                         ({kills} kubelet kills since)",
                        p.name,
                        c.name,
                        s.ids.len(),
                        c.spec_image
                    ),
                });
            }
        }
    }
    out
}

/// How long a Pod may have been unready on its own before a disruption is charged for it: the
/// budget's status needs a moment to see it.
const INVOLUNTARY_GRACE_MS: u64 = 10_000;

/// Fewer available Pods than the budget allows, after the owner first had all available.
///
/// A budget guards against disruptions: a Pod deleted or its spec changed. A Pod that was
/// available and turns unready with neither (the kubelet restarted and probes it again) is an
/// involuntary disruption no budget can refuse; it is charged only to disruptions that began
/// [`INVOLUNTARY_GRACE_MS`] or more after it did, by when the budget had seen it.
pub fn budget(pods: &[PodObs], b: &Budget) -> Vec<Violation> {
    struct State {
        available: bool,
        terminating: bool,
        images: Vec<String>,
        unready_on_its_own_since: Option<u64>,
    }
    let mut state: BTreeMap<&str, State> = BTreeMap::new();
    let mut armed = false;
    let mut last_disruption_ms = 0;
    let owned: Vec<&PodObs> = pods.iter().filter(|p| p.owner == b.owner).collect();
    for (i, p) in owned.iter().enumerate() {
        if p.deleted {
            state.remove(p.uid.as_str());
        } else {
            let images: Vec<String> = p.containers.iter().map(|c| c.spec_image.clone()).collect();
            let available = p.ready && !p.terminating;
            let prev = state.get(p.uid.as_str());
            let spec_changed = prev.is_some_and(|s| s.images != images);
            if spec_changed || (p.terminating && prev.is_some_and(|s| !s.terminating)) {
                last_disruption_ms = p.t_ms;
            }
            let on_its_own = match prev {
                _ if available || p.terminating || spec_changed => None,
                Some(s) if s.available => Some(p.t_ms),
                Some(s) => s.unready_on_its_own_since,
                None => None,
            };
            state.insert(
                p.uid.as_str(),
                State {
                    available,
                    terminating: p.terminating,
                    images,
                    unready_on_its_own_since: on_its_own,
                },
            );
        }
        // Observations of one millisecond are one moment (a re-list after an outage): judged
        // once all of them are in, not half-applied.
        if owned.get(i + 1).is_some_and(|n| n.t_ms == p.t_ms) {
            continue;
        }
        let available = state.values().filter(|s| s.available).count();
        if available >= b.replicas {
            armed = true;
        }
        let uncharged = state
            .values()
            .filter(|s| {
                s.unready_on_its_own_since
                    .is_some_and(|t| t + INVOLUNTARY_GRACE_MS > last_disruption_ms)
            })
            .count();
        let floor = b.replicas.saturating_sub(b.max_unavailable);
        if armed && available + uncharged < floor {
            return vec![Violation {
                invariant: BUDGET,
                subject: b.owner.clone(),
                t_ms: p.t_ms,
                detail: format!(
                    "{available} of {} Pods available (budget: at most {} unavailable; {uncharged} \
                     unready on their own not charged) when {} changed",
                    b.replicas, b.max_unavailable, p.name
                ),
            }];
        }
    }
    Vec::new()
}

/// More live, not terminating Pods placed in a subset than its cap.
pub fn spread_cap(pods: &[PodObs], s: &SpreadCap) -> Vec<Violation> {
    let mut live: BTreeSet<&str> = BTreeSet::new();
    for p in pods {
        if p.spread.as_deref() != Some(s.subset.as_str()) {
            continue;
        }
        if p.deleted || p.terminating {
            live.remove(p.uid.as_str());
        } else {
            live.insert(p.uid.as_str());
        }
        if live.len() > s.max {
            return vec![Violation {
                invariant: SPREAD_CAP,
                subject: p.owner.clone(),
                t_ms: p.t_ms,
                detail: format!(
                    "subset {} holds {} Pods (cap {}) when {} changed",
                    s.subset,
                    live.len(),
                    s.max,
                    p.name
                ),
            }];
        }
    }
    Vec::new()
}

/// Two runs of one AdvancedCronJob for one schedule point.
pub fn cron_runs_doubled(objects: &[ObjObs]) -> Vec<Violation> {
    let mut runs: BTreeMap<(&str, &str), BTreeSet<(&str, &str)>> = BTreeMap::new();
    let mut first: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for o in objects
        .iter()
        .filter(|o| o.owner.starts_with("AdvancedCronJob/"))
    {
        let Some(at) = o.scheduled.as_deref() else {
            continue;
        };
        runs.entry((o.owner.as_str(), at))
            .or_default()
            .insert((o.uid.as_str(), o.name.as_str()));
        first.entry((o.owner.as_str(), at)).or_insert(o.t_ms);
    }
    runs.into_iter()
        .filter(|(_, r)| r.len() > 1)
        .map(|((owner, at), r)| Violation {
            invariant: RUNS,
            subject: owner.to_owned(),
            t_ms: first.get(&(owner, at)).copied().unwrap_or(0),
            detail: format!("{} runs for schedule point {at}: {r:?}", r.len()),
        })
        .collect()
}

#[cfg(test)]
#[path = "invariants_tests.rs"]
mod tests;
