//! Unit tests of the history invariants.

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
    assert_eq!(in_place_once(&good, &owners, &[]), vec![]);
    let mut bad = good.clone();
    bad.push(with(base.clone(), "v3", "c4", 3));
    let v = in_place_once(&bad, &owners, &[]);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].invariant, INPLACE_ONCE);
    // A kubelet killed while the revision applied may start the container once more; a
    // kill before the revision was seen excuses nothing.
    let at = |t: u64, p: PodObs| PodObs { t_ms: t, ..p };
    let killed = vec![
        at(1, with(base.clone(), "v1", "c1", 0)),
        at(2, with(base.clone(), "v2", "c1", 0)),
        at(4, with(base.clone(), "v2", "c2", 1)),
        at(5, with(base.clone(), "v2", "c3", 2)),
    ];
    assert_eq!(in_place_once(&killed, &owners, &[3]), vec![]);
    assert_eq!(in_place_once(&killed, &owners, &[1]).len(), 1);
    let mut twice = killed.clone();
    twice.push(at(6, with(base.clone(), "v2", "c4", 3)));
    assert_eq!(in_place_once(&twice, &owners, &[3]).len(), 1);
    // Ids alone tell too (a restart the count missed between two observations).
    let ids = vec![
        with(base.clone(), "v1", "c1", 0),
        with(base.clone(), "v2", "c2", 1),
        with(base, "v2", "c3", 1),
    ];
    assert_eq!(in_place_once(&ids, &owners, &[]).len(), 1);
}

/// A budget over `CloneSet/cs`'s 3 Pods, at most 1 unavailable.
fn three_at_most_one_down() -> Budget {
    Budget {
        owner: "CloneSet/cs".into(),
        replicas: 3,
        max_unavailable: 1,
    }
}

/// Pods a, b and c available, then a deleted (t = 3).
fn all_up_then_a_going() -> Vec<PodObs> {
    vec![
        obs(0, "a", "1", "a"),
        obs(1, "b", "2", "b"),
        obs(2, "c", "3", "c"),
        PodObs {
            terminating: true,
            ..obs(3, "a", "1", "a")
        },
    ]
}

#[test]
fn a_budget_counts_from_full_availability() {
    let b = three_at_most_one_down();
    let not_ready = |p: PodObs| PodObs { ready: false, ..p };
    // Starting up (never all available) is not charged.
    let start = vec![not_ready(obs(0, "a", "1", "a")), obs(1, "b", "2", "b")];
    assert_eq!(budget(&start, &b), vec![]);
    let mut h = all_up_then_a_going();
    assert_eq!(budget(&h, &b), vec![]);
    // A second Pod deleted while the first is still going: charged.
    let mut deleted = h.clone();
    deleted.push(PodObs {
        terminating: true,
        ..obs(4, "b", "2", "b")
    });
    let v = budget(&deleted, &b);
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].invariant, v[0].t_ms), (BUDGET, 4));
    // A second Pod turning unready on its own (the kubelet restarted): not charged.
    h.push(not_ready(obs(4, "b", "2", "b")));
    assert_eq!(budget(&h, &b), vec![]);
}

#[test]
fn a_relist_is_judged_once_all_of_it_is_in() {
    let b = three_at_most_one_down();
    let unready = |p: PodObs| PodObs { ready: false, ..p };
    let mut h = all_up_then_a_going();
    h.push(unready(obs(4, "d", "4", "a")));
    // One moment: b seen deleted and its slot's new Pod ready, after d became ready.
    h.extend([
        PodObs {
            deleted: true,
            ..obs(9, "a", "1", "a")
        },
        PodObs {
            terminating: true,
            ..obs(9, "b", "2", "b")
        },
        obs(9, "d", "4", "a"),
    ]);
    assert_eq!(budget(&h, &b), vec![]);
    // Apart, the same observations show two unavailable at once.
    h[6].t_ms = 10;
    h[7].t_ms = 11;
    assert_eq!(budget(&h, &b).len(), 1);
}

#[test]
fn a_pod_unready_on_its_own_is_charged_to_a_disruption_the_budget_had_time_to_see() {
    let b = three_at_most_one_down();
    let all = vec![
        obs(0, "a", "1", "a"),
        obs(1, "b", "2", "b"),
        obs(2, "c", "3", "c"),
    ];
    let unready_b = PodObs {
        ready: false,
        ..obs(3, "b", "2", "b")
    };
    let delete_a = |t: u64| PodObs {
        terminating: true,
        ..obs(t, "a", "1", "a")
    };
    let soon: Vec<PodObs> = all
        .iter()
        .cloned()
        .chain([unready_b.clone(), delete_a(3 + INVOLUNTARY_GRACE_MS - 1)])
        .collect();
    assert_eq!(budget(&soon, &b), vec![]);
    let late: Vec<PodObs> = all
        .into_iter()
        .chain([unready_b, delete_a(3 + INVOLUNTARY_GRACE_MS)])
        .collect();
    let v = budget(&late, &b);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].t_ms, 3 + INVOLUNTARY_GRACE_MS);
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
