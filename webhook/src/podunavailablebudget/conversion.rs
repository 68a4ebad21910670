//! PodUnavailableBudget v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `apis/policy/v1alpha1/podunavailablebudget_conversion.go`.
//!
//! v1alpha1 → v1beta1: the `kruise.io/pub-protect-operations` annotation (a comma list) becomes
//! `spec.protectOperations` and `pub.kruise.io/protect-total-replicas` becomes
//! `spec.protectTotalReplicas`; the annotations stay, as upstream's. A value that does not parse
//! fails the conversion, as upstream's `ConvertTo` does.
//!
//! v1beta1 → v1alpha1: the two fields become the annotations again (an unset field removes
//! its annotation) and `spec.ignoredPodSelector`, which v1alpha1 cannot say, is dropped, as
//! upstream's; the generic engine keeps it in its record so round trips are exact.

use serde_json::{Map, Value, json};

use crate::conversion::scheme::{Owned, Scheme, set_annotation};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PubOperation;

const OPERATIONS: &str = keys::PUB_PROTECT_OPERATIONS_ANNOTATION;
const TOTAL: &str = keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION;

/// `spec` fields only v1beta1 has.
const BETA_ONLY_SPEC: [&str; 3] = [
    "protectOperations",
    "protectTotalReplicas",
    "ignoredPodSelector",
];

const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "protectOperations"]),
    Owned::Value(&["spec", "protectTotalReplicas"]),
    Owned::Value(&["spec", "ignoredPodSelector"]),
    Owned::Value(&["metadata", "annotations", OPERATIONS]),
    Owned::Value(&["metadata", "annotations", TOTAL]),
    Owned::Shape(&["spec"]),
    Owned::Shape(&["metadata", "annotations"]),
    Owned::Shape(&["metadata"]),
];

/// PodUnavailableBudget v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::policy(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one PodUnavailableBudget to `desired`; a v1alpha1 object whose annotations do not
/// parse cannot become v1beta1 (upstream's `ConvertTo` fails the same way).
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    let to_beta = desired
        .strip_prefix(keys::POLICY_GROUP_PREFIX)
        .unwrap_or(desired)
        == keys::VERSION_V1BETA1;
    if to_beta && obj.get("apiVersion").and_then(Value::as_str) == Some(keys::POLICY_V1ALPHA1) {
        promoted(obj)?;
    }
    SCHEME.convert(obj, desired)
}

/// The operations of a `kruise.io/pub-protect-operations` value as upstream's conversion reads
/// it: comma-separated, blanks around an item and empty items ignored, spelling exact.
pub fn parse_protect_operations(value: &str) -> Result<Vec<PubOperation>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| PubOperation::parse(s).ok_or_else(|| format!("invalid {OPERATIONS} value {s:?}")))
        .collect()
}

/// A `pub.kruise.io/protect-total-replicas` value: `None` when empty, else a 32-bit integer.
pub fn parse_protect_total_replicas(value: &str) -> Result<Option<i32>, String> {
    if value.is_empty() {
        return Ok(None);
    }
    value
        .parse::<i32>()
        .map(Some)
        .map_err(|e| format!("failed to parse {TOTAL}: {value:?}: {e}"))
}

fn annotation<'a>(obj: &'a Value, key: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// What the two v1alpha1 annotations say, as v1beta1 fields.
fn promoted(obj: &Value) -> Result<(Vec<PubOperation>, Option<i32>), String> {
    let operations = parse_protect_operations(annotation(obj, OPERATIONS))?;
    let total = parse_protect_total_replicas(annotation(obj, TOTAL))?;
    Ok((operations, total))
}

/// The `spec` object, created when absent (or not an object).
fn spec_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    spec.as_object_mut()
}

fn remove_annotation(obj: &mut Value, key: &str) {
    if let Some(a) = obj
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        a.remove(key);
    }
}

/// Plain v1beta1 → v1alpha1, apiVersion set (no record; [`convert`] keeps one).
pub fn to_v1alpha1(src: &Value) -> Value {
    SCHEME.plain_backward(src)
}

/// Plain v1alpha1 → v1beta1. [`convert`] refuses annotations that do not parse before this
/// runs; should one reach here, what does not parse is left out.
fn map_to_v1beta1(src: &Value) -> Value {
    let mut out = src.clone();
    let operations = parse_protect_operations(annotation(src, OPERATIONS)).unwrap_or_default();
    let total = parse_protect_total_replicas(annotation(src, TOTAL))
        .ok()
        .flatten();
    if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
        for f in BETA_ONLY_SPEC {
            spec.remove(f);
        }
    }
    if !operations.is_empty()
        && let Some(spec) = spec_mut(&mut out)
    {
        spec.insert("protectOperations".to_owned(), json!(operations));
    }
    if let Some(total) = total
        && let Some(spec) = spec_mut(&mut out)
    {
        spec.insert("protectTotalReplicas".to_owned(), json!(total));
    }
    out
}

/// Plain v1beta1 → v1alpha1: the fields back into the annotations (an unset field removes
/// its annotation), `ignoredPodSelector` dropped.
fn map_to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    let spec = out.get_mut("spec").and_then(Value::as_object_mut);
    let (operations, total) = match spec {
        Some(spec) => {
            let operations = spec.remove("protectOperations");
            let total = spec.remove("protectTotalReplicas");
            spec.remove("ignoredPodSelector");
            (operations, total)
        }
        None => (None, None),
    };
    match operations.as_ref().and_then(Value::as_array) {
        Some(list) if !list.is_empty() => {
            let joined: Vec<&str> = list
                .iter()
                .filter_map(Value::as_str)
                .filter(|s| !s.is_empty())
                .collect();
            set_annotation(&mut out, OPERATIONS, joined.join(","));
        }
        _ => remove_annotation(&mut out, OPERATIONS),
    }
    match total.as_ref().and_then(Value::as_i64) {
        Some(n) => set_annotation(&mut out, TOTAL, n.to_string()),
        None => remove_annotation(&mut out, TOTAL),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALPHA: &str = keys::POLICY_V1ALPHA1;
    const BETA: &str = keys::POLICY_V1BETA1;

    fn alpha() -> Value {
        json!({"apiVersion": ALPHA, "kind": "PodUnavailableBudget",
            "metadata": {"name": "pub-demo", "namespace": "default",
                "annotations": {OPERATIONS: "DELETE,EVICT", TOTAL: "15"}},
            "spec": {"selector": {"matchLabels": {"app": "demo"}}, "maxUnavailable": "50%"},
            "status": {"observedGeneration": 2, "unavailableAllowed": 1, "currentAvailable": 3,
                "desiredAvailable": 2, "totalReplicas": 3}})
    }

    fn beta() -> Value {
        json!({"apiVersion": BETA, "kind": "PodUnavailableBudget",
            "metadata": {"name": "pub-demo", "namespace": "default",
                "annotations": {"keep": "me"}},
            "spec": {"selector": {"matchLabels": {"app": "demo"}}, "maxUnavailable": 1,
                "protectOperations": ["DELETE", "RESIZE"], "protectTotalReplicas": 9,
                "ignoredPodSelector": {"matchLabels": {"kruise.io/force-deletable": "true"}}}})
    }

    fn annotations(v: &Value) -> &Map<String, Value> {
        v["metadata"]["annotations"]
            .as_object()
            .expect("annotations")
    }

    /// Upstream `TestPodUnavailableBudgetConvertToV1beta1PromotesDeprecatedAnnotations`.
    #[test]
    fn alpha_to_beta_promotes_the_annotations() {
        let b = convert(&alpha(), BETA).expect("converts");
        assert_eq!(b["apiVersion"], BETA);
        assert_eq!(b["kind"], "PodUnavailableBudget");
        assert_eq!(b["spec"]["protectOperations"], json!(["DELETE", "EVICT"]));
        assert_eq!(b["spec"]["protectTotalReplicas"], 15);
        assert_eq!(b["spec"]["maxUnavailable"], "50%");
        // The annotations stay, as upstream's copy of the ObjectMeta keeps them.
        assert_eq!(annotations(&b)[OPERATIONS], "DELETE,EVICT");
        assert_eq!(b["status"], alpha()["status"]);
        let typed: kruise_api::policy::v1beta1::PodUnavailableBudget =
            serde_json::from_value(b.clone()).expect("typed v1beta1");
        assert_eq!(
            typed.spec.protect_operations,
            vec![PubOperation::Delete, PubOperation::Evict]
        );
        assert_eq!(typed.spec.protect_total_replicas, Some(15));
        assert_eq!(convert(&b, ALPHA).expect("back"), alpha());
    }

    /// Upstream `TestPodUnavailableBudgetConvertFromV1beta1BackfillsDeprecatedAnnotations`.
    #[test]
    fn beta_to_alpha_backfills_the_annotations_and_drops_ignored_pod_selector() {
        let a = convert(&beta(), ALPHA).expect("converts");
        assert_eq!(a["apiVersion"], ALPHA);
        assert_eq!(a["kind"], "PodUnavailableBudget");
        let ann = annotations(&a);
        assert_eq!(ann[OPERATIONS], "DELETE,RESIZE");
        assert_eq!(ann[TOTAL], "9");
        assert_eq!(ann["keep"], "me");
        for f in BETA_ONLY_SPEC {
            assert!(a["spec"].get(f).is_none(), "spec.{f} left in v1alpha1");
        }
        assert!(a["spec"].get("targetRef").is_none());
        assert!(a["spec"].get("minAvailable").is_none());
        assert!(
            ann.contains_key(keys::CLONESET_CONVERSION_ANNOTATION),
            "what v1alpha1 cannot say is recorded"
        );
        let typed: kruise_api::policy::v1alpha1::PodUnavailableBudget =
            serde_json::from_value(a.clone()).expect("typed v1alpha1");
        assert_eq!(
            typed.spec.max_unavailable,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
        );
        assert_eq!(convert(&a, BETA).expect("back"), beta());
    }

    /// Upstream `TestPodUnavailableBudgetConvertFromV1beta1DropsDefaultProtectOperationsAnnotation`.
    #[test]
    fn beta_without_the_fields_removes_the_annotations() {
        let b = json!({"apiVersion": BETA, "kind": "PodUnavailableBudget",
            "metadata": {"name": "p", "annotations": {OPERATIONS: "DELETE", TOTAL: "4"}},
            "spec": {}});
        let plain = to_v1alpha1(&b);
        assert!(annotations(&plain).is_empty(), "{plain}");
        let a = convert(&b, ALPHA).expect("converts");
        assert!(annotations(&a).get(OPERATIONS).is_none());
        assert!(annotations(&a).get(TOTAL).is_none());
        assert_eq!(convert(&a, BETA).expect("back"), b);
    }

    #[test]
    fn an_annotation_that_does_not_parse_fails_the_conversion_naming_it() {
        for (key, value) in [
            (OPERATIONS, "DELETE,BOGUS"),
            (OPERATIONS, "delete"),
            (TOTAL, "abc"),
            (TOTAL, "99999999999"),
            (TOTAL, " 3"),
        ] {
            let mut a = alpha();
            a["metadata"]["annotations"][key] = json!(value);
            let err = convert(&a, BETA).expect_err(value);
            assert!(err.contains(key), "{err}");
        }
        // The other way never fails, and the same object converts to its own version.
        let mut a = alpha();
        a["metadata"]["annotations"][TOTAL] = json!("abc");
        assert_eq!(convert(&a, ALPHA).expect("same version"), a);
    }

    /// Upstream's fuzz seeds: blanks and empty items are ignored.
    #[test]
    fn operations_parse_as_upstreams() {
        use PubOperation::*;
        assert_eq!(parse_protect_operations(""), Ok(vec![]));
        assert_eq!(
            parse_protect_operations("DELETE, UPDATE ,EVICT"),
            Ok(vec![Delete, Update, Evict])
        );
        assert_eq!(parse_protect_operations(",,DELETE,,"), Ok(vec![Delete]));
        assert_eq!(
            parse_protect_operations("RESIZE,DELETE"),
            Ok(vec![Resize, Delete])
        );
        assert!(parse_protect_operations("BOGUS").is_err());
        assert_eq!(parse_protect_total_replicas("+15"), Ok(Some(15)));
        assert_eq!(parse_protect_total_replicas(""), Ok(None));
        let mut a = alpha();
        a["metadata"]["annotations"][OPERATIONS] = json!(" DELETE,,EVICT ");
        let b = convert(&a, BETA).expect("converts");
        assert_eq!(b["spec"]["protectOperations"], json!(["DELETE", "EVICT"]));
        assert_eq!(convert(&b, ALPHA).expect("back"), a, "exact, by the record");
    }

    #[test]
    fn an_edit_in_alpha_wins_over_the_record() {
        let mut a = convert(&beta(), ALPHA).expect("converts");
        a["metadata"]["annotations"][OPERATIONS] = json!("EVICT");
        let b = convert(&a, BETA).expect("back");
        assert_eq!(b["spec"]["protectOperations"], json!(["EVICT"]));
        assert_eq!(b["spec"]["protectTotalReplicas"], 9);
        // An edit the mapping does not own keeps the record: ignoredPodSelector comes back.
        let mut a = convert(&beta(), ALPHA).expect("converts");
        a["spec"]["maxUnavailable"] = json!(2);
        let b = convert(&a, BETA).expect("back");
        assert_eq!(b["spec"]["maxUnavailable"], 2);
        assert_eq!(
            b["spec"]["ignoredPodSelector"],
            beta()["spec"]["ignoredPodSelector"]
        );
    }

    #[test]
    fn an_edit_in_beta_wins_over_the_record() {
        let mut b = convert(&alpha(), BETA).expect("converts");
        b["spec"]["protectTotalReplicas"] = json!(20);
        b["spec"]
            .as_object_mut()
            .expect("spec")
            .remove("protectOperations");
        let a = convert(&b, ALPHA).expect("back");
        assert_eq!(annotations(&a)[TOTAL], "20");
        assert!(annotations(&a).get(OPERATIONS).is_none());
    }

    #[test]
    fn registered_by_kind() {
        assert!(crate::converter(keys::PUB_KIND).is_some());
    }

    fn arb_operations_value() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("DELETE".to_owned()),
            Just("DELETE,EVICT".to_owned()),
            Just("DELETE, UPDATE ,EVICT".to_owned()),
            Just("RESIZE,DELETE".to_owned()),
            Just(",,DELETE,,".to_owned()),
        ]
    }

    fn arb_pub() -> impl Strategy<Value = Value> {
        let ops = proptest::sample::subsequence(vec!["DELETE", "UPDATE", "EVICT", "RESIZE"], 0..=4);
        (
            any::<bool>(),
            proptest::option::of(arb_operations_value()),
            proptest::option::of(prop_oneof![
                Just("15".to_owned()),
                Just(String::new()),
                Just("+2".to_owned())
            ]),
            proptest::option::of(ops),
            proptest::option::of(1..50i32),
            any::<bool>(),
            prop_oneof![Just(0u8), Just(1), Just(2)],
            any::<bool>(),
        )
            .prop_map(
                |(is_beta, ann_ops, ann_total, ops, total, ignored, spec, extra_ann)| {
                    let mut obj = json!({"apiVersion": if is_beta { BETA } else { ALPHA },
                        "kind": "PodUnavailableBudget", "metadata": {"name": "p"}});
                    if extra_ann {
                        obj["metadata"]["annotations"] = json!({"x": "y"});
                    }
                    if let Some(v) = ann_ops {
                        set_annotation(&mut obj, OPERATIONS, v);
                    }
                    if let Some(v) = ann_total {
                        set_annotation(&mut obj, TOTAL, v);
                    }
                    match spec {
                        0 => {}
                        1 => obj["spec"] = json!({}),
                        _ => {
                            obj["spec"] = json!({"targetRef": {"apiVersion": "apps/v1",
                            "kind": "Deployment", "name": "d"}, "minAvailable": "50%"})
                        }
                    }
                    if is_beta {
                        if let Some(ops) = ops {
                            obj["spec"]["protectOperations"] = json!(ops);
                        }
                        if let Some(t) = total {
                            obj["spec"]["protectTotalReplicas"] = json!(t);
                        }
                        if ignored {
                            obj["spec"]["ignoredPodSelector"] = json!({"matchLabels": {"a": "b"}});
                        }
                    }
                    obj
                },
            )
    }

    proptest! {
        #[test]
        fn pub_round_trips_exactly(x in arb_pub()) {
            let own = x["apiVersion"].as_str().unwrap_or_default().to_owned();
            let other = if own == ALPHA { BETA } else { ALPHA };
            let y = convert(&x, other).map_err(TestCaseError::fail)?;
            let back = convert(&y, &own).map_err(TestCaseError::fail)?;
            prop_assert_eq!(back, x);
        }

        /// Upstream `FuzzParsePubProtectOperations`: what parses, joined, parses the same.
        #[test]
        fn operations_join_and_parse_back(v in "[A-Z ,]{0,24}|(DELETE|UPDATE|EVICT|RESIZE| |,){0,8}") {
            if let Ok(ops) = parse_protect_operations(&v) {
                let joined: Vec<&str> = ops.iter().map(|o| o.as_str()).collect();
                prop_assert_eq!(parse_protect_operations(&joined.join(",")), Ok(ops));
            }
        }
    }
}
