//! Tests of the Adaptive strategy's pure parts: the pending deadline, the subset's
//! `Schedulable` condition over time (an injected `now`), and the allocation with unschedulable
//! subsets (upstream's `TestDefaultAdaptiveAllocation` cases).

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    AdaptiveUnitedDeploymentStrategy, Subset, UD_SCHEDULE_ADAPTIVE,
    UD_SUBSET_CONDITION_SCHEDULABLE, UD_SUBSET_REASON_RECOVER, UD_SUBSET_REASON_RESCHEDULE,
    UnitedDeploymentScheduleStrategy, UnitedDeploymentSpec, UnitedDeploymentSubsetCondition,
};

use super::adaptive::{self, Assessment, Existing, Pending};

fn t0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).expect("timestamp")
}

fn at(secs: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs)
}

/// A Pod created at `t0`, in `phase`, refused by the scheduler when `refused`.
fn pod(phase: &str, node: Option<&str>, refused: bool) -> Pod {
    let conditions = refused.then(|| {
        vec![PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..Default::default()
        }]
    });
    Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            creation_timestamp: Some(Time(t0())),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(str::to_owned),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            conditions,
            ..Default::default()
        }),
    }
}

fn strategy(critical: i32, hold: i32) -> UnitedDeploymentScheduleStrategy {
    UnitedDeploymentScheduleStrategy {
        type_: UD_SCHEDULE_ADAPTIVE.into(),
        adaptive: Some(AdaptiveUnitedDeploymentStrategy {
            reschedule_critical_seconds: Some(critical),
            unschedulable_duration: Some(hold),
            reserve_unschedulable_pods: false,
        }),
    }
}

fn schedulable(a: &Assessment) -> Option<(&str, &str, Timestamp)> {
    a.conditions
        .iter()
        .find(|c| c.type_ == UD_SUBSET_CONDITION_SCHEDULABLE)
        .map(|c| {
            let t = c.last_transition_time.as_ref().map_or(t0(), |t| t.0);
            (c.status.as_str(), c.reason.as_str(), t)
        })
}

#[test]
fn a_refused_pending_pod_times_out_strictly_after_the_deadline() {
    let p = pod("Pending", None, true);
    assert_eq!(
        adaptive::pending(&p, 10, at(4)),
        Pending::Until(Duration::from_secs(6))
    );
    assert_eq!(
        adaptive::pending(&p, 10, at(10)),
        Pending::Until(Duration::ZERO)
    );
    assert_eq!(adaptive::pending(&p, 10, at(11)), Pending::TimedOut);
}

#[test]
fn only_unbound_pending_pods_refused_by_the_scheduler_count() {
    let late = at(100);
    assert_eq!(
        adaptive::pending(&pod("Pending", None, false), 10, late),
        Pending::No
    );
    assert_eq!(
        adaptive::pending(&pod("Pending", Some("n1"), true), 10, late),
        Pending::No
    );
    assert_eq!(
        adaptive::pending(&pod("Running", None, true), 10, late),
        Pending::No
    );
    let mut deleting = pod("Pending", None, true);
    deleting.metadata.deletion_timestamp = Some(Time(t0()));
    assert_eq!(adaptive::pending(&deleting, 10, late), Pending::No);
}

#[test]
fn defaults_are_upstreams() {
    let s = UnitedDeploymentScheduleStrategy {
        type_: UD_SCHEDULE_ADAPTIVE.into(),
        adaptive: None,
    };
    assert_eq!(s.reschedule_critical_seconds(), 30);
    assert_eq!(s.unschedulable_duration_seconds(), 300);
    assert!(!s.should_reserve_unschedulable_pods());
}

#[test]
fn a_subset_is_marked_then_held_then_recovers() {
    let s = strategy(10, 60);
    let stuck = pod("Pending", None, true);
    let pods = [&stuck];

    // Before the deadline: nothing marked, look again when it passes.
    let a = adaptive::assess(&s, &[], 1, 0, &pods, at(4));
    assert!(!a.unschedulable);
    assert_eq!(schedulable(&a), None);
    assert_eq!(a.requeue, Some(Duration::from_secs(6)));

    // Past it: marked False (reschedule), held for the unschedulable duration.
    let a = adaptive::assess(&s, &[], 1, 0, &pods, at(11));
    assert!(a.unschedulable);
    assert_eq!(a.pending_pods, 1);
    assert_eq!(
        schedulable(&a),
        Some(("False", UD_SUBSET_REASON_RESCHEDULE, at(11)))
    );
    assert_eq!(a.requeue, Some(Duration::from_secs(60)));

    // The Pod gone (the subset scaled down): still held until the mark is 60 s old.
    let marked = a.conditions.clone();
    let a = adaptive::assess(&s, &marked, 0, 0, &[], at(41));
    assert!(a.unschedulable);
    assert_eq!(a.conditions, marked);
    assert_eq!(a.requeue, Some(Duration::from_secs(30)));

    // Then it recovers, with a new transition time.
    let a = adaptive::assess(&s, &marked, 0, 0, &[], at(71));
    assert!(!a.unschedulable);
    assert_eq!(
        schedulable(&a),
        Some(("True", UD_SUBSET_REASON_RECOVER, at(71)))
    );
    assert_eq!(a.requeue, None);
}

#[test]
fn a_recovered_subset_with_timed_out_pods_is_marked_again_at_once() {
    let s = strategy(10, 60);
    let stuck = pod("Pending", None, true);
    let marked = vec![UnitedDeploymentSubsetCondition {
        type_: UD_SUBSET_CONDITION_SCHEDULABLE.into(),
        status: "False".into(),
        last_transition_time: Some(Time(at(11))),
        reason: UD_SUBSET_REASON_RESCHEDULE.into(),
        message: "timeout pending pods found".into(),
    }];
    let a = adaptive::assess(&s, &marked, 1, 0, &[&stuck], at(80));
    assert!(a.unschedulable);
    assert_eq!(
        schedulable(&a),
        Some(("False", UD_SUBSET_REASON_RESCHEDULE, at(80)))
    );
}

#[test]
fn a_still_marked_subset_keeps_its_transition_time() {
    let s = strategy(10, 60);
    let stuck = pod("Pending", None, true);
    let marked = vec![UnitedDeploymentSubsetCondition {
        type_: UD_SUBSET_CONDITION_SCHEDULABLE.into(),
        status: "False".into(),
        last_transition_time: Some(Time(at(11))),
        reason: UD_SUBSET_REASON_RESCHEDULE.into(),
        message: "timeout pending pods found".into(),
    }];
    let a = adaptive::assess(&s, &marked, 1, 0, &[&stuck], at(30));
    assert!(a.unschedulable);
    assert_eq!(a.conditions, marked);
    // The recovery (41 s later) is nearer than a new hold (60 s).
    assert_eq!(a.requeue, Some(Duration::from_secs(41)));
}

#[test]
fn all_ready_subsets_are_not_judged_by_their_pods() {
    let s = strategy(10, 60);
    let stuck = pod("Pending", None, true);
    let a = adaptive::assess(&s, &[], 2, 2, &[&stuck], at(100));
    assert!(!a.unschedulable);
    assert_eq!(a.conditions, vec![]);
}

fn io(v: i32) -> Option<IntOrString> {
    (v >= 0).then_some(IntOrString::Int(v))
}

/// `subset-i` with `min[i]`/`max[i]` (-1 unset); existing ones with `pods[i]` Pods of which
/// `pending[i]` pending (-1: none pending, but still marked unschedulable).
fn alloc(total: i32, min: &[i32], max: &[i32], pods: &[i32], pending: &[i32]) -> Vec<i32> {
    let mut spec = UnitedDeploymentSpec {
        replicas: Some(total),
        ..Default::default()
    };
    spec.topology.schedule_strategy = strategy(10, 60);
    let mut existing = BTreeMap::new();
    for i in 0..pods.len() {
        let name = format!("subset-{i}");
        spec.topology.subsets.push(Subset {
            name: name.clone(),
            min_replicas: io(min[i]),
            max_replicas: io(max[i]),
            ..Default::default()
        });
        existing.insert(
            name,
            Existing {
                ready_replicas: pods[i] - pending[i].max(0),
                unschedulable: pending[i] != 0,
            },
        );
    }
    let got = adaptive::allocate(&spec, &existing).expect("allocates");
    (0..pods.len())
        .map(|i| got.get(&format!("subset-{i}")).copied().unwrap_or(-9))
        .collect()
}

/// `(total, min, max, pods, pending, want)`.
type Case<'a> = (i32, &'a [i32], &'a [i32], &'a [i32], &'a [i32], &'a [i32]);

#[test]
fn unschedulable_subsets_keep_their_ready_pods_and_shed_the_rest() {
    // (total, min, max, pods, pending) -> split, as upstream's table.
    let cases: &[Case] = &[
        (10, &[3, -1], &[5, -1], &[5, 5], &[5, 0], &[3, 7]),
        (10, &[3, -1], &[5, -1], &[5, 5], &[4, 0], &[3, 7]),
        (10, &[3, -1], &[5, -1], &[5, 5], &[2, 0], &[3, 7]),
        (10, &[3, -1], &[5, -1], &[5, 5], &[0, 0], &[5, 5]),
        (4, &[1, -1], &[2, -1], &[1, 1], &[0, 0], &[2, 2]),
        (3, &[1, -1], &[2, -1], &[2, 2], &[0, 0], &[2, 1]),
        (1, &[1, -1], &[2, -1], &[2, 1], &[0, 0], &[1, 0]),
        (3, &[1, -1], &[2, -1], &[1, 3], &[1, 0], &[1, 2]),
        (3, &[0, -1], &[2, -1], &[1, 3], &[1, 0], &[0, 3]),
        (
            4,
            &[0, 0, 0, 0],
            &[2, -1, -1, -1],
            &[0, 0, 0, 0],
            &[0, 0, 0, 0],
            &[2, 2, 0, 0],
        ),
        (
            4,
            &[0, 0, 0, 0],
            &[2, -1, -1, -1],
            &[2, 2, 0, 0],
            &[0, 2, 0, 0],
            &[2, 0, 2, 0],
        ),
        (
            4,
            &[0, 0, 0, 0],
            &[2, -1, -1, -1],
            &[2, 0, 2, 0],
            &[0, -1, 2, 0],
            &[2, 0, 0, 2],
        ),
        (
            8,
            &[0, 0, 0, 0],
            &[2, -1, -1, -1],
            &[2, 0, 0, 2],
            &[0, -1, -1, 0],
            &[2, 0, 0, 6],
        ),
        (
            8,
            &[0, 0, 0, 0],
            &[2, -1, -1, -1],
            &[2, 0, 0, 2],
            &[0, 0, 0, 0],
            &[2, 4, 0, 2],
        ),
        (
            4,
            &[0, 0, 0, 0],
            &[-1, -1, -1, -1],
            &[2, 0, 0, 6],
            &[0, 0, 0, 0],
            &[2, 0, 0, 2],
        ),
    ];
    for (i, (total, min, max, pods, pending, want)) in cases.iter().enumerate() {
        assert_eq!(
            alloc(*total, min, max, pods, pending),
            want.to_vec(),
            "case {i}"
        );
    }
}

#[test]
fn subsets_without_a_workload_are_schedulable_with_none_ready() {
    let mut spec = UnitedDeploymentSpec {
        replicas: Some(3),
        ..Default::default()
    };
    spec.topology.schedule_strategy = strategy(10, 60);
    for (n, max) in [("a", Some(2)), ("b", None)] {
        spec.topology.subsets.push(Subset {
            name: n.into(),
            max_replicas: max.map(IntOrString::Int),
            ..Default::default()
        });
    }
    let got = adaptive::allocate(&spec, &BTreeMap::new()).expect("allocates");
    assert_eq!(got, BTreeMap::from([("a".into(), 2), ("b".into(), 1)]));
}

#[test]
fn bounds_below_minimum_are_still_refused() {
    let mut spec = UnitedDeploymentSpec {
        replicas: Some(3),
        ..Default::default()
    };
    spec.topology.subsets.push(Subset {
        name: "a".into(),
        min_replicas: Some(IntOrString::Int(3)),
        max_replicas: Some(IntOrString::Int(1)),
        ..Default::default()
    });
    assert!(adaptive::allocate(&spec, &BTreeMap::new()).is_err());
}

#[test]
fn the_status_takes_the_subsets_conditions_from_the_strategy() {
    use kruise_api::apps::v1alpha1::{
        UnitedDeployment, UnitedDeploymentStatus, UnitedDeploymentSubsetStatus,
    };

    use super::revisions::Revisions;
    use super::status::{Outcome, next_status};

    let mut spec = UnitedDeploymentSpec::default();
    for n in ["a", "b"] {
        spec.topology.subsets.push(Subset {
            name: n.into(),
            ..Default::default()
        });
    }
    let mut ud = UnitedDeployment::new("web", spec);
    let old = UnitedDeploymentSubsetCondition {
        type_: UD_SUBSET_CONDITION_SCHEDULABLE.into(),
        status: "True".into(),
        reason: UD_SUBSET_REASON_RECOVER.into(),
        ..Default::default()
    };
    ud.status = Some(UnitedDeploymentStatus {
        subset_statuses: ["a", "b"]
            .map(|n| UnitedDeploymentSubsetStatus {
                name: n.into(),
                conditions: vec![old.clone()],
                ..Default::default()
            })
            .to_vec(),
        ..Default::default()
    });
    let mut marked = Vec::new();
    adaptive::set_condition(
        &mut marked,
        "False",
        UD_SUBSET_REASON_RESCHEDULE,
        "timeout pending pods found".into(),
        at(3),
    );
    let outcome = Outcome {
        subset_conditions: BTreeMap::from([("a".to_owned(), marked.clone())]),
        ..Default::default()
    };
    let revs = Revisions {
        current: "r".into(),
        update: "r".into(),
        collision_count: 0,
    };
    let empty = BTreeMap::new();
    let st = next_status(
        &ud,
        &revs,
        &BTreeMap::new(),
        &empty,
        &empty,
        &outcome,
        &Time(t0()),
    );
    // `a` as the strategy left it; `b` (not judged) keeps what it had.
    assert_eq!(st.subset_statuses[0].conditions, marked);
    assert_eq!(st.subset_statuses[1].conditions, vec![old]);
}
