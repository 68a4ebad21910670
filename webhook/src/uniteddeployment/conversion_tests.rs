//! Tests of the UnitedDeployment conversion: upstream's `uniteddeployment_conversion_test.go`
//! cases, then ours (map order, the CloneSet template converted as a CloneSet, records, round
//! trips).

use super::*;
use kruise_api::apps::{v1alpha1, v1beta1};
use kruise_api::keys;
use proptest::prelude::*;

const ALPHA: &str = keys::APPS_V1ALPHA1;
const BETA: &str = keys::APPS_V1BETA1;
const TIME: &str = "2024-03-09T16:00:00Z";

fn pod() -> Value {
    json!({"metadata": {"labels": {"app": "demo"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}})
}

/// A template of `kind` with upstream's test metadata and Pod template (and a selector, which
/// our typed CloneSet spec requires; a CloneSet's strategies as the CRD defaults them).
fn template(kind: &str) -> Value {
    let mut t = json!({"metadata": {"labels": {"app": "demo"}},
        "spec": {"selector": {"matchLabels": {"app": "demo"}}, "template": pod()}});
    if kind == "cloneSetTemplate" {
        t["spec"]["updateStrategy"] = json!({"type": "ReCreate"});
        t["spec"]["scaleStrategy"] = json!({});
    }
    let mut out = json!({});
    out[kind] = t.take();
    out
}

/// Upstream's `unitedDeploymentForTemplate`, as v1alpha1 JSON.
fn ud_for_template(template: Value) -> Value {
    json!({"apiVersion": ALPHA, "kind": "UnitedDeployment",
        "metadata": {"name": "demo", "namespace": "default", "labels": {"app": "demo"}},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "demo"}},
            "template": template,
            "topology": {
                "subsets": [
                    {"name": "subset-a", "minReplicas": 1, "maxReplicas": "80%",
                        "patch": {"metadata": {"labels": {"subset": "a"}}}},
                    {"name": "subset-b"}],
                "scheduleStrategy": {"type": "Adaptive", "adaptive": {
                    "rescheduleCriticalSeconds": 45, "unschedulableDuration": 600,
                    "reserveUnschedulablePods": true}}},
            "updateStrategy": {"type": "Manual",
                "manualUpdate": {"partitions": {"subset-a": 1}}},
            "revisionHistoryLimit": 12},
        "status": {"observedGeneration": 7, "readyReplicas": 4, "replicas": 5,
            "updatedReplicas": 3, "reservedPods": 1, "updatedReadyReplicas": 2,
            "collisionCount": 1, "currentRevision": "rev-old",
            "subsetReplicas": {"subset-a": 3, "subset-b": 2},
            "subsetStatuses": [
                {"name": "subset-a", "replicas": 3, "readyReplicas": 2, "partition": 1,
                    "reservedPods": 1, "conditions": [{"type": "Schedulable", "status": "False",
                        "lastTransitionTime": TIME, "reason": "reschedule",
                        "message": "reserved pods found"}]},
                {"name": "subset-b", "replicas": 2, "readyReplicas": 2}],
            "conditions": [{"type": "UnitedDeploymentUpdated", "status": "False",
                "lastTransitionTime": TIME, "reason": "UnitedDeploymentRevisionUpdating",
                "message": "updating to revision rev-new"}],
            "updateStatus": {"updatedRevision": "rev-new",
                "currentPartitions": {"subset-a": 1, "subset-b": 0}},
            "labelSelector": "app=demo"}})
}

fn has_record(obj: &Value) -> bool {
    obj["metadata"]["annotations"]
        .get(keys::CLONESET_CONVERSION_ANNOTATION)
        .is_some()
}

/// `subsetStatuses` as name → replicas (upstream's `subsetReplicasFromV1beta1Status`).
fn subset_replicas(status: &Value) -> Map<String, Value> {
    let mut m = Map::new();
    for e in status["subsetStatuses"].as_array().into_iter().flatten() {
        if !entry_name(e).is_empty() {
            m.insert(
                entry_name(e).to_owned(),
                e.get("replicas").cloned().unwrap_or(json!(0)),
            );
        }
    }
    m
}

fn entry<'a>(obj: &'a Value, name: &str) -> &'a Value {
    obj["status"]["subsetStatuses"]
        .as_array()
        .and_then(|l| l.iter().find(|e| entry_name(e) == name))
        .unwrap_or(&Value::Null)
}

fn typed_alpha(obj: &Value) -> v1alpha1::UnitedDeployment {
    serde_json::from_value(obj.clone()).expect("typed v1alpha1 UnitedDeployment")
}

fn typed_beta(obj: &Value) -> v1beta1::UnitedDeployment {
    serde_json::from_value(obj.clone()).expect("typed v1beta1 UnitedDeployment")
}

// ---- upstream's cases ----

#[test]
fn round_trip_for_every_template_kind() {
    for kind in [
        "statefulSetTemplate",
        "advancedStatefulSetTemplate",
        "cloneSetTemplate",
        "deploymentTemplate",
    ] {
        let ud = ud_for_template(template(kind));
        let dst = convert(&ud, BETA).expect("to v1beta1");
        assert_eq!(dst["metadata"]["name"], "demo", "{kind}");
        assert_eq!(dst["apiVersion"], BETA);
        assert_eq!(dst["kind"], "UnitedDeployment");
        assert_eq!(dst["spec"]["updateStrategy"]["type"], "Manual");
        assert_eq!(
            dst["spec"]["updateStrategy"]["manualUpdate"]["partitions"],
            json!({"subset-a": 1})
        );
        assert_eq!(dst["status"]["updatedRevision"], "rev-new");
        assert_eq!(
            dst["status"]["subsetStatuses"].as_array().map(Vec::len),
            Some(2)
        );
        assert_eq!(
            Value::Object(subset_replicas(&dst["status"])),
            json!({"subset-a": 3, "subset-b": 2})
        );
        let typed = typed_beta(&dst);
        assert!(typed.spec.topology.schedule_strategy.is_adaptive());
        let t = &typed.spec.template;
        let set = match kind {
            "statefulSetTemplate" => t.stateful_set_template.is_some(),
            "advancedStatefulSetTemplate" => t.advanced_stateful_set_template.is_some(),
            "cloneSetTemplate" => t.clone_set_template.is_some(),
            _ => t.deployment_template.is_some(),
        };
        assert!(set, "{kind} kept");
        assert!(dst["status"].get("subsetReplicas").is_none());
        assert!(dst["status"].get("updateStatus").is_none());

        let back = convert(&dst, ALPHA).expect("to v1alpha1");
        assert_eq!(back["apiVersion"], ALPHA);
        assert_eq!(back["kind"], "UnitedDeployment");
        assert_eq!(back, ud, "{kind}: exact round trip");

        // Upstream's mapping alone round-trips this object; so does ours.
        assert_eq!(
            to_v1alpha1(&to_v1beta1(&ud)),
            ud,
            "{kind}: plain round trip"
        );
        assert!(!has_record(&dst), "{kind}: no record needed");
    }
}

#[test]
fn to_v1beta1_merges_the_legacy_status_into_subset_statuses() {
    let mut ud = ud_for_template(template("deploymentTemplate"));
    ud["status"]["subsetReplicas"] = json!({"subset-a": 5, "subset-c": 1});
    ud["status"]["updateStatus"]["currentPartitions"] = json!({"subset-a": 2, "subset-c": 3});
    let dst = convert(&ud, BETA).expect("to v1beta1");

    let a = entry(&dst, "subset-a");
    assert_eq!(a["replicas"], 5);
    assert_eq!(a["partition"], 2);
    assert_eq!(a["readyReplicas"], 2);
    assert_eq!(a["conditions"].as_array().map(Vec::len), Some(1));

    let c = entry(&dst, "subset-c");
    assert_eq!(c["replicas"], 1);
    assert_eq!(c["partition"], 3);
    assert!(c.get("conditions").is_none());

    // subset-b is in neither map: left as it was. The new entry comes last.
    assert_eq!(
        entry(&dst, "subset-b"),
        &json!({"name": "subset-b", "replicas": 2, "readyReplicas": 2})
    );
    let names: Vec<&str> = dst["status"]["subsetStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(entry_name)
        .collect();
    assert_eq!(names, ["subset-a", "subset-b", "subset-c"]);

    // The maps disagreed with subsetStatuses: the record brings them back.
    assert!(has_record(&dst));
    assert_eq!(convert(&dst, ALPHA).expect("back"), ud);
}

#[test]
fn to_v1alpha1_builds_subset_replicas_from_the_named_entries() {
    let src = json!({"apiVersion": BETA, "kind": "UnitedDeployment",
        "status": {"subsetStatuses": [{"replicas": 9}, {"name": "subset-a", "replicas": 3}]}});
    let dst = convert(&src, ALPHA).expect("to v1alpha1");
    assert_eq!(dst["status"]["subsetReplicas"], json!({"subset-a": 3}));
    assert_eq!(
        dst["status"]["updateStatus"],
        json!({"currentPartitions": {"subset-a": 0}})
    );
    assert_eq!(convert(&dst, BETA).expect("back"), src);
}

#[test]
fn to_v1alpha1_leaves_subset_replicas_out_without_named_entries() {
    let src = json!({"apiVersion": BETA, "kind": "UnitedDeployment",
        "status": {"subsetStatuses": [{"replicas": 9}]}});
    let dst = convert(&src, ALPHA).expect("to v1alpha1");
    assert!(dst["status"].get("subsetReplicas").is_none());
    // Upstream still makes an UpdateStatus (there is an entry), with neither field set.
    assert_eq!(dst["status"]["updateStatus"], json!({}));
    assert_eq!(convert(&dst, BETA).expect("back"), src);
}

// ---- ours ----

#[test]
fn a_subset_in_one_map_only_gets_that_field_in_topology_then_name_order() {
    let ud = json!({"apiVersion": ALPHA, "kind": "UnitedDeployment", "metadata": {"name": "u"},
        "spec": {"topology": {"subsets": [{"name": "z"}, {"name": "b"}]}},
        "status": {"replicas": 0, "updatedReplicas": 0, "currentRevision": "",
            "subsetReplicas": {"a": 1, "b": 2, "z": 3},
            "updateStatus": {"updatedRevision": "r2", "currentPartitions": {"q": 4, "b": 1, "a": 0}}}});
    let dst = to_v1beta1(&ud);
    assert_eq!(
        dst["status"],
        json!({"replicas": 0, "updatedReplicas": 0, "currentRevision": "", "updatedRevision": "r2",
            "subsetStatuses": [
                {"name": "z", "replicas": 3},
                {"name": "b", "replicas": 2, "partition": 1},
                {"name": "a", "replicas": 1},
                {"name": "q", "partition": 4}]})
    );
    // Without a partition for z, v1alpha1 gets one of 0 back: the record restores the map.
    let beta = convert(&ud, BETA).expect("to v1beta1");
    assert_eq!(convert(&beta, ALPHA).expect("back"), ud);
}

#[test]
fn the_last_entry_of_a_name_wins_and_an_unset_field_counts_zero() {
    let src = json!({"apiVersion": BETA, "kind": "UnitedDeployment", "metadata": {"name": "u"},
        "status": {"updatedRevision": "r", "subsetStatuses": [
            {"name": "a", "replicas": 1}, {"name": "a", "partition": 2}]}});
    let dst = to_v1alpha1(&src);
    assert_eq!(dst["status"]["subsetReplicas"], json!({"a": 0}));
    assert_eq!(
        dst["status"]["updateStatus"],
        json!({"updatedRevision": "r", "currentPartitions": {"a": 2}})
    );
    let exact = convert(&convert(&src, ALPHA).expect("to"), BETA).expect("back");
    assert_eq!(exact, src);
}

#[test]
fn update_status_only_with_a_revision_or_subset_statuses() {
    let bare = json!({"apiVersion": BETA, "kind": "UnitedDeployment",
        "status": {"replicas": 0, "updatedReplicas": 0, "currentRevision": ""}});
    let a = to_v1alpha1(&bare);
    assert!(a["status"].get("updateStatus").is_none());
    assert!(a["status"].get("subsetReplicas").is_none());
    assert_eq!(to_v1beta1(&a), bare);

    let mut rev = bare.clone();
    rev["status"]["updatedRevision"] = json!("r1");
    let a = to_v1alpha1(&rev);
    assert_eq!(
        a["status"]["updateStatus"],
        json!({"updatedRevision": "r1"})
    );
    assert!(a["status"].get("updatedRevision").is_none());
    assert_eq!(to_v1beta1(&a), rev);

    let no_status = json!({"apiVersion": ALPHA, "kind": "UnitedDeployment", "spec": {}});
    let b = convert(&no_status, BETA).expect("to v1beta1");
    assert!(b.get("status").is_none());
    assert!(!has_record(&b));
    assert_eq!(convert(&b, ALPHA).expect("back"), no_status);
}

/// An upstream-style v1beta1 object: a v1beta1 CloneSet spec in the template.
fn beta_cloneset_ud() -> Value {
    json!({"apiVersion": BETA, "kind": "UnitedDeployment",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
            "template": {"cloneSetTemplate": {"metadata": {"labels": {"app": "web"}},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": pod(),
                    "scaleStrategy": {"enablePVCReuse": true, "excludePreparingDelete": true},
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                        "podUpdatePolicy": "InPlaceIfPossible", "partition": 1,
                        "maxUnavailable": "50%"}}}}},
            "topology": {"subsets": [{"name": "a"}, {"name": "b"}]},
            "updateStrategy": {"type": "Manual", "manualUpdate": {}}},
        "status": {"replicas": 4, "updatedReplicas": 2, "currentRevision": "r1",
            "updatedRevision": "r2",
            "subsetStatuses": [{"name": "a", "replicas": 2, "partition": 1},
                {"name": "b", "replicas": 2}]}})
}

#[test]
fn the_clone_set_template_converts_as_a_cloneset() {
    let beta = beta_cloneset_ud();
    typed_beta(&beta);
    let alpha = convert(&beta, ALPHA).expect("to v1alpha1");
    let t = &alpha["spec"]["template"]["cloneSetTemplate"];
    assert_eq!(
        t["spec"]["updateStrategy"],
        json!({"type": "InPlaceIfPossible", "partition": 1, "maxUnavailable": "50%"}),
        "v1alpha1's flat update strategy"
    );
    assert_eq!(
        t["spec"]["scaleStrategy"],
        json!({}),
        "PVCs reused: no disablePVCReuse"
    );
    assert_eq!(
        t["metadata"]["labels"][keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL],
        "true"
    );
    assert_eq!(
        t["spec"]["template"],
        beta["spec"]["template"]["cloneSetTemplate"]["spec"]["template"]
    );
    assert_eq!(alpha["spec"]["topology"], beta["spec"]["topology"]);
    assert_eq!(alpha["status"]["subsetReplicas"], json!({"a": 2, "b": 2}));
    assert_eq!(
        alpha["status"]["updateStatus"],
        json!({"updatedRevision": "r2", "currentPartitions": {"a": 1, "b": 0}})
    );
    let typed = typed_alpha(&alpha);
    let spec = typed
        .spec
        .template
        .clone_set_template
        .expect("template")
        .spec;
    assert_eq!(
        spec.update_strategy.partition,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    assert_eq!(convert(&alpha, BETA).expect("back"), beta);
}

/// A release-shaped v1alpha1 template: every flat field reads in v1beta1 under
/// `rollingUpdate`, and comes back as it was, with no record.
#[test]
fn a_release_template_converts_both_ways_without_loss() {
    let mut ud = ud_for_template(template("cloneSetTemplate"));
    let t = &mut ud["spec"]["template"]["cloneSetTemplate"];
    t["metadata"]["annotations"] =
        json!({keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION: "2", "keep": "me"});
    t["spec"]["updateStrategy"] = json!({"type": "InPlaceIfPossible", "partition": 2,
        "maxUnavailable": 1, "maxSurge": "10%", "paused": true,
        "priorityStrategy": {"weightPriority": [{"weight": 10,
            "matchSelector": {"matchLabels": {"x": "y"}}}]},
        "scatterStrategy": [{"key": "zone", "value": "a"}],
        "inPlaceUpdateStrategy": {"gracePeriodSeconds": 5}});
    t["spec"]["scaleStrategy"] = json!({"disablePVCReuse": true, "maxUnavailable": 1});
    typed_alpha(&ud);
    let beta = convert(&ud, BETA).expect("to v1beta1");
    let bt = &beta["spec"]["template"]["cloneSetTemplate"];
    assert_eq!(
        bt["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible",
            "partition": 2, "maxUnavailable": 1, "maxSurge": "10%", "paused": true,
            "priorityStrategy": {"weightPriority": [{"weight": 10,
                "matchSelector": {"matchLabels": {"x": "y"}}}]},
            "scatterStrategy": [{"key": "zone", "value": "a"}],
            "inPlaceUpdateStrategy": {"gracePeriodSeconds": 5,
                "imagePreDownloadParallelism": 2}}})
    );
    assert_eq!(
        bt["spec"]["scaleStrategy"],
        json!({"enablePVCReuse": false, "maxUnavailable": 1})
    );
    typed_beta(&beta);
    assert!(
        !has_record(&beta),
        "the plain mapping carries everything back"
    );
    assert_eq!(convert(&beta, ALPHA).expect("back"), ud);
    assert_eq!(to_v1alpha1(&to_v1beta1(&ud)), ud, "plain round trip");
}

#[test]
fn an_edit_in_v1beta1_wins_over_the_record() {
    let mut ud = ud_for_template(template("cloneSetTemplate"));
    ud["status"]["subsetReplicas"] = json!({"subset-a": 5});
    let mut beta = convert(&ud, BETA).expect("to v1beta1");
    assert!(has_record(&beta));
    beta["status"]["updatedRevision"] = json!("rev-3");
    beta["status"]["subsetStatuses"][0]["partition"] = json!(2);
    let back = convert(&beta, ALPHA).expect("back");
    assert_eq!(back["status"]["updateStatus"]["updatedRevision"], "rev-3");
    assert_eq!(
        back["status"]["updateStatus"]["currentPartitions"]["subset-a"],
        2
    );
    assert_eq!(back["status"]["subsetReplicas"]["subset-a"], 5);
}

#[test]
fn an_edit_in_v1alpha1_wins_over_the_record() {
    let mut alpha = convert(&beta_cloneset_ud(), ALPHA).expect("to v1alpha1");
    // Outside what the mapping owns: the result stays exact.
    alpha["spec"]["replicas"] = json!(6);
    let beta = convert(&alpha, BETA).expect("back");
    let mut expect = beta_cloneset_ud();
    expect["spec"]["replicas"] = json!(6);
    assert_eq!(beta, expect);
    // Inside: the edit wins.
    alpha["status"]["subsetReplicas"]["b"] = json!(3);
    let beta = convert(&alpha, BETA).expect("back");
    assert_eq!(entry(&beta, "b")["replicas"], 3);
}

#[test]
fn the_conversion_endpoint_knows_the_kind() {
    let ud = ud_for_template(template("deploymentTemplate"));
    let via = crate::converter("UnitedDeployment").expect("registered");
    assert_eq!(via(&ud, BETA), convert(&ud, BETA));
}

#[test]
fn odd_shapes_convert_and_come_back_as_they_were() {
    let statuses = [
        json!({"subsetStatuses": "x", "subsetReplicas": {"a": 1}}),
        json!({"subsetReplicas": [1], "updateStatus": null}),
        json!({"subsetStatuses": null, "subsetReplicas": {"a": 1}}),
        json!({"updateStatus": {"updatedRevision": 3, "currentPartitions": "p"}}),
        json!({"subsetStatuses": [1, null, {"name": 5, "replicas": 1}], "subsetReplicas": {"a": 2}}),
        json!({"updatedRevision": ["r"], "subsetStatuses": [{"name": "a", "replicas": "x"}]}),
        json!("not an object"),
    ];
    let templates = [
        json!({"cloneSetTemplate": "x"}),
        json!({"cloneSetTemplate": {"spec": null}}),
        json!({"cloneSetTemplate": {"spec": {"updateStrategy": "x", "scaleStrategy": 1}}}),
        json!({"cloneSetTemplate": {"metadata": "m", "spec": {"updateStrategy": {"type": null}}}}),
        json!("not an object"),
    ];
    for version in [ALPHA, BETA] {
        for status in &statuses {
            for template in &templates {
                let x = json!({"apiVersion": version, "kind": "UnitedDeployment",
                    "metadata": {"name": "u"}, "spec": {"template": template}, "status": status});
                let other = if version == ALPHA { BETA } else { ALPHA };
                let y = convert(&x, other).expect("converts");
                assert_eq!(convert(&y, version).expect("back"), x, "{x}");
            }
        }
    }
}

// ---- property: exact round trips both ways ----

fn arb_counts() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(
        proptest::collection::btree_map(
            proptest::sample::select(vec!["a", "b", "c", ""]),
            0..3i64,
            0..4,
        )
        .prop_map(|m| json!(m)),
    )
}

fn arb_entries() -> impl Strategy<Value = Option<Value>> {
    let entry = (
        proptest::option::of(proptest::sample::select(vec!["a", "b", "c", ""])),
        proptest::option::of(0..3i64),
        proptest::option::of(0..3i64),
        proptest::option::of(1..3i64),
    )
        .prop_map(|(name, replicas, partition, ready)| {
            let mut e = json!({});
            if let Some(n) = name {
                e["name"] = json!(n);
            }
            if let Some(r) = replicas {
                e["replicas"] = json!(r);
            }
            if let Some(p) = partition {
                e["partition"] = json!(p);
            }
            if let Some(r) = ready {
                e["readyReplicas"] = json!(r);
            }
            e
        });
    proptest::option::of(proptest::collection::vec(entry, 0..4).prop_map(Value::Array))
}

fn arb_alpha_status() -> impl Strategy<Value = Option<Value>> {
    let update = proptest::option::of(
        (
            proptest::option::of(proptest::sample::select(vec!["", "r1"])),
            arb_counts(),
        )
            .prop_map(|(rev, parts)| {
                let mut u = json!({});
                if let Some(r) = rev {
                    u["updatedRevision"] = json!(r);
                }
                if let Some(p) = parts {
                    u["currentPartitions"] = p;
                }
                u
            }),
    );
    proptest::option::of((arb_counts(), update, arb_entries()).prop_map(|(r, u, e)| {
        let mut s = json!({"replicas": 1, "currentRevision": "r0"});
        if let Some(r) = r {
            s["subsetReplicas"] = r;
        }
        if let Some(u) = u {
            s["updateStatus"] = u;
        }
        if let Some(e) = e {
            s["subsetStatuses"] = e;
        }
        s
    }))
}

fn arb_beta_status() -> impl Strategy<Value = Option<Value>> {
    proptest::option::of(
        (
            proptest::option::of(proptest::sample::select(vec!["", "r1"])),
            arb_entries(),
        )
            .prop_map(|(rev, e)| {
                let mut s = json!({"replicas": 1, "currentRevision": "r0"});
                if let Some(r) = rev {
                    s["updatedRevision"] = json!(r);
                }
                if let Some(e) = e {
                    s["subsetStatuses"] = e;
                }
                s
            }),
    )
}

/// CloneSet template specs, of either version's shape (or a mix) in either version.
fn arb_cloneset_spec() -> impl Strategy<Value = Option<Value>> {
    let us = vec![
        None,
        Some(json!({})),
        Some(json!({"type": "RollingUpdate"})),
        Some(json!({"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly", "partition": 1}})),
        Some(json!({"type": "OnDelete", "rollingUpdate": {"partition": 1}})),
        Some(json!({"type": "InPlaceIfPossible", "partition": 1, "paused": false})),
        Some(json!({"type": "ReCreate"})),
        Some(json!({"inPlaceUpdateStrategy": {"imagePreDownloadParallelism": "50%"}})),
    ];
    let ss = vec![
        None,
        Some(json!({})),
        Some(json!({"enablePVCReuse": true})),
        Some(json!({"disablePVCReuse": true})),
        Some(json!({"excludePreparingDelete": false})),
    ];
    proptest::option::of(
        (
            proptest::sample::select(us),
            proptest::sample::select(ss),
            proptest::option::of(proptest::sample::select(vec![
                json!({}),
                json!({"labels": {"app": "x"}}),
                json!({"labels": {keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL: "true"}}),
                json!({"annotations": {keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION: "9"}}),
            ])),
        )
            .prop_map(|(us, ss, meta)| {
                let mut t = json!({"spec": {"selector": {}, "template": {}}});
                if let Some(us) = us {
                    t["spec"]["updateStrategy"] = us;
                }
                if let Some(ss) = ss {
                    t["spec"]["scaleStrategy"] = ss;
                }
                if let Some(m) = meta {
                    t["metadata"] = m;
                }
                t
            }),
    )
}

fn arb_ud(beta: bool) -> impl Strategy<Value = Value> {
    let status = if beta {
        arb_beta_status().boxed()
    } else {
        arb_alpha_status().boxed()
    };
    (
        status,
        arb_cloneset_spec(),
        proptest::option::of(proptest::collection::vec(
            proptest::sample::select(vec!["a", "b", "c"]),
            0..3,
        )),
        proptest::sample::select(vec![None, Some(json!({})), Some(json!({"x": "y"}))]),
    )
        .prop_map(move |(status, tmpl, topology, annotations)| {
            let mut ud = json!({"apiVersion": if beta { BETA } else { ALPHA },
                "kind": "UnitedDeployment", "metadata": {"name": "u"}, "spec": {"replicas": 2}});
            if let Some(a) = annotations {
                ud["metadata"]["annotations"] = a;
            }
            if let Some(t) = tmpl {
                ud["spec"]["template"] = json!({"cloneSetTemplate": t});
            }
            if let Some(names) = topology {
                let subsets: Vec<Value> = names.iter().map(|n| json!({"name": n})).collect();
                ud["spec"]["topology"] = json!({"subsets": subsets});
            }
            if let Some(s) = status {
                ud["status"] = s;
            }
            ud
        })
}

proptest! {
    #[test]
    fn v1alpha1_round_trips_exactly(x in arb_ud(false)) {
        let y = convert(&x, BETA).map_err(TestCaseError::fail)?;
        prop_assert_eq!(convert(&y, ALPHA).map_err(TestCaseError::fail)?, x);
    }

    #[test]
    fn v1beta1_round_trips_exactly(x in arb_ud(true)) {
        let y = convert(&x, ALPHA).map_err(TestCaseError::fail)?;
        prop_assert_eq!(convert(&y, BETA).map_err(TestCaseError::fail)?, x);
    }
}
