use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    MatchedWorkloadSpread, WorkloadSpread, WorkloadSpreadSpec, WorkloadSpreadSubset,
    WorkloadSpreadSubsetStatus,
};
use kruise_api::keys::{self, k8s};

use super::plan::{by_version, deletion_costs, group, is_empty, subset_status, subset_statuses};

fn subset(name: &str, max: Option<i32>) -> WorkloadSpreadSubset {
    WorkloadSpreadSubset {
        name: name.into(),
        max_replicas: max.map(IntOrString::Int),
        ..Default::default()
    }
}

fn ws(subsets: Vec<WorkloadSpreadSubset>) -> WorkloadSpread {
    WorkloadSpread::new(
        "ws",
        WorkloadSpreadSpec {
            subsets,
            ..Default::default()
        },
    )
}

fn pod(name: &str, subset: &str, created_secs: i64) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.creation_timestamp = Some(Time(
        Timestamp::from_second(1_700_000_000 + created_secs).expect("ts"),
    ));
    p.metadata.annotations = Some(
        [(
            keys::MATCHED_WORKLOADSPREAD_ANNOTATION.to_owned(),
            MatchedWorkloadSpread {
                name: "ws".into(),
                subset: subset.into(),
                uid: String::new(),
            }
            .to_annotation(),
        )]
        .into(),
    );
    Arc::new(p)
}

#[test]
fn status_counts_pods_and_keeps_fresh_reservations_only() {
    let now = Timestamp::now();
    let w = ws(vec![subset("a", Some(3)), subset("b", None)]);
    let pods = vec![pod("p0", "a", 0), pod("p1", "b", 1), pod("other", "zzz", 2)];
    let groups = group(&w, &pods);
    assert_eq!(groups[0].len(), 1);
    assert_eq!(groups[1].len(), 1);
    let old = WorkloadSpreadSubsetStatus {
        name: "a".into(),
        creating_pods: [
            ("p0".to_owned(), Time(now)),
            ("fresh".to_owned(), Time(now)),
            (
                "stale".to_owned(),
                Time(now - SignedDuration::from_secs(keys::WS_CREATE_POD_TIMEOUT_SECS + 1)),
            ),
        ]
        .into(),
        ..Default::default()
    };
    let (st, requeue) = subset_status(&w.spec.subsets[0], Some(&old), &groups[0], 4, now);
    assert_eq!(st.replicas, 1);
    // 3 - 1 Pod - 1 fresh reservation.
    assert_eq!(st.missing_replicas, 1);
    assert_eq!(st.creating_pods.keys().collect::<Vec<_>>(), ["fresh"]);
    assert!(requeue.is_some());
    let (b, _) = subset_status(&w.spec.subsets[1], None, &groups[1], 4, now);
    assert_eq!((b.replicas, b.missing_replicas), (1, -1));
}

#[test]
fn a_deleting_pod_frees_its_place_until_it_times_out() {
    let now = Timestamp::now();
    let w = ws(vec![subset("a", Some(1))]);
    let pods = vec![pod("p0", "a", 0)];
    let groups = group(&w, &pods);
    let old = WorkloadSpreadSubsetStatus {
        name: "a".into(),
        deleting_pods: [("p0".to_owned(), Time(now))].into(),
        ..Default::default()
    };
    let (st, _) = subset_status(&w.spec.subsets[0], Some(&old), &groups[0], 1, now);
    assert_eq!((st.replicas, st.missing_replicas), (1, 1));
    let late = now + SignedDuration::from_secs(keys::WS_DELETE_POD_TIMEOUT_SECS + 1);
    let (st, _) = subset_status(&w.spec.subsets[0], Some(&old), &groups[0], 1, late);
    assert_eq!(st.missing_replicas, 0);
    assert!(st.deleting_pods.is_empty());
}

#[test]
fn later_subsets_and_over_cap_pods_cost_least() {
    let w = ws(vec![subset("a", Some(2)), subset("b", None)]);
    let pods = vec![
        pod("a0", "a", 0),
        pod("a1", "a", 1),
        pod("a2", "a", 2),
        pod("b0", "b", 3),
    ];
    let groups = group(&w, &pods);
    let costs: std::collections::BTreeMap<String, String> =
        deletion_costs(&w, &groups, 4, false).into_iter().collect();
    // The newest over-cap Pod of "a" goes first, then "b", then the rest of "a".
    assert_eq!(costs["a2"], "-100");
    assert_eq!(costs["a0"], "200");
    assert_eq!(costs["a1"], "200");
    assert_eq!(costs["b0"], "100");
    // Already right: nothing to write.
    let mut p = (*pods[3]).clone();
    p.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(k8s::POD_DELETION_COST_ANNOTATION.into(), "100".into());
    let pods2 = vec![Arc::new(p)];
    let groups2 = group(&w, &pods2);
    assert!(deletion_costs(&w, &groups2, 4, false).is_empty());
}

#[test]
fn an_old_revision_gives_up_its_first_subset_first() {
    let w = ws(vec![subset("a", Some(2)), subset("b", None)]);
    let pods = vec![pod("a0", "a", 0), pod("b0", "b", 1)];
    let groups = group(&w, &pods);
    let costs: std::collections::BTreeMap<String, String> =
        deletion_costs(&w, &groups, 4, true).into_iter().collect();
    assert_eq!(costs["a0"], "100");
    assert_eq!(costs["b0"], "200");
}

#[test]
fn pods_are_counted_per_revision_and_empty_revisions_dropped() {
    let now = Timestamp::now();
    let w = ws(vec![subset("a", Some(1)), subset("b", None)]);
    let in_rs = |name: &str, subset: &str, hash: &str| {
        let mut p = (*pod(name, subset, 0)).clone();
        p.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: "ReplicaSet".into(),
                name: format!("web-{hash}"),
                controller: Some(true),
                ..Default::default()
            },
        ]);
        p.metadata.labels =
            Some([(keys::POD_TEMPLATE_HASH_LABEL.to_owned(), hash.to_owned())].into());
        Arc::new(p)
    };
    let pods = vec![
        in_rs("o1", "a", "old"),
        in_rs("o2", "b", "old"),
        in_rs("n1", "a", "new"),
    ];
    let versions = by_version(&pods);
    assert_eq!(versions.keys().collect::<Vec<_>>(), ["new", "old"]);
    let new = subset_statuses(&w, &[], &group(&w, &versions["new"]), 3, now).statuses;
    assert_eq!((new[0].replicas, new[0].missing_replicas), (1, 0));
    assert_eq!((new[1].replicas, new[1].missing_replicas), (0, -1));
    let all = subset_statuses(&w, &[], &group(&w, &pods), 3, now).statuses;
    assert_eq!(all[0].replicas, 2);
    let gone = subset_statuses(&w, &new, &group(&w, &[]), 3, now).statuses;
    assert!(is_empty(&gone));
    assert!(!is_empty(&new));
}
