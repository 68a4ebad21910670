use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    WorkloadSpread, WorkloadSpreadSpec, WorkloadSpreadStatus, WorkloadSpreadSubset,
    WorkloadSpreadSubsetStatus,
};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::TargetReference;
use serde_json::json;

use super::subset::{
    Created, by_ordinal, inject, merge, needs_replicas, record_delete, reserve_create,
};
use super::validation::{conflict_errors, spec_errors, spec_errors_with, update_errors};
use crate::field::aggregate;

fn term() -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: "zone".into(),
            operator: "In".into(),
            values: Some(vec!["a".into()]),
        }]),
        match_fields: None,
    }
}

fn subset(name: &str, max: Option<IntOrString>) -> WorkloadSpreadSubset {
    WorkloadSpreadSubset {
        name: name.into(),
        required_node_selector_term: Some(term()),
        max_replicas: max,
        ..Default::default()
    }
}

fn ws(kind: &str, api_version: &str, subsets: Vec<WorkloadSpreadSubset>) -> WorkloadSpread {
    let mut w = WorkloadSpread::new(
        "ws",
        WorkloadSpreadSpec {
            target_reference: Some(TargetReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "app".into(),
            }),
            subsets,
            ..Default::default()
        },
    );
    w.metadata.namespace = Some("ns".into());
    w
}

fn cloneset_ws(subsets: Vec<WorkloadSpreadSubset>) -> WorkloadSpread {
    ws("CloneSet", "apps.kruise.io/v1alpha1", subsets)
}

fn msg(w: &WorkloadSpread) -> String {
    aggregate(&spec_errors(w))
}

#[test]
fn a_good_spread_is_accepted() {
    let w = cloneset_ws(vec![
        subset("a", Some(IntOrString::Int(2))),
        subset("b", None),
    ]);
    assert!(spec_errors(&w).is_empty(), "{}", msg(&w));
    for (kind, av) in [
        ("Deployment", "apps/v1"),
        ("ReplicaSet", "apps/v1"),
        ("Job", "batch/v1"),
        ("StatefulSet", "apps/v1"),
        ("StatefulSet", "apps.kruise.io/v1beta1"),
    ] {
        let w = ws(kind, av, vec![subset("a", None)]);
        assert!(spec_errors(&w).is_empty(), "{kind}: {}", msg(&w));
    }
    // A subset without node constraint, toleration or patch, as upstream accepts it.
    let anywhere = WorkloadSpreadSubset {
        name: "rest".into(),
        ..Default::default()
    };
    let w = cloneset_ws(vec![subset("a", Some(IntOrString::Int(2))), anywhere]);
    assert!(spec_errors(&w).is_empty(), "{}", msg(&w));
}

#[test]
fn duplicate_names_are_refused_naming_the_field() {
    let w = cloneset_ws(vec![subset("a", None), subset("a", None)]);
    assert!(
        msg(&w).contains("spec.subsets[1].name: Invalid value: \"a\": duplicated subset name a"),
        "{}",
        msg(&w)
    );
}

#[test]
fn caps_are_all_ints_or_all_percents_summing_to_at_most_100() {
    let mixed = cloneset_ws(vec![
        subset("a", Some(IntOrString::Int(2))),
        subset("b", Some(IntOrString::String("50%".into()))),
    ]);
    assert!(
        msg(&mixed).contains("all integers or all percentages"),
        "{}",
        msg(&mixed)
    );
    let over = cloneset_ws(vec![
        subset("a", Some(IntOrString::String("60%".into()))),
        subset("b", Some(IntOrString::String("50%".into()))),
    ]);
    assert!(
        msg(&over).contains("spec.subsets[1].maxReplicas") && msg(&over).contains("exceeds 100%"),
        "{}",
        msg(&over)
    );
    let ok = cloneset_ws(vec![
        subset("a", Some(IntOrString::String("60%".into()))),
        subset("b", Some(IntOrString::String("40%".into()))),
    ]);
    assert!(spec_errors(&ok).is_empty(), "{}", msg(&ok));
    let sts = ws(
        "StatefulSet",
        "apps/v1",
        vec![subset("a", Some(IntOrString::String("50%".into())))],
    );
    assert!(
        msg(&sts).contains("spec.subsets[0].maxReplicas"),
        "{}",
        msg(&sts)
    );
}

#[test]
fn unsupported_targets_and_unimplemented_fields_are_refused() {
    let w = ws("DaemonSet", "apps/v1", vec![subset("a", None)]);
    assert!(msg(&w).contains("spec.targetRef") && msg(&w).contains("not permitted"));
    let w = ws(
        "Deployment",
        "apps.kruise.io/v1alpha1",
        vec![subset("a", None)],
    );
    assert!(msg(&w).contains("TargetReference is not valid for Deployment."));
    let mut w = cloneset_ws(vec![subset("a", None)]);
    w.spec.schedule_strategy.type_ = "Sometimes".into();
    assert!(
        msg(&w).contains("spec.scheduleStrategy.type: Invalid value"),
        "{}",
        msg(&w)
    );
    // A filter is accepted; one whose selector cannot be built is refused naming it.
    let mut w = cloneset_ws(vec![subset("a", None)]);
    w.spec.target_filter = Some(Default::default());
    assert!(spec_errors(&w).is_empty(), "{}", msg(&w));
    w.spec.target_filter = Some(
        serde_json::from_value(json!({
        "selector": {"matchExpressions": [{"key": "role", "operator": "Is", "values": ["x"]}]},
        "replicasPathList": ["spec.replicas"]}))
        .expect("filter"),
    );
    assert!(
        msg(&w).contains("spec.targetFilter: Invalid value")
            && msg(&w).contains("selector.matchExpressions[0]: operator \"Is\""),
        "{}",
        msg(&w)
    );
    let mut w = cloneset_ws(vec![subset("a", None)]);
    w.spec.schedule_strategy.type_ = "Sometimes".into();
    assert!(msg(&w).contains("spec.scheduleStrategy.type: Invalid value"));
}

#[test]
fn target_is_fixed_and_owned_by_one_spread() {
    let old = cloneset_ws(vec![subset("a", None)]);
    let mut new = old.clone();
    if let Some(r) = new.spec.target_reference.as_mut() {
        r.name = "other".into();
    }
    assert!(aggregate(&update_errors(&new, &old)).contains("change TargetReference"));
    let mut other = old.clone();
    other.metadata.name = Some("ws2".into());
    assert!(
        aggregate(&conflict_errors(&old, &[other]))
            .contains("in conflict with other WorkloadSpread ws2")
    );
}

const IGNORED: &str = keys::WS_VERSION_IGNORED;

/// A status whose statuses for Pods counted without a revision are `entries`.
fn status(entries: &[(&str, i32)]) -> WorkloadSpreadStatus {
    let list = entries
        .iter()
        .map(|(n, m)| WorkloadSpreadSubsetStatus {
            name: (*n).into(),
            missing_replicas: *m,
            ..Default::default()
        })
        .collect();
    WorkloadSpreadStatus {
        versioned_subset_statuses: [(IGNORED.to_owned(), list)].into(),
        ..Default::default()
    }
}

fn versioned<'a>(w: &'a WorkloadSpread, version: &str) -> &'a [WorkloadSpreadSubsetStatus] {
    w.status.as_ref().expect("status").versioned(version)
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

fn chosen(c: Created) -> String {
    match c {
        Created::Reserved(m) => m.subset,
        other => panic!("{other:?}"),
    }
}

#[test]
fn subsets_fill_in_order_up_to_their_caps_counting_reservations() {
    let mut w = cloneset_ws(vec![
        subset("a", Some(IntOrString::Int(2))),
        subset("b", None),
    ]);
    w.status = Some(status(&[("a", 2), ("b", -1)]));
    let names: Vec<String> = (0..4)
        .map(|i| {
            let name = format!("p{i}");
            match reserve_create(&mut w, IGNORED, Some(&name), None, String::new, now()) {
                Ok(Created::Reserved(m) | Created::Recorded(m)) => m.subset,
                other => panic!("{other:?}"),
            }
        })
        .collect();
    assert_eq!(names, ["a", "a", "b", "b"]);
    let st = versioned(&w, IGNORED);
    assert_eq!(st[0].missing_replicas, 0);
    assert_eq!(st[0].creating_pods.len(), 2);
    // An uncapped subset has nothing to reserve, as upstream: no entry is written.
    assert_eq!(st[1].missing_replicas, -1);
    assert!(st[1].creating_pods.is_empty());
    assert!(
        w.status
            .as_ref()
            .expect("status")
            .subset_statuses
            .is_empty()
    );
    // A retried create of a recorded Pod reserves nothing more.
    assert!(matches!(
        reserve_create(&mut w, IGNORED, Some("p0"), None, String::new, now()),
        Ok(Created::Recorded(m)) if m.subset == "a"
    ));
}

#[test]
fn full_subsets_leave_the_pod_without_a_subset() {
    let mut w = cloneset_ws(vec![
        subset("a", Some(IntOrString::Int(1))),
        subset("b", Some(IntOrString::Int(1))),
    ]);
    w.status = Some(status(&[("a", 0), ("b", 0)]));
    assert_eq!(
        reserve_create(&mut w, IGNORED, Some("p"), None, String::new, now()),
        Ok(Created::NoSubset)
    );
}

#[test]
fn a_nameless_pod_is_recorded_under_a_generated_id() {
    let mut w = cloneset_ws(vec![subset("a", Some(IntOrString::Int(3)))]);
    match reserve_create(&mut w, IGNORED, None, None, || "uid-1".into(), now()) {
        Ok(Created::Reserved(m)) => assert_eq!(m.uid, "uid-1"),
        other => panic!("{other:?}"),
    }
    let st = versioned(&w, IGNORED);
    assert!(st[0].creating_pods.contains_key("uid-1"));
    assert_eq!(st[0].missing_replicas, 2);
}

#[test]
fn a_percent_cap_is_scaled_against_the_workloads_replicas() {
    let mut w = cloneset_ws(vec![subset("a", Some(IntOrString::String("50%".into())))]);
    assert!(needs_replicas(&w, IGNORED));
    assert!(reserve_create(&mut w, IGNORED, Some("p"), None, String::new, now()).is_err());
    assert_eq!(
        chosen(
            reserve_create(&mut w, IGNORED, Some("p"), Some(5), String::new, now())
                .expect("reserve")
        ),
        "a"
    );
    // 50 % of 5, rounded up, less the reservation.
    assert_eq!(versioned(&w, IGNORED)[0].missing_replicas, 2);
    assert!(!needs_replicas(&w, IGNORED));
}

#[test]
fn each_revision_fills_the_subsets_on_its_own() {
    let mut w = cloneset_ws(vec![
        subset("a", Some(IntOrString::Int(1))),
        subset("b", None),
    ]);
    let take = |w: &mut WorkloadSpread, version: &str, pod: &str| match reserve_create(
        w,
        version,
        Some(pod),
        None,
        String::new,
        now(),
    ) {
        Ok(Created::Reserved(m) | Created::Recorded(m)) => m.subset,
        other => panic!("{other:?}"),
    };
    assert_eq!(take(&mut w, "old", "o1"), "a");
    assert_eq!(take(&mut w, "old", "o2"), "b");
    // The new revision's first Pod finds `a` free although an old Pod holds it.
    assert_eq!(take(&mut w, "new", "n1"), "a");
    assert_eq!(take(&mut w, "new", "n2"), "b");
    assert_eq!(versioned(&w, "old")[0].missing_replicas, 0);
    assert_eq!(versioned(&w, "new")[0].missing_replicas, 0);
    // A delete gives the place back in the Pod's own revision only (once the controller has
    // seen the Pod: a reservation still pending is not recorded twice, as upstream).
    assert_eq!(
        record_delete(&mut w, "old", "o1", "a", None, now()),
        Ok(false)
    );
    if let Some(st) = w.status.as_mut() {
        for s in st.versioned_subset_statuses.values_mut().flatten() {
            s.creating_pods.clear();
        }
    }
    assert_eq!(
        record_delete(&mut w, "old", "o1", "a", None, now()),
        Ok(true)
    );
    assert_eq!(versioned(&w, "old")[0].missing_replicas, 1);
    assert_eq!(versioned(&w, "new")[0].missing_replicas, 0);
}

#[test]
fn a_delete_gives_the_place_back_once() {
    let mut w = cloneset_ws(vec![subset("a", Some(IntOrString::Int(2)))]);
    w.status = Some(status(&[("a", 0)]));
    assert_eq!(
        record_delete(&mut w, IGNORED, "p0", "a", None, now()),
        Ok(true)
    );
    assert_eq!(
        record_delete(&mut w, IGNORED, "p0", "a", None, now()),
        Ok(false)
    );
    let s = &versioned(&w, IGNORED)[0];
    assert_eq!(s.missing_replicas, 1);
    assert!(s.deleting_pods.contains_key("p0"));
}

#[test]
fn injection_adds_affinity_tolerations_patch_and_annotation() {
    let mut s = subset("a", None);
    s.patch = Some(json!({"metadata": {"labels": {"subset": "a"}},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"cpu": "1"}}}]}}));
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "main", "image": "nginx"}]}
    }))
    .expect("pod");
    let m = kruise_api::apps::v1alpha1::MatchedWorkloadSpread {
        name: "ws".into(),
        subset: "a".into(),
        uid: String::new(),
    };
    inject(&mut pod, &s, &m).expect("inject");
    let v = serde_json::to_value(&pod).expect("json");
    assert_eq!(v["metadata"]["labels"], json!({"app": "x", "subset": "a"}));
    assert_eq!(v["spec"]["containers"][0]["image"], "nginx");
    assert_eq!(
        v["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "1"
    );
    assert_eq!(
        v["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "zone"
    );
    assert_eq!(
        v["metadata"]["annotations"][keys::MATCHED_WORKLOADSPREAD_ANNOTATION],
        r#"{"name":"ws","subset":"a"}"#
    );
}

#[test]
fn merge_removes_with_null_and_replaces_plain_lists() {
    let mut t = json!({"a": 1, "b": [1, 2], "c": {"d": 1}});
    merge(&mut t, &json!({"a": null, "b": [3], "c": {"e": 2}}));
    assert_eq!(t, json!({"b": [3], "c": {"d": 1, "e": 2}}));
}

#[test]
fn adaptive_is_accepted_within_upstreams_bounds() {
    let adaptive = |secs: i32| {
        serde_json::from_value(json!({"type": "Adaptive",
            "adaptive": {"rescheduleCriticalSeconds": secs}}))
        .expect("strategy")
    };
    let mut w = cloneset_ws(vec![
        subset("a", Some(IntOrString::Int(2))),
        subset("b", None),
    ]);
    w.spec.schedule_strategy = adaptive(30);
    assert!(spec_errors(&w).is_empty(), "{}", msg(&w));
    w.spec.schedule_strategy = adaptive(0);
    assert!(spec_errors(&w).is_empty(), "{}", msg(&w));
    // Two subsets: at most (300 - 5) / 1 seconds; three: (300 - 5) / 2.
    w.spec.schedule_strategy = adaptive(296);
    assert!(
        msg(&w).contains(
            "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds: Invalid value: 296"
        ) && msg(&w).contains("> 295 is not permitted"),
        "{}",
        msg(&w)
    );
    w.spec.schedule_strategy = adaptive(-1);
    assert!(msg(&w).contains("rescheduleCriticalSeconds"), "{}", msg(&w));
    let mut three = cloneset_ws(vec![
        subset("a", Some(IntOrString::Int(1))),
        subset("b", Some(IntOrString::Int(1))),
        subset("c", None),
    ]);
    three.spec.schedule_strategy = adaptive(148);
    assert!(
        msg(&three).contains("> 147 is not permitted"),
        "{}",
        msg(&three)
    );
    // The last subset takes what the others cannot place: it may not be capped.
    let mut capped = cloneset_ws(vec![
        subset("a", Some(IntOrString::Int(1))),
        subset("b", Some(IntOrString::Int(1))),
    ]);
    capped.spec.schedule_strategy = adaptive(30);
    assert!(
        msg(&capped).contains("spec.scheduleStrategy.adaptive: Invalid value")
            && msg(&capped).contains("the last subset's maxReplicas must be not specified"),
        "{}",
        msg(&capped)
    );
    // Parameters of Adaptive under another type.
    let mut fixed = cloneset_ws(vec![subset("a", None)]);
    fixed.spec.schedule_strategy = adaptive(30);
    fixed.spec.schedule_strategy.type_ = "Fixed".into();
    assert!(
        msg(&fixed).contains("spec.scheduleStrategy.type: Invalid value")
            && msg(&fixed).contains("must be Adaptive"),
        "{}",
        msg(&fixed)
    );
}

#[test]
fn a_custom_kind_is_accepted_only_when_the_whitelist_lists_it() {
    use kruise_api::apps::v1alpha1::CustomWorkloadWhiteList;
    let w = ws(
        "GameServerSet",
        "game.example.com/v1",
        vec![subset("a", None)],
    );
    let refused = aggregate(&spec_errors(&w));
    assert!(
        refused.contains("spec.targetRef: Invalid value")
            && refused.contains("GroupKind is not permitted")
            && refused.contains(keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY),
        "{refused}"
    );
    let data = [(
        keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY.to_owned(),
        r#"{"workloads":[{"Group":"game.example.com","Version":"v1","Kind":"GameServerSet","replicasPath":"spec.size"}]}"#
            .to_owned(),
    )]
    .into();
    let list = CustomWorkloadWhiteList::from_configuration(&data).map_err(|e| e.to_string());
    assert!(spec_errors_with(&w, Some(&list)).is_empty());
    // Another group of the same kind is not listed.
    let other = ws(
        "GameServerSet",
        "other.example.com/v1",
        vec![subset("a", None)],
    );
    assert!(!spec_errors_with(&other, Some(&list)).is_empty());
    // A whitelist that cannot be read is reported, not taken as empty.
    let broken: Result<CustomWorkloadWhiteList, String> = Err("no answer".into());
    assert!(aggregate(&spec_errors_with(&w, Some(&broken))).contains("Internal error: no answer"));
}

#[test]
fn a_statefulsets_pods_go_by_ordinal_past_closed_subsets() {
    let mut w = ws(
        "StatefulSet",
        "apps/v1",
        vec![
            subset("a", Some(IntOrString::Int(2))),
            subset("b", Some(IntOrString::Int(1))),
            subset("c", None),
        ],
    );
    let at = |w: &WorkloadSpread, pod: &str| by_ordinal(w, pod).map(|m| m.subset);
    assert_eq!(at(&w, "web-0").as_deref(), Some("a"));
    assert_eq!(at(&w, "web-1").as_deref(), Some("a"));
    assert_eq!(at(&w, "web-2").as_deref(), Some("b"));
    assert_eq!(at(&w, "web-3").as_deref(), Some("c"));
    assert_eq!(at(&w, "web-99").as_deref(), Some("c"));
    // No ordinal counts as -1: the first subset.
    assert_eq!(at(&w, "web").as_deref(), Some("a"));
    // A closed subset is passed over and its ordinals move on.
    w.status = Some(WorkloadSpreadStatus {
        subset_statuses: vec![WorkloadSpreadSubsetStatus {
            name: "a".into(),
            conditions: vec![kruise_api::apps::v1alpha1::WorkloadSpreadSubsetCondition {
                type_: "Schedulable".into(),
                status: "False".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    assert_eq!(at(&w, "web-0").as_deref(), Some("b"));
    assert_eq!(at(&w, "web-1").as_deref(), Some("c"));
    // Every subset capped: an ordinal past them all has none.
    w.spec.subsets[2].max_replicas = Some(IntOrString::Int(1));
    assert_eq!(at(&w, "web-5"), None);
}
