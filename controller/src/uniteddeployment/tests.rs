//! Table and property tests of the pure parts: the replica split (upstream's
//! `allocator_test.go` cases), partitions, the steps, the subset workload and the status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    CloneSetTemplateSpec, ManualUpdate, Subset, SubsetKind, UnitedDeployment, UnitedDeploymentSpec,
    UnitedDeploymentUpdateStrategy,
};
use kruise_api::keys;
use proptest::prelude::*;
use serde_json::json;

use super::child;
use super::plan::{self, AllocError, Desired, Observed, Step};
use super::revisions::Revisions;
use super::status::{Outcome, next_status};

fn io(v: &str) -> IntOrString {
    match v.parse::<i32>() {
        Ok(i) => IntOrString::Int(i),
        Err(_) => IntOrString::String(v.to_owned()),
    }
}

/// Subsets `(name, replicas, min, max)`; empty strings are unset.
fn spec(replicas: Option<i32>, subsets: &[(&str, &str, &str, &str)]) -> UnitedDeploymentSpec {
    let opt = |v: &str| (!v.is_empty()).then(|| io(v));
    let mut s = UnitedDeploymentSpec {
        replicas,
        ..Default::default()
    };
    s.topology.subsets = subsets
        .iter()
        .map(|(n, r, min, max)| Subset {
            name: (*n).to_owned(),
            replicas: opt(r),
            min_replicas: opt(min),
            max_replicas: opt(max),
            ..Default::default()
        })
        .collect();
    s
}

fn map(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

#[test]
fn even_split_gives_the_remainder_to_the_largest_then_later_names() {
    let s = spec(
        Some(5),
        &[("a", "", "", ""), ("b", "", "", ""), ("c", "", "", "")],
    );
    let got = plan::allocate(&s, &BTreeMap::new()).expect("allocates");
    assert_eq!(got, map(&[("a", 1), ("b", 2), ("c", 2)]));
    // The subset already running the most keeps the extra one.
    let got = plan::allocate(&s, &map(&[("a", 4)])).expect("allocates");
    assert_eq!(got, map(&[("a", 2), ("b", 1), ("c", 2)]));
}

#[test]
fn specified_subsets_take_theirs_first() {
    // upstream e2e "united deployment with specific allocator"
    let s = |r| {
        spec(
            Some(r),
            &[
                ("subset-0", "25%", "", ""),
                ("subset-1", "25%", "", ""),
                ("subset-2", "", "", ""),
            ],
        )
    };
    let get = |r| plan::allocate(&s(r), &BTreeMap::new()).expect("allocates");
    assert_eq!(
        get(3),
        map(&[("subset-0", 1), ("subset-1", 1), ("subset-2", 1)])
    );
    assert_eq!(
        get(4),
        map(&[("subset-0", 1), ("subset-1", 1), ("subset-2", 2)])
    );
    assert_eq!(
        get(1),
        map(&[("subset-0", 0), ("subset-1", 0), ("subset-2", 1)])
    );
}

#[test]
fn specified_replicas_that_do_not_fit_are_refused() {
    let s = spec(Some(3), &[("a", "2", "", ""), ("b", "2", "", "")]);
    assert_eq!(
        plan::allocate(&s, &BTreeMap::new()),
        Err(AllocError::Greater {
            specified: 4,
            replicas: 3
        })
    );
    let s = spec(Some(5), &[("a", "2", "", ""), ("b", "2", "", "")]);
    assert_eq!(
        plan::allocate(&s, &BTreeMap::new()),
        Err(AllocError::Less {
            specified: 4,
            replicas: 5
        })
    );
    let s = spec(None, &[("a", "2", "", ""), ("b", "", "", "")]);
    assert_eq!(
        plan::allocate(&s, &BTreeMap::new()),
        Err(AllocError::Unspecified)
    );
    let s = spec(None, &[("a", "2", "", ""), ("b", "3", "", "")]);
    assert_eq!(
        plan::allocate(&s, &BTreeMap::new()),
        Ok(map(&[("a", 2), ("b", 3)]))
    );
}

#[test]
fn elastic_allocation_fills_minimums_then_maximums_in_order() {
    // upstream e2e "united deployment with elastic allocator"
    let s = |r| {
        spec(
            Some(r),
            &[
                ("subset-0", "", "1", "2"),
                ("subset-1", "", "1", "2"),
                ("subset-2", "", "1", ""),
            ],
        )
    };
    let get = |r| plan::allocate(&s(r), &BTreeMap::new()).expect("allocates");
    assert_eq!(
        get(3),
        map(&[("subset-0", 1), ("subset-1", 1), ("subset-2", 1)])
    );
    assert_eq!(
        get(7),
        map(&[("subset-0", 2), ("subset-1", 2), ("subset-2", 3)])
    );
    assert_eq!(
        get(1),
        map(&[("subset-0", 1), ("subset-1", 0), ("subset-2", 0)])
    );
    // upstream allocator.go example: min 2 / max 4, min 2 / none, 5 replicas → 3, 2
    let s = spec(Some(5), &[("a", "", "2", "4"), ("b", "", "2", "")]);
    assert_eq!(
        plan::allocate(&s, &BTreeMap::new()),
        Ok(map(&[("a", 3), ("b", 2)]))
    );
    // Percentages against the total.
    let s = spec(Some(10), &[("a", "", "", "30%"), ("b", "", "", "")]);
    assert_eq!(
        plan::allocate(&s, &BTreeMap::new()),
        Ok(map(&[("a", 3), ("b", 7)]))
    );
    let s = spec(Some(10), &[("a", "", "5", "2"), ("b", "", "", "")]);
    assert_eq!(
        plan::allocate(&s, &BTreeMap::new()),
        Err(AllocError::MinOverMax {
            index: 0,
            max: 2,
            min: 5
        })
    );
}

proptest! {
    /// Unspecified subsets always share exactly the total, and evenly (within one).
    #[test]
    fn even_split_sums_to_the_total(total in 0i32..200, n in 1usize..6, cur in proptest::collection::vec(0i32..20, 6)) {
        let names: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
        let subsets: Vec<(&str, &str, &str, &str)> = names.iter().map(|s| (s.as_str(), "", "", "")).collect();
        let current: BTreeMap<String, i32> = names.iter().cloned().zip(cur).collect();
        let got = plan::allocate(&spec(Some(total), &subsets), &current).expect("allocates");
        prop_assert_eq!(got.values().sum::<i32>(), total);
        let (min, max) = (got.values().min().copied().unwrap_or(0), got.values().max().copied().unwrap_or(0));
        prop_assert!(max - min <= 1);
    }

    /// Elastic allocation never exceeds a maximum, gives the total when the last subset is
    /// unbounded, and meets every minimum the total allows, in order.
    #[test]
    fn elastic_respects_bounds(total in 0i32..100, bounds in proptest::collection::vec((0i32..10, 0i32..10), 1..5)) {
        let mut subsets = Vec::new();
        let names: Vec<String> = (0..bounds.len()).map(|i| format!("s{i}")).collect();
        let strs: Vec<(String, String)> = bounds.iter().map(|(a, b)| (a.to_string(), (a + b).to_string())).collect();
        for (i, (min, max)) in strs.iter().enumerate() {
            subsets.push((names[i].as_str(), "", min.as_str(), max.as_str()));
        }
        subsets.push(("last", "", "", ""));
        let got = plan::allocate(&spec(Some(total), &subsets), &BTreeMap::new()).expect("allocates");
        prop_assert_eq!(got.values().sum::<i32>(), total);
        let mut left = total;
        for (i, (min, extra)) in bounds.iter().enumerate() {
            let v = got[&names[i]];
            prop_assert!(v <= min + extra);
            prop_assert!(v >= (*min).min(left).max(0));
            left -= (*min).min(left).max(0);
        }
    }
}

#[test]
fn partitions_are_capped_by_replicas_and_default_to_zero() {
    let mut s = spec(Some(4), &[("a", "", "", ""), ("b", "", "", "")]);
    s.update_strategy = UnitedDeploymentUpdateStrategy {
        type_: "Manual".into(),
        manual_update: Some(ManualUpdate {
            partitions: map(&[("a", 5)]),
        }),
    };
    let got = plan::next_partitions(&s, &map(&[("a", 2), ("b", 2)]));
    assert_eq!(got, map(&[("a", 2), ("b", 0)]));
}

fn observed(name: &str, subset: &str, replicas: i32) -> Observed {
    Observed {
        name: name.into(),
        subset: subset.into(),
        spec_replicas: replicas,
        revision: "r1".into(),
        ..Default::default()
    }
}

#[test]
fn steps_create_update_and_delete() {
    let names = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
    let d = |r| Desired {
        replicas: r,
        partition: 0,
        patch: String::new(),
        max_unavailable: None,
    };
    let desired: BTreeMap<String, Desired> = [
        ("a".to_owned(), d(1)),
        ("b".to_owned(), d(2)),
        ("c".to_owned(), d(1)),
    ]
    .into();
    let existing = vec![
        observed("ud-a-1", "a", 1),
        observed("ud-a-2", "a", 1),
        observed("ud-b-1", "b", 1),
        observed("ud-gone-1", "gone", 3),
    ];
    let (steps, kept) = plan::steps(&names, &existing, "r1", &desired);
    assert_eq!(
        steps,
        vec![
            Step::Delete("ud-a-2".into()),
            Step::Delete("ud-gone-1".into()),
            Step::Update {
                subset: "b".into(),
                name: "ud-b-1".into()
            },
            Step::Create("c".into()),
        ]
    );
    assert_eq!(kept.len(), 2);
    // A new revision rewrites every subset.
    let (steps, _) = plan::steps(&names[..1], &existing[..1], "r2", &desired);
    assert_eq!(
        steps,
        vec![Step::Update {
            subset: "a".into(),
            name: "ud-a-1".into()
        }]
    );
}

#[test]
fn revisions_past_the_limit_are_pruned_unless_live() {
    let names: Vec<String> = (1..=5).map(|i| format!("r{i}")).collect();
    assert_eq!(
        plan::revisions_to_prune(&names, &["r1"], 2),
        vec!["r2", "r3"]
    );
    assert!(plan::revisions_to_prune(&names, &[], 10).is_empty());
}

fn cloneset_ud() -> UnitedDeployment {
    let mut ud = UnitedDeployment::new(
        "web",
        spec(Some(3), &[("a", "", "", ""), ("b", "", "", "")]),
    );
    ud.metadata.namespace = Some("ns".into());
    ud.metadata.uid = Some("uid-1".into());
    ud.spec.selector = Some(LabelSelector {
        match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
        ..Default::default()
    });
    let cs: CloneSetTemplateSpec = serde_json::from_value(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]}},
            "updateStrategy": {"type": "InPlaceIfPossible", "partition": 3, "maxUnavailable": 2,
                "paused": false, "inPlaceUpdateStrategy": {"gracePeriodSeconds": 5}},
            "scaleStrategy": {"disablePVCReuse": true}
        }
    }))
    .expect("template");
    ud.spec.template.clone_set_template = Some(Box::new(cs));
    ud.spec.topology.subsets[0].node_selector_term = serde_json::from_value(json!({
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]
    }))
    .ok();
    ud.spec.topology.subsets[0].tolerations =
        serde_json::from_value(json!([{"key": "spot", "operator": "Exists"}])).expect("tol");
    ud.spec.topology.subsets[0].patch = Some(json!({"metadata": {"labels": {"tier": "spot"}}}));
    ud
}

#[test]
fn the_subset_workload_carries_selector_labels_placement_and_patch() {
    let ud = cloneset_ud();
    let obj =
        child::desired(&ud, SubsetKind::CloneSet, "a", "web-rev", 2, 1, None).expect("builds");
    // A v1alpha1 CloneSet, as the release's adapter makes, from the template's v1alpha1 spec.
    assert_eq!(obj["apiVersion"], "apps.kruise.io/v1alpha1");
    assert_eq!(obj["kind"], "CloneSet");
    assert_eq!(obj["metadata"]["generateName"], "web-a-");
    assert_eq!(obj["metadata"]["labels"][keys::SUBSET_NAME_LABEL], "a");
    assert_eq!(
        obj["metadata"]["labels"][keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL],
        "web-rev"
    );
    assert_eq!(obj["metadata"]["ownerReferences"][0]["uid"], "uid-1");
    assert_eq!(obj["spec"]["replicas"], 2);
    // The template's strategies, the subset's partition in the flat field.
    let us = &obj["spec"]["updateStrategy"];
    assert_eq!(us["type"], "InPlaceIfPossible");
    assert_eq!(us["partition"], 1);
    assert_eq!(us["maxUnavailable"], 2);
    assert_eq!(us["inPlaceUpdateStrategy"]["gracePeriodSeconds"], 5);
    assert!(us.get("rollingUpdate").is_none(), "no v1beta1 field");
    assert_eq!(obj["spec"]["scaleStrategy"]["disablePVCReuse"], true);
    assert_eq!(
        obj["spec"]["selector"]["matchLabels"][keys::SUBSET_NAME_LABEL],
        "a"
    );
    let tpl = &obj["spec"]["template"];
    assert_eq!(tpl["metadata"]["labels"]["tier"], "spot");
    assert_eq!(tpl["metadata"]["labels"][keys::SUBSET_NAME_LABEL], "a");
    assert_eq!(
        tpl["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["key"],
        "zone"
    );
    assert_eq!(tpl["spec"]["tolerations"][0]["key"], "spot");
    assert_eq!(
        obj["metadata"]["annotations"][keys::SUBSET_PATCH_ANNOTATION],
        r#"{"metadata":{"labels":{"tier":"spot"}}}"#
    );
    // Read back, it needs no update.
    let mut live = obj.clone();
    live["metadata"]["name"] = json!("web-a-x1");
    let o = child::observe(
        SubsetKind::CloneSet,
        &live,
        "web-rev",
        &[("web-rev".into(), true)],
    );
    assert_eq!(
        (o.spec_replicas, o.spec_partition, o.updated_ready_replicas),
        (2, 1, 1)
    );
    assert_eq!(o.patch, child::patch_text(&ud.spec.topology.subsets[0]));
    // A percentage partition counts against the CloneSet's replicas, rounded up.
    live["spec"]["updateStrategy"]["partition"] = json!("50%");
    live["spec"]["replicas"] = json!(3);
    let o = child::observe(SubsetKind::CloneSet, &live, "web-rev", &[]);
    assert_eq!(o.spec_partition, 2);
    // The Adaptive strategy's reserve goes to the flat maxUnavailable.
    child::set_max_unavailable(SubsetKind::CloneSet, &mut live, 4);
    assert_eq!(live["spec"]["updateStrategy"]["maxUnavailable"], 4);
    assert!(
        live["spec"]["updateStrategy"]
            .get("rollingUpdate")
            .is_none()
    );
}

#[test]
fn statefulset_partition_goes_under_rolling_update() {
    let mut ud = cloneset_ud();
    ud.spec.template.clone_set_template = None;
    ud.spec.template.stateful_set_template =
        Some(serde_json::from_value(json!({"spec": {"template": {}}})).expect("template"));
    let obj = child::desired(&ud, SubsetKind::StatefulSet, "b", "r", 3, 2, None).expect("builds");
    assert_eq!(
        obj["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
        2
    );
    assert_eq!(child::generate_name("web", "b"), "web-b-");
    assert_eq!(child::generate_name("web", "B_x"), "web-");
}

#[test]
fn status_sums_subsets_and_moves_the_current_revision_when_all_updated() {
    let mut ud = cloneset_ud();
    ud.metadata.generation = Some(4);
    let revs = Revisions {
        current: "r1".into(),
        update: "r2".into(),
        collision_count: 0,
    };
    let kept: BTreeMap<String, Observed> = [
        (
            "a".to_owned(),
            Observed {
                replicas: 2,
                ready_replicas: 2,
                updated_replicas: 2,
                updated_ready_replicas: 2,
                ..observed("x", "a", 2)
            },
        ),
        (
            "b".to_owned(),
            Observed {
                replicas: 1,
                ready_replicas: 1,
                updated_replicas: 0,
                updated_ready_replicas: 0,
                ..observed("y", "b", 1)
            },
        ),
    ]
    .into();
    let now = Time(jiff::Timestamp::UNIX_EPOCH);
    let reps = map(&[("a", 2), ("b", 1)]);
    let parts = map(&[("a", 0), ("b", 1)]);
    let st = next_status(&ud, &revs, &kept, &reps, &parts, &Outcome::default(), &now);
    assert_eq!(
        (st.replicas, st.ready_replicas, st.updated_replicas),
        (3, 3, 2)
    );
    assert_eq!(st.current_revision, "r1");
    assert_eq!(st.observed_generation, 4);
    assert_eq!(st.label_selector, "app=web");
    assert_eq!(st.subset_statuses[1].partition, 1);
    let upd = st.update_status.clone().expect("update status");
    assert_eq!(upd.updated_revision, "r2");
    let cond = st
        .conditions
        .iter()
        .find(|c| c.type_ == "UnitedDeploymentUpdated")
        .expect("cond");
    assert_eq!(cond.status, "False");
    let mut all = kept.clone();
    if let Some(b) = all.get_mut("b") {
        b.updated_replicas = 1;
        b.updated_ready_replicas = 1;
    }
    let st = next_status(&ud, &revs, &all, &reps, &parts, &Outcome::default(), &now);
    assert_eq!(st.current_revision, "r2");
}
