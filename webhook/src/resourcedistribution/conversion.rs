//! ResourceDistribution v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `apis/apps/v1alpha1/resourcedistribution_conversion.go`: `spec.targets.namespaceLabelSelector`
//! ⇄ `namespaceSelector`, and each status condition's `failedNamespace` ⇄ `failedNamespaces`.
//! Everything else is the same JSON.

use serde_json::{Map, Value};

use crate::conversion::scheme::{Owned, Scheme};

const ALPHA_SELECTOR: &str = "namespaceLabelSelector";
const BETA_SELECTOR: &str = "namespaceSelector";
const ALPHA_FAILED: &str = "failedNamespace";
const BETA_FAILED: &str = "failedNamespaces";

const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "targets", ALPHA_SELECTOR]),
    Owned::Value(&["spec", "targets", BETA_SELECTOR]),
    Owned::Value(&["status", "conditions"]),
    Owned::Shape(&["metadata", "annotations"]),
];

/// ResourceDistribution v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one ResourceDistribution to `desired`.
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

fn rename(map: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(v) = map.remove(from) {
        map.insert(to.to_owned(), v);
    }
}

/// Renames the selector and every condition's list of failed namespaces.
fn mapped(src: &Value, selector: [&str; 2], failed: [&str; 2]) -> Value {
    let mut out = src.clone();
    if let Some(targets) = out
        .pointer_mut("/spec/targets")
        .and_then(Value::as_object_mut)
    {
        rename(targets, selector[0], selector[1]);
    }
    if let Some(conditions) = out
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
            rename(c, failed[0], failed[1]);
        }
    }
    out
}

/// Plain v1alpha1 → v1beta1, apiVersion set (no record; [`convert`] keeps one).
pub fn to_v1beta1(src: &Value) -> Value {
    SCHEME.plain_forward(src)
}

/// Plain v1alpha1 → v1beta1.
fn map_to_v1beta1(src: &Value) -> Value {
    mapped(
        src,
        [ALPHA_SELECTOR, BETA_SELECTOR],
        [ALPHA_FAILED, BETA_FAILED],
    )
}

/// Plain v1beta1 → v1alpha1.
fn map_to_v1alpha1(src: &Value) -> Value {
    mapped(
        src,
        [BETA_SELECTOR, ALPHA_SELECTOR],
        [BETA_FAILED, ALPHA_FAILED],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps::{v1alpha1, v1beta1};
    use proptest::prelude::*;
    use serde_json::json;

    const ALPHA: &str = "apps.kruise.io/v1alpha1";
    const BETA: &str = "apps.kruise.io/v1beta1";

    fn alpha() -> Value {
        json!({"apiVersion": ALPHA, "kind": "ResourceDistribution",
            "metadata": {"name": "rd", "labels": {"a": "b"}},
            "spec": {
                "resource": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
                             "data": {"k": "dg=="}},
                "targets": {
                    "excludedNamespaces": {"list": [{"name": "kube-system"}]},
                    "includedNamespaces": {"list": [{"name": "ns-1"}, {"name": "ns-2"}]},
                    "namespaceLabelSelector": {"matchLabels": {"group": "one"}}}},
            "status": {"desired": 3, "succeeded": 2, "failed": 1, "observedGeneration": 4,
                "conditions": [
                    {"type": "GetResourceFailed", "status": "False", "reason": "Succeeded"},
                    {"type": "NamespaceNotExists", "status": "True", "reason": "NamespaceNotExists",
                     "lastTransitionTime": "2026-01-01T00:00:00Z",
                     "failedNamespace": ["ns-2"]}]}})
    }

    #[test]
    fn alpha_to_beta_renames_the_selector_and_the_failed_namespaces_as_upstream() {
        let b = convert(&alpha(), BETA).expect("converts");
        assert_eq!(b["apiVersion"], BETA);
        let targets = &b["spec"]["targets"];
        assert!(targets.get(ALPHA_SELECTOR).is_none());
        assert_eq!(
            targets[BETA_SELECTOR],
            json!({"matchLabels": {"group": "one"}})
        );
        assert_eq!(
            targets["includedNamespaces"],
            alpha()["spec"]["targets"]["includedNamespaces"]
        );
        assert_eq!(b["status"]["conditions"][1][BETA_FAILED], json!(["ns-2"]));
        assert!(b["status"]["conditions"][1].get(ALPHA_FAILED).is_none());
        // A plain rename round-trips by itself: no record is needed.
        assert!(b["metadata"].get("annotations").is_none());
        let typed: v1beta1::ResourceDistribution =
            serde_json::from_value(b.clone()).expect("typed");
        assert_eq!(
            typed.status.expect("status").conditions[1].failed_namespaces,
            ["ns-2"]
        );
        assert_eq!(convert(&b, ALPHA).expect("back"), alpha());
    }

    #[test]
    fn beta_to_alpha_reads_as_the_controller_reads_it() {
        let b = convert(&alpha(), BETA).expect("converts");
        let a = convert(&b, ALPHA).expect("back");
        let typed: v1alpha1::ResourceDistribution = serde_json::from_value(a).expect("typed");
        assert_eq!(
            typed
                .spec
                .targets
                .namespace_label_selector
                .match_labels
                .map(|m| m.len()),
            Some(1)
        );
        assert_eq!(
            typed.status.expect("status").conditions[1].failed_namespaces,
            ["ns-2"]
        );
    }

    #[test]
    fn an_object_without_targets_or_status_converts() {
        let a = json!({"apiVersion": ALPHA, "kind": "ResourceDistribution",
            "metadata": {"name": "rd"}, "spec": {"resource": {}, "targets": {"allNamespaces": true}}});
        let b = convert(&a, BETA).expect("converts");
        assert_eq!(b["spec"], a["spec"]);
        assert_eq!(convert(&b, ALPHA).expect("back"), a);
    }

    proptest! {
        #[test]
        fn round_trips_both_ways(
            selector in proptest::option::of("[a-z]{1,5}"),
            failed in proptest::collection::vec("[a-z]{1,5}", 0..3),
            all in any::<bool>(),
        ) {
            let mut targets = json!({"allNamespaces": all});
            if let Some(s) = &selector {
                targets[ALPHA_SELECTOR] = json!({"matchLabels": {"k": s}});
            }
            let mut cond = json!({"type": "ConflictOccurred", "status": "True"});
            if !failed.is_empty() {
                cond[ALPHA_FAILED] = json!(failed);
            }
            let a = json!({"apiVersion": ALPHA, "kind": "ResourceDistribution",
                "metadata": {"name": "rd"}, "spec": {"resource": {}, "targets": targets},
                "status": {"conditions": [cond]}});
            let b = convert(&a, BETA).expect("to beta");
            prop_assert_eq!(convert(&b, ALPHA).expect("back"), a);
            let b2 = to_v1beta1(&convert(&b, ALPHA).expect("again"));
            prop_assert_eq!(convert(&b2, BETA).expect("same"), b);
        }
    }
}
