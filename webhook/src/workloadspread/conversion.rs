//! WorkloadSpread v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `apis/apps/v1alpha1/workloadspread_conversion.go`.
//!
//! Two subset fields are renamed (`requiredNodeSelectorTerm` ⇄ `requiredNodeSelector`,
//! `preferredNodeSelectorTerms` ⇄ `preferredNodeSelector`), and the subset conditions of
//! `status.subsetStatuses` and of every version in `status.versionedSubsetStatuses` change type:
//! v1alpha1's own condition ⇄ `metav1.Condition`. Going to v1beta1 an empty reason becomes
//! `Unknown` and a missing message `""` (both required there); going back `observedGeneration`
//! is dropped and an empty reason or message is left out. Everything else has the same JSON.
//! What the plain mapping loses (an empty v1alpha1 reason, a condition's observedGeneration) is
//! kept by the generic engine's record, so round trips are exact.

use serde_json::{Map, Value, json};

use crate::conversion::scheme::{Owned, Scheme};

/// Subset fields: (v1alpha1 name, v1beta1 name).
const RENAMES: [(&str, &str); 2] = [
    ("requiredNodeSelectorTerm", "requiredNodeSelector"),
    ("preferredNodeSelectorTerms", "preferredNodeSelector"),
];

/// The reason v1beta1 gets when v1alpha1 has none (`metav1.Condition` requires one).
const UNKNOWN_REASON: &str = "Unknown";

const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "subsets"]),
    Owned::Value(&["status", "subsetStatuses"]),
    Owned::Value(&["status", "versionedSubsetStatuses"]),
    Owned::Shape(&["metadata", "annotations"]),
];

/// WorkloadSpread v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one WorkloadSpread to `desired` (`v1alpha1` or `v1beta1`, with or without the
/// group).
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

/// Which way a mapping goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    Alpha,
    Beta,
}

/// Plain v1alpha1 → v1beta1 mapping.
fn map_to_v1beta1(src: &Value) -> Value {
    map(src, To::Beta)
}

/// Plain v1beta1 → v1alpha1 mapping.
fn map_to_v1alpha1(src: &Value) -> Value {
    map(src, To::Alpha)
}

fn map(src: &Value, to: To) -> Value {
    let mut out = src.clone();
    if let Some(Value::Array(subsets)) = out.pointer_mut("/spec/subsets") {
        for subset in subsets.iter_mut().filter_map(Value::as_object_mut) {
            rename_subset_fields(subset, to);
        }
    }
    if let Some(Value::Array(statuses)) = out.pointer_mut("/status/subsetStatuses") {
        map_subset_statuses(statuses, to);
    }
    if let Some(Value::Object(versions)) = out.pointer_mut("/status/versionedSubsetStatuses") {
        for statuses in versions.values_mut() {
            if let Value::Array(statuses) = statuses {
                map_subset_statuses(statuses, to);
            }
        }
    }
    out
}

fn rename_subset_fields(subset: &mut Map<String, Value>, to: To) {
    for (alpha, beta) in RENAMES {
        let (from, into) = match to {
            To::Alpha => (beta, alpha),
            To::Beta => (alpha, beta),
        };
        if let Some(v) = subset.remove(from) {
            subset.insert(into.to_owned(), v);
        }
    }
}

fn map_subset_statuses(statuses: &mut [Value], to: To) {
    for status in statuses.iter_mut().filter_map(Value::as_object_mut) {
        let Some(Value::Array(conditions)) = status.get_mut("conditions") else {
            continue;
        };
        for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
            match to {
                To::Beta => condition_to_meta(c),
                To::Alpha => condition_to_alpha(c),
            }
        }
    }
}

/// Whether a string field is missing, `null` or empty (Go reads all three as "").
fn blank(c: &Map<String, Value>, key: &str) -> bool {
    match c.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    }
}

/// v1alpha1 condition → `metav1.Condition`: reason and message are required there.
/// A missing lastTransitionTime stays missing (Go writes `null`, which the API server drops
/// for a non-nullable field anyway).
fn condition_to_meta(c: &mut Map<String, Value>) {
    if blank(c, "reason") {
        c.insert("reason".to_owned(), json!(UNKNOWN_REASON));
    }
    if blank(c, "message") {
        c.insert("message".to_owned(), json!(""));
    }
}

/// `metav1.Condition` → v1alpha1 condition: no observedGeneration, empty strings left out.
fn condition_to_alpha(c: &mut Map<String, Value>) {
    c.remove("observedGeneration");
    for key in ["reason", "message"] {
        if blank(c, key) {
            c.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps::{v1alpha1, v1beta1};
    use kruise_api::keys;
    use proptest::prelude::*;

    const ALPHA: &str = "apps.kruise.io/v1alpha1";
    const BETA: &str = "apps.kruise.io/v1beta1";
    const T: &str = "2024-06-01T10:00:00Z";

    /// Upstream's "all fields populated with node selectors and conditions" v1alpha1 object.
    fn alpha() -> Value {
        json!({"apiVersion": ALPHA, "kind": "WorkloadSpread",
            "metadata": {"name": "ws-test", "namespace": "default"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "my-deploy"},
                "targetFilter": {"replicasPathList": ["spec.replicas"]},
                "subsets": [{"name": "zone-a",
                    "requiredNodeSelectorTerm": {"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["a"]}]},
                    "preferredNodeSelectorTerms": [{"weight": 10, "preference": {}}],
                    "maxReplicas": 5}],
                "scheduleStrategy": {"type": "Adaptive", "adaptive":
                    {"disableSimulationSchedule": true, "rescheduleCriticalSeconds": 30}}},
            "status": {"observedGeneration": 3, "subsetStatuses": [{"name": "zone-a",
                "replicas": 2, "missingReplicas": 1, "conditions": [{"type": "Schedulable",
                    "status": "False", "reason": "InsufficientResources", "message": "no CPU",
                    "lastTransitionTime": T}]}]}})
    }

    /// Upstream's "all fields populated - field renames reversed" v1beta1 object.
    fn beta() -> Value {
        json!({"apiVersion": BETA, "kind": "WorkloadSpread",
            "metadata": {"name": "ws-test", "namespace": "default"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "CloneSet", "name": "cs"},
                "subsets": [{"name": "zone-b",
                    "requiredNodeSelector": {"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["b"]}]},
                    "preferredNodeSelector": [{"weight": 5, "preference": {}}]}]},
            "status": {"observedGeneration": 7, "subsetStatuses": [{"name": "zone-b",
                "replicas": 0, "missingReplicas": 0, "conditions": [{"type": "Schedulable",
                    "status": "True", "reason": "OK", "message": "all good",
                    "lastTransitionTime": T, "observedGeneration": 7}]}]}})
    }

    fn to(obj: &Value, version: &str) -> Value {
        convert(obj, version).expect("converts")
    }

    fn record(obj: &Value) -> Option<&Value> {
        obj.pointer("/metadata/annotations")
            .and_then(|a| a.get(keys::CLONESET_CONVERSION_ANNOTATION))
    }

    #[test]
    fn upstream_convert_to_renames_the_subset_fields_and_maps_the_conditions() {
        let b = to(&alpha(), BETA);
        assert_eq!(b["apiVersion"], BETA);
        let subset = &b["spec"]["subsets"][0];
        assert_eq!(
            subset["requiredNodeSelector"]["matchExpressions"][0]["key"],
            "zone"
        );
        assert_eq!(
            subset["preferredNodeSelector"].as_array().map(Vec::len),
            Some(1)
        );
        assert!(subset.get("requiredNodeSelectorTerm").is_none());
        assert!(subset.get("preferredNodeSelectorTerms").is_none());
        assert_eq!(subset["maxReplicas"], 5);
        // Adaptive and targetFilter carry over unchanged (the v1alpha1 webhook refuses them).
        assert_eq!(
            b["spec"]["scheduleStrategy"],
            alpha()["spec"]["scheduleStrategy"]
        );
        assert_eq!(b["spec"]["targetFilter"], alpha()["spec"]["targetFilter"]);
        assert_eq!(b["status"]["observedGeneration"], 3);
        let c = &b["status"]["subsetStatuses"][0]["conditions"][0];
        assert_eq!(
            *c,
            json!({"type": "Schedulable", "status": "False", "reason": "InsufficientResources",
                "message": "no CPU", "lastTransitionTime": T})
        );
        // Lossless here: no record, and the typed v1beta1 reads it.
        assert!(record(&b).is_none());
        let typed: v1beta1::WorkloadSpread = serde_json::from_value(b.clone()).expect("typed");
        let term = typed.spec.subsets[0].required_node_selector.as_ref();
        assert_eq!(
            term.and_then(|t| t.match_expressions.as_ref())
                .map(|e| e[0].key.as_str()),
            Some("zone")
        );
        assert_eq!(typed.spec.target_reference.name, "my-deploy");
        assert_eq!(to(&b, ALPHA), alpha());
    }

    #[test]
    fn upstream_convert_from_reverses_the_renames_and_drops_observed_generation() {
        let a = to(&beta(), ALPHA);
        assert_eq!(a["apiVersion"], ALPHA);
        let subset = &a["spec"]["subsets"][0];
        assert_eq!(
            subset["requiredNodeSelectorTerm"]["matchExpressions"][0]["key"],
            "zone"
        );
        assert_eq!(
            subset["preferredNodeSelectorTerms"],
            json!([{"weight": 5, "preference": {}}])
        );
        assert!(subset.get("requiredNodeSelector").is_none());
        assert!(subset.get("preferredNodeSelector").is_none());
        assert_eq!(a["status"]["observedGeneration"], 7);
        assert_eq!(
            a["status"]["subsetStatuses"][0]["conditions"][0],
            json!({"type": "Schedulable", "status": "True", "reason": "OK",
                "message": "all good", "lastTransitionTime": T})
        );
        let typed: v1alpha1::WorkloadSpread = serde_json::from_value(a.clone()).expect("typed");
        assert_eq!(typed.spec.subsets[0].preferred_node_selector_terms.len(), 1);
        // The dropped observedGeneration is recorded and comes back.
        assert!(record(&a).is_some());
        assert_eq!(to(&a, BETA), beta());
    }

    #[test]
    fn an_empty_alpha_reason_becomes_unknown_and_round_trips() {
        let a = json!({"apiVersion": ALPHA, "kind": "WorkloadSpread",
            "metadata": {"name": "ws-noreason"},
            "status": {"subsetStatuses": [{"name": "s1", "replicas": 0, "missingReplicas": 0,
                "conditions": [{"type": "Schedulable", "status": "True", "reason": ""}]}]}});
        let b = to(&a, BETA);
        let c = &b["status"]["subsetStatuses"][0]["conditions"][0];
        assert_eq!(c["reason"], "Unknown");
        assert_eq!(c["message"], "");
        assert!(c.get("lastTransitionTime").is_none());
        assert_eq!(to(&b, ALPHA), a);
    }

    #[test]
    fn versioned_subset_statuses_map_per_version() {
        let a = json!({"apiVersion": ALPHA, "kind": "WorkloadSpread",
            "metadata": {"name": "ws-versioned"},
            "status": {"versionedSubsetStatuses": {
                "v1": [{"name": "zone-a", "replicas": 1, "missingReplicas": -1,
                    "conditions": [{"type": "Schedulable", "status": "True", "reason": "OK"}]}],
                "v2": [{"name": "zone-a", "replicas": 0, "missingReplicas": -1,
                    "conditions": [{"type": "Schedulable", "status": "False"}]}]}}});
        let b = to(&a, BETA);
        let v = &b["status"]["versionedSubsetStatuses"];
        assert_eq!(v["v1"][0]["conditions"][0]["reason"], "OK");
        assert_eq!(v["v2"][0]["conditions"][0]["reason"], "Unknown");
        assert_eq!(to(&b, ALPHA), a);

        let b = json!({"apiVersion": BETA, "kind": "WorkloadSpread",
            "metadata": {"name": "ws-v"},
            "status": {"versionedSubsetStatuses": {"v2": [{"name": "zone-a", "replicas": 0,
                "missingReplicas": 0, "conditions": [{"type": "Schedulable", "status": "False",
                "reason": "Drained", "message": "no nodes", "lastTransitionTime": T,
                "observedGeneration": 2}]}]}}});
        let a = to(&b, ALPHA);
        assert_eq!(
            a["status"]["versionedSubsetStatuses"]["v2"][0]["conditions"][0],
            json!({"type": "Schedulable", "status": "False", "reason": "Drained",
                "message": "no nodes", "lastTransitionTime": T})
        );
        assert_eq!(to(&a, BETA), b);
    }

    #[test]
    fn absent_parts_stay_absent() {
        for (version, other) in [(ALPHA, BETA), (BETA, ALPHA)] {
            let x = json!({"apiVersion": version, "kind": "WorkloadSpread",
                "metadata": {"name": "ws-nil"},
                "spec": {"subsets": [{"name": "s1"}]},
                "status": {"subsetStatuses": [{"name": "zone-a", "replicas": 1,
                    "missingReplicas": 0}]}});
            let y = to(&x, other);
            let mut expect = x.clone();
            expect["apiVersion"] = json!(other);
            assert_eq!(y, expect, "{version} → {other}");
            // Go writes a nil subsets list as null.
            let x = json!({"apiVersion": version, "kind": "WorkloadSpread",
                "metadata": {"name": "ws-no-subsets"}, "spec": {"subsets": null}});
            assert_eq!(to(&x, other)["spec"]["subsets"], Value::Null);
        }
    }

    #[test]
    fn an_edit_in_v1alpha1_wins_over_the_record() {
        let mut a = to(&beta(), ALPHA);
        a["status"]["subsetStatuses"][0]["conditions"][0]["message"] = json!("drained");
        let b = to(&a, BETA);
        let c = &b["status"]["subsetStatuses"][0]["conditions"][0];
        assert_eq!(c["message"], "drained");
        // The record no longer matches: v1alpha1's plain mapping, without observedGeneration.
        assert!(c.get("observedGeneration").is_none());
        assert_eq!(
            b["spec"]["subsets"][0]["requiredNodeSelector"],
            beta()["spec"]["subsets"][0]["requiredNodeSelector"]
        );
    }

    #[test]
    fn an_edit_in_v1beta1_wins_over_the_record() {
        let mut a = alpha();
        a["status"]["subsetStatuses"][0]["conditions"][0]
            .as_object_mut()
            .map(|c| c.remove("reason"));
        let mut b = to(&a, BETA);
        assert!(record(&b).is_some());
        b["spec"]["subsets"][0]["maxReplicas"] = json!("50%");
        let back = to(&b, ALPHA);
        assert_eq!(back["spec"]["subsets"][0]["maxReplicas"], "50%");
        assert_eq!(
            back["status"]["subsetStatuses"][0]["conditions"][0]["reason"],
            "Unknown"
        );
    }

    #[test]
    fn upstream_round_trip_is_exact() {
        let a = json!({"apiVersion": ALPHA, "kind": "WorkloadSpread",
            "metadata": {"name": "ws-rt", "namespace": "default", "labels": {"env": "prod"}},
            "spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                    "name": "cs-rt"},
                "subsets": [{"name": "zone-a",
                    "requiredNodeSelectorTerm": {"matchExpressions": [{"key":
                        "topology.kubernetes.io/zone", "operator": "In",
                        "values": ["us-east-1a"]}]},
                    "preferredNodeSelectorTerms": [{"weight": 100, "preference": {
                        "matchExpressions": [{"key": "node-type", "operator": "In",
                            "values": ["fast"]}]}}],
                    "maxReplicas": 3}],
                "scheduleStrategy": {"type": "Fixed"}},
            "status": {"observedGeneration": 5, "subsetStatuses": [{"name": "zone-a",
                "replicas": 3, "missingReplicas": 0, "conditions": [{"type": "Schedulable",
                    "status": "True", "reason": "Sufficient",
                    "message": "all nodes available"}]}]}});
        let b = to(&a, BETA);
        assert_eq!(to(&b, ALPHA), a);
        assert_eq!(to(&to(&beta(), ALPHA), BETA), beta());
    }

    #[test]
    fn registered_by_kind() {
        assert!(crate::converter("WorkloadSpread").is_some());
    }

    fn arb_condition(beta: bool) -> impl Strategy<Value = Value> {
        (
            prop_oneof![Just(None), Just(Some(json!(""))), Just(Some(json!("OK")))],
            prop_oneof![Just(None), Just(Some(json!(""))), Just(Some(json!("m")))],
            prop_oneof![Just(None), Just(Some(json!(T))), Just(Some(Value::Null))],
            prop_oneof![Just(None), Just(Some(json!(0))), Just(Some(json!(4)))],
        )
            .prop_map(move |(reason, message, ltt, generation)| {
                let mut c = json!({"type": "Schedulable", "status": "True"});
                for (k, v) in [
                    ("reason", reason),
                    ("message", message),
                    ("lastTransitionTime", ltt),
                    ("observedGeneration", generation.filter(|_| beta)),
                ] {
                    if let Some(v) = v {
                        c[k] = v;
                    }
                }
                c
            })
    }

    fn arb_statuses(beta: bool) -> impl Strategy<Value = Value> {
        proptest::collection::vec(
            proptest::option::of(proptest::collection::vec(arb_condition(beta), 0..3)),
            0..3,
        )
        .prop_map(|subsets| {
            let list = subsets.into_iter().enumerate().map(|(i, conds)| {
                let mut s = json!({"name": format!("s{i}"), "replicas": 1, "missingReplicas": 0});
                if let Some(c) = conds {
                    s["conditions"] = Value::Array(c);
                }
                s
            });
            Value::Array(list.collect())
        })
    }

    fn arb_ws() -> impl Strategy<Value = Value> {
        any::<bool>()
            .prop_flat_map(|beta| {
                let subset = (any::<bool>(), any::<bool>()).prop_map(move |(r, p)| {
                    let names = RENAMES.map(|(a, b)| if beta { b } else { a });
                    let mut s = json!({"name": "a", "tolerations": [{"key": "k"}]});
                    if r {
                        s[names[0]] = json!({"matchFields": []});
                    }
                    if p {
                        s[names[1]] = json!([{"weight": 1, "preference": {}}]);
                    }
                    s
                });
                (
                    Just(beta),
                    proptest::option::of(proptest::collection::vec(subset, 0..3)),
                    proptest::option::of(arb_statuses(beta)),
                    proptest::option::of(arb_statuses(beta)),
                    prop_oneof![
                        Just(None),
                        Just(Some(json!({}))),
                        Just(Some(json!({"x": "y"})))
                    ],
                )
            })
            .prop_map(|(beta, subsets, statuses, versioned, annotations)| {
                let mut obj = json!({"apiVersion": if beta { BETA } else { ALPHA },
                "kind": "WorkloadSpread", "metadata": {"name": "ws"},
                "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "d"}}});
                if let Some(a) = annotations {
                    obj["metadata"]["annotations"] = a;
                }
                if let Some(s) = subsets {
                    obj["spec"]["subsets"] = Value::Array(s);
                }
                if statuses.is_some() || versioned.is_some() {
                    obj["status"] = json!({"observedGeneration": 1});
                }
                if let Some(s) = statuses {
                    obj["status"]["subsetStatuses"] = s;
                }
                if let Some(v) = versioned {
                    obj["status"]["versionedSubsetStatuses"] = json!({"rev-1": v});
                }
                obj
            })
    }

    proptest! {
        #[test]
        fn workloadspread_round_trips_exactly(x in arb_ws()) {
            let own = x["apiVersion"].as_str().unwrap_or_default().to_owned();
            let other = if own == ALPHA { BETA } else { ALPHA };
            let y = convert(&x, other).map_err(TestCaseError::fail)?;
            let back = convert(&y, &own).map_err(TestCaseError::fail)?;
            prop_assert_eq!(back, x);
        }
    }
}
