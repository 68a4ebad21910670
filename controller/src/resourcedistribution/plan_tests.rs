//! The plan and the status against upstream's `utils_test.go` and
//! `resourcedistribution_controller_test.go` cases, and properties of the matching.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kruise_api::apps::v1alpha1::{
    ResourceDistributionConditionType as ConditionType, ResourceDistributionNamespace,
    ResourceDistributionTargetNamespaces, ResourceDistributionTargets, resource_hash,
};
use kruise_api::keys;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::plan::*;
use super::status::{Failure, compute, newly_true};

fn ns(name: &str, labels: &[(&str, &str)]) -> NamespaceInfo {
    NamespaceInfo {
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        terminating: false,
    }
}

fn list(names: &[&str]) -> ResourceDistributionTargetNamespaces {
    ResourceDistributionTargetNamespaces {
        list: names
            .iter()
            .map(|n| ResourceDistributionNamespace { name: (*n).into() })
            .collect(),
    }
}

fn secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "s", "labels": {"from": "rd"}}, "data": {"k": "dg=="}})
}

/// Upstream's test world: ns-1..ns-6 with group/environment labels.
fn world() -> Vec<NamespaceInfo> {
    vec![
        ns("ns-1", &[("group", "one"), ("environment", "develop")]),
        ns("ns-2", &[("group", "one"), ("environment", "develop")]),
        ns("ns-3", &[("group", "one"), ("environment", "develop")]),
        ns("ns-4", &[("group", "one"), ("environment", "test")]),
        ns("ns-5", &[("group", "two"), ("environment", "test")]),
        ns("ns-6", &[]),
    ]
}

fn upstream_targets() -> ResourceDistributionTargets {
    ResourceDistributionTargets {
        all_namespaces: false,
        included_namespaces: list(&["ns-1", "ns-4"]),
        excluded_namespaces: list(&["ns-3"]),
        namespace_label_selector: LabelSelector {
            match_labels: Some([("group".to_owned(), "one".to_owned())].into()),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "environment".into(),
                operator: "In".into(),
                values: Some(vec!["develop".into()]),
            }]),
        },
    }
}

#[test]
fn targets_are_included_plus_selected_minus_excluded() {
    let t = targeted(&upstream_targets(), &world());
    assert_eq!(t.matched, ["ns-1", "ns-2", "ns-4"]);
    assert_eq!(t.unmatched, ["ns-3", "ns-5", "ns-6"]);
    // A listed namespace that does not exist is still desired.
    let mut targets = upstream_targets();
    targets.included_namespaces = list(&["ns-1", "ns-404"]);
    assert!(
        targeted(&targets, &world())
            .matched
            .contains(&"ns-404".to_owned())
    );
    // allNamespaces wins over the lists and the selector, not over the exclusions.
    targets.all_namespaces = true;
    let t = targeted(&targets, &world());
    assert_eq!(t.matched, ["ns-1", "ns-2", "ns-4", "ns-5", "ns-6"]);
    assert_eq!(t.unmatched, ["ns-3"]);
    // An empty selector selects nothing.
    let none = ResourceDistributionTargets::default();
    assert!(targeted(&none, &world()).matched.is_empty());
}

#[test]
fn namespace_events_match_as_upstream() {
    let t = upstream_targets();
    assert!(namespace_targeted(&t, &ns("ns-1", &[])));
    assert!(namespace_targeted(
        &t,
        &ns("x", &[("group", "one"), ("environment", "develop")])
    ));
    assert!(!namespace_targeted(
        &t,
        &ns("ns-3", &[("group", "one"), ("environment", "develop")])
    ));
    assert!(!namespace_targeted(&t, &ns("ns-5", &[("group", "two")])));
    assert!(!selector_matches(
        &ResourceDistributionTargets::default(),
        &BTreeMap::new()
    ));
}

#[test]
fn namespace_events_concern_as_upstream_enqueues() {
    let t = upstream_targets();
    let dev = ns("x", &[("group", "one"), ("environment", "develop")]);
    let plain = ns("x", &[]);
    // Created: matched now.
    assert!(namespace_event_concerns(&t, None, Some(&dev)));
    assert!(!namespace_event_concerns(&t, None, Some(&plain)));
    // Labels: matched before or after.
    assert!(namespace_event_concerns(&t, Some(&plain), Some(&dev)));
    assert!(namespace_event_concerns(&t, Some(&dev), Some(&plain)));
    assert!(!namespace_event_concerns(
        &t,
        Some(&plain),
        Some(&ns("x", &[("a", "b")]))
    ));
    assert!(!namespace_event_concerns(&t, Some(&dev), Some(&dev)));
    // Deleted: listed by name only (upstream `matchViaIncludedNamespaces`).
    assert!(namespace_event_concerns(&t, Some(&ns("ns-1", &[])), None));
    assert!(!namespace_event_concerns(&t, Some(&dev), None));
    // Starts terminating while targeted.
    let mut dying = ns("ns-1", &[]);
    dying.terminating = true;
    assert!(namespace_event_concerns(
        &t,
        Some(&ns("ns-1", &[])),
        Some(&dying)
    ));
    assert!(!namespace_event_concerns(&t, Some(&dying), Some(&dying)));
}

fn distributor<'a>(resource: &'a Value, hash: &'a str) -> Distributor<'a> {
    Distributor {
        name: "rd",
        uid: "uid-rd",
        resource,
        hash,
    }
}

fn ours(ns: &str, resource: &Value, hash: &str) -> Value {
    let r = resource.clone();
    desired_copy(&distributor(&r, hash), ns, None)
}

#[test]
fn each_namespace_gets_its_step() {
    let res = secret();
    let hash = resource_hash(&res);
    let d = distributor(&res, &hash);
    let mut world = world();
    world[1].terminating = false;
    let mut existing = BTreeMap::new();
    // ns-1: up to date; ns-2: stale data; ns-4: a foreign Secret; ns-3 (excluded): ours.
    existing.insert("ns-1".to_owned(), ours("ns-1", &res, &hash));
    let mut stale = ours("ns-2", &res, &hash);
    stale["data"] = json!({"k": "b2xk"});
    existing.insert("ns-2".to_owned(), stale);
    existing.insert(
        "ns-4".to_owned(),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "ns-4"}}),
    );
    existing.insert("ns-3".to_owned(), ours("ns-3", &res, &hash));
    // ns-5 holds a same-named Secret of someone else: untargeted, left alone.
    existing.insert(
        "ns-5".to_owned(),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
    );
    let mut targets = upstream_targets();
    targets.included_namespaces = list(&["ns-1", "ns-4", "ns-404"]);
    let steps = plan(&d, &targets, &world, &existing);
    let by: BTreeMap<&str, &NamespaceStep> =
        steps.iter().map(|s| (s.namespace.as_str(), s)).collect();
    assert_eq!(by["ns-1"].step, Step::Keep);
    assert!(matches!(by["ns-2"].step, Step::Update(_)));
    assert_eq!(by["ns-4"].step, Step::Conflict);
    assert_eq!(by["ns-404"].step, Step::NamespaceMissing);
    assert_eq!(by["ns-3"].step, Step::Delete);
    assert!(!by["ns-3"].targeted);
    assert!(
        !by.contains_key("ns-5"),
        "a foreign object outside the targets is not ours"
    );
    assert!(!by.contains_key("ns-6"));
    assert_eq!(steps.iter().filter(|s| s.targeted).count(), 4);

    // A terminating targeted namespace is reported, an untargeted one is not cleaned.
    let mut world2 = world.clone();
    world2[0].terminating = true;
    world2[2].terminating = true;
    let steps = plan(&d, &targets, &world2, &existing);
    let by: BTreeMap<&str, &NamespaceStep> =
        steps.iter().map(|s| (s.namespace.as_str(), s)).collect();
    assert_eq!(by["ns-1"].step, Step::NamespaceMissing);
    assert!(!by.contains_key("ns-3"));
}

#[test]
fn a_new_copy_carries_owner_hash_and_source() {
    let res = secret();
    let hash = resource_hash(&res);
    let copy = desired_copy(&distributor(&res, &hash), "ns-1", None);
    assert_eq!(copy["metadata"]["namespace"], "ns-1");
    assert_eq!(copy["metadata"]["name"], "s");
    assert_eq!(copy["data"], res["data"]);
    assert_eq!(copy["metadata"]["labels"]["from"], "rd");
    let a = &copy["metadata"]["annotations"];
    assert_eq!(a[keys::RD_RESOURCE_HASH_ANNOTATION], hash.as_str());
    assert_eq!(a[keys::RD_SOURCE_ANNOTATION], "rd");
    let owners = copy["metadata"]["ownerReferences"]
        .as_array()
        .expect("owners");
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0]["kind"], "ResourceDistribution");
    assert_eq!(owners[0]["apiVersion"], "apps.kruise.io/v1alpha1");
    assert_eq!(owners[0]["uid"], "uid-rd");
    assert_eq!(owners[0]["controller"], true);
    assert_eq!(owners[0]["blockOwnerDeletion"], true);
    assert!(controlled_by(&copy, "rd"));
    assert!(!controlled_by(&copy, "other"));
    assert!(!needs_update(&copy, &distributor(&res, &hash)));
}

#[test]
fn an_update_keeps_foreign_metadata_and_the_resource_version() {
    let res = secret();
    let hash = resource_hash(&res);
    let d = distributor(&res, &hash);
    let mut old = desired_copy(&d, "ns-1", None);
    old["metadata"]["labels"]["added-by-hand"] = json!("yes");
    old["metadata"]["labels"]["from"] = json!("edited");
    old["metadata"]["finalizers"] = json!(["example.com/keep"]);
    old["metadata"]["resourceVersion"] = json!("42");
    old["data"] = json!({"updated": "eWVz"});
    assert!(needs_update(&old, &d));
    let new = desired_copy(&d, "ns-1", Some(&old));
    assert_eq!(new["data"], res["data"]);
    assert_eq!(new["metadata"]["labels"]["added-by-hand"], "yes");
    assert_eq!(
        new["metadata"]["labels"]["from"], "rd",
        "the resource's own labels win"
    );
    assert_eq!(new["metadata"]["finalizers"], json!(["example.com/keep"]));
    assert_eq!(new["metadata"]["resourceVersion"], "42");
    assert_eq!(
        new["metadata"]["ownerReferences"].as_array().map(Vec::len),
        Some(1)
    );
    // A changed resource changes the hash: the copy is updated even if only metadata moved.
    let mut res2 = res.clone();
    res2["metadata"]["labels"]["from"] = json!("rd2");
    let hash2 = resource_hash(&res2);
    assert!(needs_update(&new, &distributor(&res2, &hash2)));
}

#[test]
fn string_data_compares_as_the_api_server_stores_it() {
    let res = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
        "stringData": {"k": "v"}, "data": {"other": "eA=="}});
    let hash = resource_hash(&res);
    let d = distributor(&res, &hash);
    let mut stored = desired_copy(&d, "ns-1", None);
    stored.as_object_mut().map(|o| o.remove("stringData"));
    stored["data"] = json!({"k": "dg==", "other": "eA=="});
    assert!(!needs_update(&stored, &d), "the stored copy is current");
    stored["data"]["k"] = json!("dzI=");
    assert!(needs_update(&stored, &d), "an edited value is put back");
    stored["data"]["k"] = json!("dg==");
    stored["type"] = json!("Opaque");
    assert!(
        !needs_update(&stored, &d),
        "the defaulted type is not a difference"
    );
    // Items of a list carry no apiVersion and kind.
    if let Some(o) = stored.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
    }
    assert!(!needs_update(&stored, &d), "a listed copy is current");
}

#[test]
fn status_as_upstream_calculates_it() {
    let failures = vec![
        Failure {
            condition: ConditionType::ConflictOccurred,
            namespace: "ns-4".into(),
            targeted: true,
            message: keys::RD_CONFLICT_MESSAGE.into(),
        },
        Failure {
            condition: ConditionType::NamespaceNotExists,
            namespace: "ns-404".into(),
            targeted: true,
            message: keys::RD_NAMESPACE_NOT_EXISTS_MESSAGE.into(),
        },
        Failure {
            condition: ConditionType::DeleteResourceFailed,
            namespace: "ns-3".into(),
            targeted: false,
            message: "forbidden".into(),
        },
    ];
    let t0 = jiff::Timestamp::from_second(1_000).expect("t0");
    let s = compute(None, 7, 4, &failures, t0);
    assert_eq!(
        (s.desired, s.succeeded, s.failed, s.observed_generation),
        (4, 2, 2, 7)
    );
    assert_eq!(s.conditions.len(), 6);
    let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ConditionType::ALL.map(ConditionType::as_str));
    let conflict = &s.conditions[4];
    assert_eq!(conflict.status, "True");
    assert_eq!(conflict.failed_namespaces, ["ns-4"]);
    assert_eq!(conflict.reason, keys::RD_CONFLICT_MESSAGE);
    assert_eq!(s.conditions[3].failed_namespaces, ["ns-3"]);
    assert_eq!(s.conditions[0].status, "False");
    assert_eq!(s.conditions[0].reason, "Succeeded");
    // Newly true: conflict, not-exists, delete; a second round with the same failures: none,
    // and the transition times stay.
    assert_eq!(newly_true(None, &s).len(), 3);
    let t1 = jiff::Timestamp::from_second(2_000).expect("t1");
    let again = compute(Some(&s), 7, 4, &failures, t1);
    assert_eq!(again, s, "an unchanged round writes nothing");
    assert!(newly_true(Some(&s), &again).is_empty());
    // Resolved: False again with a new transition time.
    let clean = compute(Some(&s), 8, 4, &[], t1);
    assert_eq!((clean.succeeded, clean.failed), (4, 0));
    assert_eq!(
        clean.conditions[4]
            .last_transition_time
            .as_ref()
            .map(|t| t.0),
        Some(t1)
    );
    assert_eq!(
        clean.conditions[0]
            .last_transition_time
            .as_ref()
            .map(|t| t.0),
        Some(t0)
    );
}

fn arb_world() -> impl Strategy<Value = Vec<NamespaceInfo>> {
    prop::collection::btree_map("[a-e]", (prop::option::of("[xy]"), any::<bool>()), 0..6).prop_map(
        |m| {
            m.into_iter()
                .map(|(name, (label, terminating))| NamespaceInfo {
                    name,
                    labels: label.into_iter().map(|v| ("k".to_owned(), v)).collect(),
                    terminating,
                })
                .collect()
        },
    )
}

fn arb_targets() -> impl Strategy<Value = ResourceDistributionTargets> {
    (
        any::<bool>(),
        prop::collection::vec("[a-f]", 0..4),
        prop::collection::vec("[a-f]", 0..3),
        prop::option::of("[xy]"),
    )
        .prop_map(|(all, inc, exc, sel)| ResourceDistributionTargets {
            all_namespaces: all,
            included_namespaces: list(&inc.iter().map(String::as_str).collect::<Vec<_>>()),
            excluded_namespaces: list(&exc.iter().map(String::as_str).collect::<Vec<_>>()),
            namespace_label_selector: LabelSelector {
                match_labels: sel.map(|v| [("k".to_owned(), v)].into()),
                match_expressions: None,
            },
        })
}

proptest! {
    /// The batch matching and the per-namespace event matching agree on every existing
    /// namespace; excluded namespaces are never matched; matched and unmatched are disjoint.
    #[test]
    fn matching_is_consistent(world in arb_world(), targets in arb_targets()) {
        let t = targeted(&targets, &world);
        for n in &world {
            prop_assert_eq!(t.matched.contains(&n.name), namespace_targeted(&targets, n));
            prop_assert_ne!(t.matched.contains(&n.name), t.unmatched.contains(&n.name));
        }
        for ex in targets.excluded_namespaces.names() {
            prop_assert!(!t.matched.iter().any(|m| m == ex));
        }
    }

    /// Never a write to a foreign object; a delete only of our own copy in an untargeted,
    /// live namespace; after applying the plan, planning again finds nothing to write.
    #[test]
    fn plan_never_touches_foreign_objects_and_converges(
        world in arb_world(),
        targets in arb_targets(),
        foreign in prop::collection::btree_set("[a-e]", 0..3),
        mine in prop::collection::btree_set("[a-e]", 0..3),
    ) {
        let res = secret();
        let hash = resource_hash(&res);
        let d = distributor(&res, &hash);
        let mut existing = BTreeMap::new();
        for n in &mine {
            let mut stale = ours(n, &res, &hash);
            stale["data"] = json!({"old": "b2xk"});
            existing.insert(n.clone(), stale);
        }
        for n in &foreign {
            existing.insert(n.clone(), json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s", "namespace": n}}));
        }
        let steps = plan(&d, &targets, &world, &existing);
        for s in &steps {
            let foreign_here = existing.get(&s.namespace).is_some_and(|o| !controlled_by(o, "rd"));
            match &s.step {
                Step::Create(_) => prop_assert!(!existing.contains_key(&s.namespace)),
                Step::Update(_) | Step::Delete => prop_assert!(!foreign_here),
                Step::Conflict => prop_assert!(foreign_here),
                _ => {}
            }
            if s.step == Step::Delete {
                prop_assert!(!s.targeted);
            }
        }
        // Apply the writes, then plan again.
        let mut after = existing.clone();
        for s in &steps {
            match &s.step {
                Step::Create(v) | Step::Update(v) => { after.insert(s.namespace.clone(), v.clone()); }
                Step::Delete => { after.remove(&s.namespace); }
                _ => {}
            }
        }
        let again = plan(&d, &targets, &world, &after);
        prop_assert!(again.iter().all(|s| matches!(s.step, Step::Keep | Step::Conflict | Step::NamespaceMissing)),
            "second round: {:?}", again);
    }
}
