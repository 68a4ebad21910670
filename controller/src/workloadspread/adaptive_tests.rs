use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Pod, PodCondition, PodSpec, PodStatus, Taint};
use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Toleration};
use k8s_openapi::api::core::v1::{PodSpec as Spec, PreferredSchedulingTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    AdaptiveWorkloadSpreadStrategy, MatchedWorkloadSpread, SUBSET_SCHEDULABLE, WorkloadSpread,
    WorkloadSpreadScheduleStrategy, WorkloadSpreadSpec, WorkloadSpreadSubset,
    WorkloadSpreadSubsetCondition, WorkloadSpreadSubsetStatus,
};
use kruise_api::keys;

use super::adaptive::{critical_seconds, pending_timeout, reschedule};
use super::existing::{adopt_patch, favourite, score};
use super::plan::subset_statuses;

fn t0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).expect("ts")
}

fn at(secs: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs)
}

fn ws(kind: &str, secs: Option<i32>, subsets: &[&str]) -> WorkloadSpread {
    WorkloadSpread::new(
        "ws",
        WorkloadSpreadSpec {
            subsets: subsets
                .iter()
                .map(|n| WorkloadSpreadSubset {
                    name: (*n).into(),
                    ..Default::default()
                })
                .collect(),
            schedule_strategy: WorkloadSpreadScheduleStrategy {
                type_: kind.into(),
                adaptive: secs.map(|s| AdaptiveWorkloadSpreadStrategy {
                    reschedule_critical_seconds: Some(s),
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
    )
}

/// A Pod created at `t0 + created`, Pending and unschedulable unless `node` is set.
fn pending(name: &str, created: i64, node: Option<&str>) -> Pod {
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            creation_timestamp: Some(Time(at(created))),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: node.map(Into::into),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            conditions: Some(vec![PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some("Unschedulable".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn cond(status: &str, since: i64) -> WorkloadSpreadSubsetCondition {
    WorkloadSpreadSubsetCondition {
        type_: SUBSET_SCHEDULABLE.into(),
        status: status.into(),
        last_transition_time: Some(Time(at(since))),
        ..Default::default()
    }
}

fn old(name: &str, c: WorkloadSpreadSubsetCondition) -> WorkloadSpreadSubsetStatus {
    WorkloadSpreadSubsetStatus {
        name: name.into(),
        conditions: vec![c],
        ..Default::default()
    }
}

#[test]
fn only_adaptive_with_positive_seconds_reschedules() {
    assert_eq!(critical_seconds(&ws("Fixed", Some(5), &["a"])), None);
    assert_eq!(critical_seconds(&ws("Adaptive", None, &["a"])), None);
    assert_eq!(critical_seconds(&ws("Adaptive", Some(0), &["a"])), None);
    assert_eq!(
        critical_seconds(&ws("Adaptive", Some(5), &["a"])),
        Some(Duration::from_secs(5))
    );
}

#[test]
fn a_pod_times_out_once_unschedulable_past_the_critical_seconds_from_its_creation() {
    let timeout = Duration::from_secs(5);
    let p = pending("p", 0, None);
    assert_eq!(pending_timeout(&p, timeout, at(6)), (true, None));
    assert_eq!(
        pending_timeout(&p, timeout, at(2)),
        (false, Some(Duration::from_secs(3)))
    );
    // Bound, running, scheduled-but-waiting or terminating Pods never time out.
    assert_eq!(
        pending_timeout(&pending("b", 0, Some("n1")), timeout, at(60)),
        (false, None)
    );
    let mut running = pending("r", 0, None);
    running.status.as_mut().expect("status").phase = Some("Running".into());
    assert_eq!(pending_timeout(&running, timeout, at(60)), (false, None));
    let mut other = pending("o", 0, None);
    other.status.as_mut().expect("status").conditions = Some(vec![PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some("SchedulingGated".into()),
        ..Default::default()
    }]);
    assert_eq!(pending_timeout(&other, timeout, at(60)), (false, None));
    let mut going = pending("g", 0, None);
    going.metadata.deletion_timestamp = Some(Time(at(1)));
    assert_eq!(pending_timeout(&going, timeout, at(60)), (false, None));
}

#[test]
fn a_timed_out_pod_closes_its_subset_and_is_deleted_but_the_last_subset_stays_open() {
    let w = ws("Adaptive", Some(5), &["a", "b"]);
    let stuck = pending("stuck", 0, None);
    let fresh = pending("fresh", 8, None);
    let mut st = WorkloadSpreadSubsetStatus::default();
    let r = reschedule(&w, 0, &mut st, None, &[&stuck, &fresh], at(10));
    assert_eq!(r.failed.len(), 1);
    assert_eq!(r.failed[0].metadata.name.as_deref(), Some("stuck"));
    assert_eq!(
        r.requeue,
        Some(Duration::from_secs(3)),
        "fresh times out at 13"
    );
    assert_eq!(st.conditions, vec![cond("False", 10)]);
    assert!(st.unschedulable());

    // The last subset takes what the others cannot: never closed, even with stuck Pods.
    let mut last = WorkloadSpreadSubsetStatus::default();
    let r = reschedule(
        &w,
        1,
        &mut last,
        Some(&old("b", cond("False", 0))),
        &[&stuck],
        at(10),
    );
    assert!(r.failed.is_empty());
    assert_eq!(last.conditions, vec![cond("True", 10)]);
}

#[test]
fn a_closed_subset_keeps_its_transition_time_and_reopens_after_five_minutes() {
    let w = ws("Adaptive", Some(5), &["a", "b"]);
    let before = old("a", cond("False", 100));
    // No stuck Pod now: still closed within the five minutes, looked at again when they end.
    let mut st = WorkloadSpreadSubsetStatus::default();
    let r = reschedule(&w, 0, &mut st, Some(&before), &[], at(200));
    assert_eq!(st.conditions, vec![cond("False", 100)]);
    assert_eq!(r.requeue, Some(Duration::from_secs(200)));
    assert!(!r.recovered);
    // Another stuck Pod does not move the transition time (the five minutes run from the close).
    let stuck = pending("stuck", 0, None);
    let mut st = WorkloadSpreadSubsetStatus::default();
    let r = reschedule(&w, 0, &mut st, Some(&before), &[&stuck], at(200));
    assert_eq!(r.failed.len(), 1);
    assert_eq!(st.conditions, vec![cond("False", 100)]);
    // Past them: open again, recorded as recovered.
    let mut st = WorkloadSpreadSubsetStatus::default();
    let r = reschedule(&w, 0, &mut st, Some(&before), &[], at(401));
    assert_eq!(st.conditions, vec![cond("True", 401)]);
    assert!(r.recovered);
    // An open subset stays as it was.
    let mut st = WorkloadSpreadSubsetStatus::default();
    reschedule(
        &w,
        0,
        &mut st,
        Some(&old("a", cond("True", 5))),
        &[],
        at(900),
    );
    assert_eq!(st.conditions, vec![cond("True", 5)]);
}

#[test]
fn fixed_drops_the_condition_and_deletes_nothing() {
    let w = ws("Fixed", None, &["a", "b"]);
    let stuck = pending("stuck", 0, None);
    let groups = vec![vec![&stuck], vec![]];
    let prev = vec![old("a", cond("False", 0)), old("b", cond("True", 0))];
    let out = subset_statuses(&w, &prev, &groups, 2, at(600));
    assert!(out.unschedulable.is_empty());
    assert!(out.statuses.iter().all(|s| s.conditions.is_empty()));

    let w = ws("Adaptive", Some(5), &["a", "b"]);
    let out = subset_statuses(&w, &prev, &groups, 2, at(60));
    assert_eq!(out.unschedulable.len(), 1);
    assert_eq!(out.unschedulable[0].0, "a");
    assert_eq!(out.statuses[0].conditions, vec![cond("False", 0)]);
    assert_eq!(out.statuses[1].conditions, vec![cond("True", 0)]);
}

fn node(name: &str, zone: &str, taint: Option<&str>) -> Node {
    Node {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            labels: Some([("zone".to_owned(), zone.to_owned())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: taint.map(|k| {
                vec![Taint {
                    key: k.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn zone_term(zone: &str) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: "zone".into(),
            operator: "In".into(),
            values: Some(vec![zone.into()]),
        }]),
        ..Default::default()
    }
}

fn zoned(name: &str, zone: &str, max: Option<i32>) -> WorkloadSpreadSubset {
    WorkloadSpreadSubset {
        name: name.into(),
        required_node_selector_term: Some(zone_term(zone)),
        max_replicas: max.map(IntOrString::Int),
        ..Default::default()
    }
}

fn running_on(name: &str) -> Pod {
    Pod {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("p".into()),
            labels: Some([("app".to_owned(), "web".to_owned())].into()),
            ..Default::default()
        },
        spec: Some(Spec {
            node_name: Some(name.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_pod_from_before_is_adopted_by_the_subset_its_node_is_in() {
    let mut w = ws("Fixed", None, &[]);
    w.spec.subsets = vec![zoned("a", "zone-a", Some(2)), zoned("b", "zone-b", None)];
    let missing = [("a".to_owned(), 2), ("b".to_owned(), i32::MAX)].into();
    let pod = running_on("n-b");
    assert_eq!(
        favourite(&w, &pod, &node("n-b", "zone-b", None), &missing),
        Some(1)
    );
    assert_eq!(
        favourite(&w, &pod, &node("n-a", "zone-a", None), &missing),
        Some(0)
    );
    assert_eq!(
        favourite(&w, &pod, &node("n-c", "zone-c", None), &missing),
        None
    );
    // A taint neither the Pod nor the subset tolerates rules the subset out.
    assert_eq!(
        favourite(&w, &pod, &node("n-a", "zone-a", Some("gpu")), &missing),
        None
    );
    w.spec.subsets[0].tolerations = vec![Toleration {
        key: Some("gpu".into()),
        operator: Some("Exists".into()),
        ..Default::default()
    }];
    assert_eq!(
        favourite(&w, &pod, &node("n-a", "zone-a", Some("gpu")), &missing),
        Some(0)
    );
}

#[test]
fn the_score_prefers_preferred_terms_then_a_patch_already_on_the_pod_then_room() {
    let n = node("n", "zone-a", None);
    let pod = running_on("n");
    let mut s = WorkloadSpreadSubset {
        name: "s".into(),
        ..Default::default()
    };
    assert_eq!(score(&pod, &n, &s, 0), Some(0));
    assert_eq!(score(&pod, &n, &s, 1), Some(1));
    s.patch = Some(serde_json::json!({"metadata": {"labels": {"app": "web"},
        "annotations": {"ignored": "x"}}}));
    assert_eq!(score(&pod, &n, &s, 1), Some(11));
    s.patch = Some(serde_json::json!({"metadata": {"labels": {"app": "db"}}}));
    assert_eq!(score(&pod, &n, &s, 1), Some(1));
    s.preferred_node_selector_terms = vec![PreferredSchedulingTerm {
        weight: 7,
        preference: zone_term("zone-a"),
    }];
    assert_eq!(score(&pod, &n, &s, 0), Some(700));
}

#[test]
fn the_adoption_patch_carries_the_subset_metadata_unless_opted_out() {
    let mut w = ws("Fixed", None, &[]);
    let mut a = zoned("a", "zone-a", None);
    a.patch = Some(serde_json::json!({"metadata": {"labels": {"subset": "a"}},
        "spec": {"priorityClassName": "x"}}));
    w.spec.subsets = vec![a.clone()];
    let matched = MatchedWorkloadSpread {
        name: "ws".into(),
        subset: "a".into(),
        uid: String::new(),
    }
    .to_annotation();
    assert_eq!(
        adopt_patch(&w, &a),
        serde_json::json!({"metadata": {"labels": {"subset": "a"},
            "annotations": {keys::MATCHED_WORKLOADSPREAD_ANNOTATION: matched}}})
    );
    w.metadata.annotations = Some(
        [(
            keys::WS_IGNORE_PATCH_EXISTING_PODS_ANNOTATION.to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    assert_eq!(
        adopt_patch(&w, &a),
        serde_json::json!({"metadata": {
            "annotations": {keys::MATCHED_WORKLOADSPREAD_ANNOTATION: matched}}})
    );
}
