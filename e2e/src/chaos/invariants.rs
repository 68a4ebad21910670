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
}

fn owned_by(owner: &str, prefixes: &[String]) -> bool {
    prefixes.iter().any(|p| owner.starts_with(p.as_str()))
}

/// Every check over the whole history.
pub fn check(h: &History, e: &Expect) -> Vec<Violation> {
    let mut v = slots_doubled(&h.pods);
    v.extend(slots_recreated(&h.pods, &e.one_pod_per_slot));
    v.extend(in_place_once(&h.pods, &e.in_place));
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
/// increase) and the container ids seen (the old one and the new one).
pub fn in_place_once(pods: &[PodObs], owners: &[String]) -> Vec<Violation> {
    // (uid, container) -> (spec image, restarts at the segment's start, ids seen in it, the
    // last id seen)
    type Segment = (String, i32, BTreeSet<String>, String);
    let mut seg: BTreeMap<(String, String), Segment> = BTreeMap::new();
    let mut reported = BTreeSet::new();
    let mut out = Vec::new();
    for p in pods
        .iter()
        .filter(|p| owned_by(&p.owner, owners) && !p.deleted)
    {
        for c in &p.containers {
            let key = (p.uid.clone(), c.name.clone());
            let s = seg.entry(key.clone()).or_insert_with(|| {
                (
                    c.spec_image.clone(),
                    c.restarts,
                    BTreeSet::new(),
                    String::new(),
                )
            });
            if s.0 != c.spec_image {
                // A new revision: its segment starts from the container that ran so far.
                let last = s.3.clone();
                let ids = std::iter::once(last.clone())
                    .filter(|i| !i.is_empty())
                    .collect();
                *s = (c.spec_image.clone(), c.restarts, ids, last);
            }
            if !c.id.is_empty() {
                s.2.insert(c.id.clone());
                s.3 = c.id.clone();
            }
            let restarts = c.restarts - s.1;
            if (restarts > 1 || s.2.len() > 2) && reported.insert(key) {
                out.push(Violation {
                    invariant: INPLACE_ONCE,
                    subject: p.owner.clone(),
                    t_ms: p.t_ms,
                    detail: format!(
                        "Pod {} container {} restarted {restarts} times ({} container ids) for image {}",
                        p.name,
                        c.name,
                        s.2.len(),
                        c.spec_image
                    ),
                });
            }
        }
    }
    out
}

/// Fewer available Pods than the budget allows, after the owner first had all available.
pub fn budget(pods: &[PodObs], b: &Budget) -> Vec<Violation> {
    let mut state: BTreeMap<&str, bool> = BTreeMap::new();
    let mut armed = false;
    for p in pods.iter().filter(|p| p.owner == b.owner) {
        if p.deleted {
            state.remove(p.uid.as_str());
        } else {
            state.insert(p.uid.as_str(), p.ready && !p.terminating);
        }
        let available = state.values().filter(|a| **a).count();
        if available >= b.replicas {
            armed = true;
        }
        let floor = b.replicas.saturating_sub(b.max_unavailable);
        if armed && available < floor {
            return vec![Violation {
                invariant: BUDGET,
                subject: b.owner.clone(),
                t_ms: p.t_ms,
                detail: format!(
                    "{available} of {} Pods available (budget: at most {} unavailable) when {} changed",
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
mod tests {
    use super::super::history::ContainerObs;
    use super::*;

    fn obs(t: u64, name: &str, uid: &str, slot: &str) -> PodObs {
        PodObs {
            t_ms: t,
            name: name.into(),
            uid: uid.into(),
            ready: true,
            owner: "CloneSet/cs".into(),
            slot: format!("CloneSet/cs/{slot}"),
            ..Default::default()
        }
    }

    fn with(mut p: PodObs, image: &str, id: &str, restarts: i32) -> PodObs {
        p.containers = vec![ContainerObs {
            name: "app".into(),
            spec_image: image.into(),
            id: id.into(),
            restarts,
        }];
        p
    }

    #[test]
    fn a_doubled_pod_breaks_the_slot_invariant_and_a_replacement_does_not() {
        let ok = vec![
            obs(1, "cs-a", "u1", "a"),
            PodObs {
                terminating: true,
                ..obs(2, "cs-a", "u1", "a")
            },
            obs(3, "cs-b", "u2", "a"),
        ];
        assert_eq!(slots_doubled(&ok), vec![]);
        let doubled = vec![obs(1, "cs-a", "u1", "a"), obs(2, "dup", "u9", "a")];
        let v = slots_doubled(&doubled);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].invariant, SLOT_DOUBLED);
        assert_eq!(v[0].t_ms, 2);
        // The replacement is fine for a recreating owner, not for one that keeps its Pods.
        assert_eq!(slots_recreated(&ok, &["CloneSet/other".into()]), vec![]);
        let v = slots_recreated(&ok, &["CloneSet/cs".into()]);
        assert_eq!(v.len(), 1);
        assert!(v[0].detail.contains("2 Pods"), "{}", v[0].detail);
    }

    #[test]
    fn one_restart_per_revision_passes_and_two_fail() {
        let owners = vec!["CloneSet/".to_string()];
        let base = obs(0, "cs-a", "u1", "a");
        let good = vec![
            with(base.clone(), "v1", "c1", 0),
            with(base.clone(), "v2", "c1", 0),
            with(base.clone(), "v2", "c2", 1),
            with(base.clone(), "v3", "c2", 1),
            with(base.clone(), "v3", "c3", 2),
        ];
        assert_eq!(in_place_once(&good, &owners), vec![]);
        let mut bad = good.clone();
        bad.push(with(base.clone(), "v3", "c4", 3));
        let v = in_place_once(&bad, &owners);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].invariant, INPLACE_ONCE);
        // Ids alone tell too (a restart the count missed between two observations).
        let ids = vec![
            with(base.clone(), "v1", "c1", 0),
            with(base.clone(), "v2", "c2", 1),
            with(base, "v2", "c3", 1),
        ];
        assert_eq!(in_place_once(&ids, &owners).len(), 1);
    }

    #[test]
    fn a_budget_counts_from_full_availability() {
        let b = Budget {
            owner: "CloneSet/cs".into(),
            replicas: 3,
            max_unavailable: 1,
        };
        let not_ready = |p: PodObs| PodObs { ready: false, ..p };
        // Starting up (never all available) is not charged.
        let start = vec![not_ready(obs(0, "a", "1", "a")), obs(1, "b", "2", "b")];
        assert_eq!(budget(&start, &b), vec![]);
        let mut h = vec![
            obs(0, "a", "1", "a"),
            obs(1, "b", "2", "b"),
            obs(2, "c", "3", "c"),
            PodObs {
                terminating: true,
                ..obs(3, "a", "1", "a")
            },
        ];
        assert_eq!(budget(&h, &b), vec![]);
        h.push(not_ready(obs(4, "b", "2", "b")));
        let v = budget(&h, &b);
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].invariant, v[0].t_ms), (BUDGET, 4));
    }

    #[test]
    fn a_spread_cap_counts_live_pods_of_its_subset() {
        let s = SpreadCap {
            subset: "ws/a".into(),
            max: 1,
        };
        let placed = |t, n: &str, u: &str| PodObs {
            spread: Some("ws/a".into()),
            ..obs(t, n, u, n)
        };
        let ok = vec![
            placed(0, "a", "1"),
            PodObs {
                deleted: true,
                ..placed(1, "a", "1")
            },
            placed(2, "b", "2"),
        ];
        assert_eq!(spread_cap(&ok, &s), vec![]);
        let over = vec![placed(0, "a", "1"), placed(1, "b", "2")];
        assert_eq!(spread_cap(&over, &s)[0].invariant, SPREAD_CAP);
    }

    #[test]
    fn a_check_with_nothing_to_check_fails() {
        let e = Expect {
            spreads: vec![SpreadCap {
                subset: "ws/a".into(),
                max: 1,
            }],
            ..Default::default()
        };
        let v = check(&History::default(), &e);
        assert_eq!(v.len(), 1);
        assert!(v[0].detail.contains("proved nothing"), "{}", v[0].detail);
    }

    #[test]
    fn two_runs_for_one_point_are_doubled() {
        let run = |uid: &str, at: &str| ObjObs {
            t_ms: 0,
            kind: "Job".into(),
            name: format!("acj-{uid}"),
            uid: uid.into(),
            deleted: false,
            owner: "AdvancedCronJob/acj".into(),
            scheduled: Some(at.into()),
            status: serde_json::Value::Null,
        };
        let ok = vec![run("1", "t1"), run("1", "t1"), run("2", "t2")];
        assert_eq!(cron_runs_doubled(&ok), vec![]);
        let doubled = vec![run("1", "t1"), run("2", "t1")];
        assert_eq!(cron_runs_doubled(&doubled)[0].invariant, RUNS);
    }
}
