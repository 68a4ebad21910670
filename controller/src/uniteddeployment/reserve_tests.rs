//! Tests of the reservation strategy's pure parts: the reserved verdict of a Pod over time,
//! a subset's assessment and relabels, the allocation with temporary Pods (upstream's
//! `TestReservedAdaptiveAllocation` shapes), the recovered-and-growing mark, the status.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    AdaptiveUnitedDeploymentStrategy, Subset, SubsetKind, UD_RESERVED_POD_LABEL,
    UD_SCHEDULE_ADAPTIVE, UD_SUBSET_CONDITION_SCHEDULABLE, UnitedDeployment,
    UnitedDeploymentScheduleStrategy, UnitedDeploymentSpec, UnitedDeploymentSubsetCondition,
};
use kruise_api::keys;

use super::child;
use super::plan::Observed;
use super::reserve::{self, Clock, Existing};
use super::revisions::Revisions;
use super::status::{Outcome, next_status};

const REV: &str = "web-v2";

fn t0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).expect("timestamp")
}

fn at(secs: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs)
}

fn clock(now: i64) -> Clock {
    Clock {
        now: at(now),
        pending_timeout: 10,
        min_ready: 5,
        updated_since: t0(),
    }
}

/// A Pod created at `t0` at `rev`, `reserved` label as given; `ready_at` makes it Running and
/// ready since then; otherwise Pending and refused by the scheduler.
fn pod(name: &str, rev: &str, reserved: Option<bool>, ready_at: Option<i64>) -> Pod {
    let mut labels = BTreeMap::from([(
        keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL.to_owned(),
        rev.to_owned(),
    )]);
    if let Some(r) = reserved {
        labels.insert(UD_RESERVED_POD_LABEL.to_owned(), r.to_string());
    }
    let (phase, cond) = match ready_at {
        Some(t) => (
            "Running",
            PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(at(t))),
                ..Default::default()
            },
        ),
        None => (
            "Pending",
            PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..Default::default()
            },
        ),
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels),
            creation_timestamp: Some(Time(t0())),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: ready_at.map(|_| "n1".to_owned()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            conditions: Some(vec![cond]),
            ..Default::default()
        }),
    }
}

#[test]
fn a_pending_pod_is_reserved_after_the_timeout() {
    let p = pod("p", REV, None, None);
    let v = reserve::verdict(&p, REV, &clock(4));
    assert!(!v.reserved);
    assert_eq!(v.check_after, Some(Duration::from_secs(6)));
    let v = reserve::verdict(&p, REV, &clock(11));
    assert!(v.reserved && !v.update_timeout);
    assert_eq!(v.check_after, Some(Duration::from_secs(5)));
}

#[test]
fn a_reserved_pod_leaves_after_being_ready_long_enough() {
    // Still pending: stays reserved, looked at again after min-ready.
    let p = pod("p", REV, Some(true), None);
    let v = reserve::verdict(&p, REV, &clock(50));
    assert!(v.reserved);
    assert_eq!(v.check_after, Some(Duration::from_secs(5)));
    // Ready since 48: reserved until 53.
    let p = pod("p", REV, Some(true), Some(48));
    let v = reserve::verdict(&p, REV, &clock(50));
    assert!(v.reserved);
    assert_eq!(v.check_after, Some(Duration::from_secs(3)));
    let v = reserve::verdict(&p, REV, &clock(54));
    assert!(!v.reserved);
    assert_eq!(v.check_after, None);
    // Ready at an old revision: stays reserved.
    let p = pod("p", "web-v1", Some(true), Some(0));
    assert!(reserve::verdict(&p, REV, &clock(54)).reserved);
}

#[test]
fn old_revision_pods_are_reserved_when_the_update_lasts_too_long() {
    let p = pod("p", "web-v1", None, Some(0));
    let v = reserve::verdict(&p, REV, &clock(8));
    assert!(!v.reserved);
    assert_eq!(v.check_after, Some(Duration::from_secs(2)));
    let v = reserve::verdict(&p, REV, &clock(11));
    assert!(v.reserved && v.update_timeout);
}

fn schedulable(c: &[UnitedDeploymentSubsetCondition]) -> Option<(&str, &str)> {
    c.iter()
        .find(|c| c.type_ == UD_SUBSET_CONDITION_SCHEDULABLE)
        .map(|c| (c.status.as_str(), c.message.as_str()))
}

#[test]
fn a_subset_with_reserved_pods_is_unschedulable_and_labels_are_written() {
    let stuck = pod("a-1", REV, None, None);
    let fine = pod("a-2", REV, None, Some(1));
    let a = reserve::assess(&[], &[&stuck, &fine], REV, &clock(11));
    assert!(a.unschedulable && !a.marked);
    assert_eq!(a.reserved_pods, 1);
    assert_eq!(
        a.relabel,
        vec![("a-1".to_owned(), true), ("a-2".to_owned(), false)]
    );
    assert_eq!(
        schedulable(&a.conditions),
        Some(("False", "reserved pods found"))
    );

    // Marked: an unlabelled (new) Pod is reserved at once, even before any timeout.
    let new = pod("a-3", REV, None, None);
    let a = reserve::assess(&a.conditions, &[&new], REV, &clock(1));
    assert!(a.marked && a.unschedulable);
    assert_eq!(a.relabel, vec![("a-3".to_owned(), true)]);

    // Nothing reserved any more: Schedulable=True, labels unchanged.
    let done = pod("a-1", REV, Some(false), Some(1));
    let b = reserve::assess(&a.conditions, &[&done], REV, &clock(30));
    assert!(!b.unschedulable && b.marked);
    assert!(b.relabel.is_empty());
    assert_eq!(
        schedulable(&b.conditions),
        Some(("True", "no reserved pods"))
    );
}

fn spec(total: i32, min: &[i32]) -> UnitedDeploymentSpec {
    let mut s = UnitedDeploymentSpec {
        replicas: Some(total),
        ..Default::default()
    };
    s.topology.schedule_strategy = UnitedDeploymentScheduleStrategy {
        type_: UD_SCHEDULE_ADAPTIVE.into(),
        adaptive: Some(AdaptiveUnitedDeploymentStrategy {
            reserve_unschedulable_pods: true,
            ..Default::default()
        }),
    };
    for (i, m) in min.iter().enumerate() {
        s.topology.subsets.push(Subset {
            name: format!("s{i}"),
            min_replicas: Some(IntOrString::Int(*m)),
            ..Default::default()
        });
    }
    s
}

fn existing(rows: &[(i32, i32, bool, bool)]) -> BTreeMap<String, Existing> {
    rows.iter()
        .enumerate()
        .map(
            |(i, (spec_replicas, reserved_pods, unschedulable, marked))| {
                let e = Existing {
                    spec_replicas: *spec_replicas,
                    reserved_pods: *reserved_pods,
                    unschedulable: *unschedulable,
                    marked: *marked,
                };
                (format!("s{i}"), e)
            },
        )
        .collect()
}

fn split(got: &BTreeMap<String, i32>) -> Vec<i32> {
    got.values().copied().collect()
}

#[test]
fn reserved_pods_are_kept_and_covered_by_temporary_ones() {
    // Fresh: all to the first subset.
    let got = reserve::allocate(&spec(2, &[0, 0, 0]), &BTreeMap::new()).expect("allocates");
    assert_eq!(split(&got), vec![2, 0, 0]);
    // s0 and s1 reserve 2 each: they keep them, s2 runs 2 temporary ones.
    let ex = existing(&[
        (2, 2, true, true),
        (2, 2, true, false),
        (0, 0, false, false),
    ]);
    let got = reserve::allocate(&spec(2, &[0, 0, 0]), &ex).expect("allocates");
    assert_eq!(split(&got), vec![2, 2, 2]);
    // Scaled up to 4: the reserving subsets do not grow; s2 runs all 4.
    let got = reserve::allocate(&spec(4, &[0, 0, 0]), &ex).expect("allocates");
    assert_eq!(split(&got), vec![2, 2, 4]);
    // s0 recovered (one of two reserved Pods runs): s2 keeps one temporary Pod.
    let ex = existing(&[
        (2, 1, true, true),
        (0, 0, false, false),
        (0, 0, false, false),
    ]);
    let got = reserve::allocate(&spec(2, &[0, 0, 0]), &ex).expect("allocates");
    assert_eq!(split(&got), vec![2, 1, 0]);
    // With minimums: each reserving subset keeps its minimum, the last runs the total.
    let ex = existing(&[(1, 1, true, true), (1, 1, true, true), (0, 0, false, false)]);
    let got = reserve::allocate(&spec(2, &[1, 1, 0]), &ex).expect("allocates");
    assert_eq!(split(&got), vec![1, 1, 2]);
}

#[test]
fn a_recovered_subset_that_grows_is_marked_again() {
    let done = pod("a-1", REV, Some(false), Some(1));
    let marked = vec![UnitedDeploymentSubsetCondition {
        type_: UD_SUBSET_CONDITION_SCHEDULABLE.into(),
        status: "False".into(),
        last_transition_time: Some(Time(t0())),
        reason: "reschedule".into(),
        message: "reserved pods found".into(),
    }];
    let mut a = reserve::assess(&marked, &[&done], REV, &clock(30));
    let e = Existing {
        spec_replicas: 1,
        reserved_pods: 0,
        unschedulable: false,
        marked: true,
    };
    reserve::after_allocation(&mut a, &e, 1, at(30));
    assert_eq!(
        schedulable(&a.conditions),
        Some(("True", "no reserved pods"))
    );
    reserve::after_allocation(&mut a, &e, 3, at(30));
    assert_eq!(
        schedulable(&a.conditions),
        Some(("False", "subset just recovered scaled up"))
    );
    let strategy = spec(1, &[0]).topology.schedule_strategy;
    assert_eq!(reserve::max_unavailable(&strategy, &a, 1, 1), None);
    a.unschedulable = true;
    a.update_timeout_pods = 1;
    assert_eq!(reserve::max_unavailable(&strategy, &a, 3, 1), Some(3));
}

#[test]
fn reserved_pods_are_left_out_of_replicas_and_the_selector() {
    let mut ud = UnitedDeployment::new("web", spec(2, &[0, 0]));
    ud.spec.selector = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_owned(), "web".to_owned())])),
            ..Default::default()
        },
    );
    let obs = |subset: &str, replicas, ready| Observed {
        name: format!("web-{subset}"),
        subset: subset.into(),
        replicas,
        ready_replicas: ready,
        ..Default::default()
    };
    let kept = BTreeMap::from([
        ("s0".to_owned(), obs("s0", 2, 0)),
        ("s1".to_owned(), obs("s1", 2, 2)),
    ]);
    let revs = Revisions {
        current: REV.into(),
        update: REV.into(),
        collision_count: 0,
    };
    let outcome = Outcome {
        reserved_pods: Some(BTreeMap::from([("s0".to_owned(), 2), ("s1".to_owned(), 0)])),
        ..Default::default()
    };
    let next = BTreeMap::from([("s0".to_owned(), 2), ("s1".to_owned(), 2)]);
    let parts = BTreeMap::new();
    let st = next_status(&ud, &revs, &kept, &next, &parts, &outcome, &Time(t0()));
    assert_eq!(
        (st.replicas, st.ready_replicas, st.reserved_pods),
        (2, 2, 2)
    );
    assert_eq!(st.subset_statuses[0].reserved_pods, 2);
    assert_eq!(
        st.label_selector,
        format!("app=web,{UD_RESERVED_POD_LABEL}=false")
    );
}

#[test]
fn max_unavailable_goes_where_each_kind_keeps_it() {
    // A v1alpha1 CloneSet: flat under updateStrategy.
    let mut cs = serde_json::json!({"spec": {"updateStrategy": {"partition": 0}}});
    child::set_max_unavailable(SubsetKind::CloneSet, &mut cs, 2);
    assert_eq!(
        cs["spec"]["updateStrategy"],
        serde_json::json!({"partition": 0, "maxUnavailable": 2})
    );
    let mut d = serde_json::json!({"spec": {}});
    child::set_max_unavailable(SubsetKind::Deployment, &mut d, 3);
    assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 3);
    let mut s = serde_json::json!({"spec": {}});
    child::set_max_unavailable(SubsetKind::StatefulSet, &mut s, 3);
    assert_eq!(s, serde_json::json!({"spec": {}}));
}
