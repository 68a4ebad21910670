//! DaemonSet defaulting and validation: one test per rule, each checking the message a user
//! sees names the field.

use serde_json::{Value, json};

use crate::review::admit;
use crate::review::tests::{response, review_body};

use super::defaults::mutate;
use super::validation::validate;

fn beta() -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "rollingUpdateType": "Standard", "partition": 0,
                "maxUnavailable": 1, "maxSurge": 0}}}})
}

fn run(op: &str, version: &str, obj: Value, old: Option<Value>) -> Value {
    let body = review_body(
        op,
        ("apps.kruise.io", version, "DaemonSet"),
        "daemonsets",
        Some(obj),
        old,
    );
    response(&admit(&body, validate))
}

fn refused(obj: Value) -> String {
    refused_op("CREATE", "v1beta1", obj, None)
}

fn refused_op(op: &str, version: &str, obj: Value, old: Option<Value>) -> String {
    let r = run(op, version, obj, old);
    assert_eq!(r["allowed"], false, "expected denial: {r}");
    assert_eq!(r["status"]["code"], 422);
    r["status"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_valid_daemonset_is_admitted_in_both_versions() {
    assert_eq!(run("CREATE", "v1beta1", beta(), None)["allowed"], true);
    let mut alpha = beta();
    alpha["apiVersion"] = json!("apps.kruise.io/v1alpha1");
    assert_eq!(run("CREATE", "v1alpha1", alpha, None)["allowed"], true);
}

#[test]
fn selector_must_match_template_labels() {
    let mut ds = beta();
    ds["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    let m = refused(ds);
    assert!(
        m.starts_with("spec.template.metadata.labels: Invalid value:"),
        "{m}"
    );
    assert!(
        m.contains("`selector` does not match template `labels`"),
        "{m}"
    );
}

#[test]
fn empty_or_missing_selector_is_refused() {
    let mut ds = beta();
    ds["spec"]["selector"] = json!({});
    assert!(refused(ds).contains("spec.selector: Invalid value: {}: empty selector"));
    let mut ds = beta();
    ds["spec"].as_object_mut().map(|s| s.remove("selector"));
    assert!(refused(ds).contains("spec.selector: Required value"));
}

#[test]
fn max_unavailable_and_max_surge_must_be_int_or_percent_in_range() {
    for (field, value, rule) in [
        (
            "maxUnavailable",
            json!("30"),
            "must be an integer or a percentage",
        ),
        (
            "maxUnavailable",
            json!(-1),
            "must be greater than or equal to 0",
        ),
        (
            "maxSurge",
            json!("120%"),
            "must be a percentage between 0% and 100%",
        ),
        ("partition", json!(-2), "must be greater than or equal to 0"),
        (
            "partition",
            json!("x%"),
            "must be an integer or a percentage",
        ),
    ] {
        let mut ds = beta();
        ds["spec"]["updateStrategy"]["rollingUpdate"][field] = value.clone();
        let m = refused(ds);
        assert!(
            m.contains(&format!(
                "spec.updateStrategy.rollingUpdate.{field}: Invalid value: {value}: {rule}"
            )),
            "{field}={value}: {m}"
        );
    }
}

#[test]
fn v1alpha1_partition_is_a_plain_count() {
    let mut ds = beta();
    ds["apiVersion"] = json!("apps.kruise.io/v1alpha1");
    ds["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = json!("50%");
    let m = refused_op("CREATE", "v1alpha1", ds, None);
    assert!(
        m.contains("spec.updateStrategy.rollingUpdate.partition: Invalid value: \"50%\": must be an integer"),
        "{m}"
    );
}

#[test]
fn max_unavailable_and_max_surge_may_not_both_be_zero() {
    let mut ds = beta();
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!("0%");
    let m = refused(ds);
    assert!(
        m.contains("spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": may not be 0 when `maxSurge` is 0"),
        "{m}"
    );
    // A surge makes a zero maxUnavailable valid.
    let mut ds = beta();
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!(0);
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] = json!(1);
    assert_eq!(run("CREATE", "v1beta1", ds, None)["allowed"], true);
}

#[test]
fn surging_needs_a_max_surge() {
    let mut ds = beta();
    ds["spec"]["updateStrategy"]["rollingUpdate"]["rollingUpdateType"] = json!("Surging");
    let m = refused(ds.clone());
    assert!(
        m.contains("spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 0: must be greater than 0 when rollingUpdateType is Surging"),
        "{m}"
    );
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] = json!("10%");
    assert_eq!(run("CREATE", "v1beta1", ds, None)["allowed"], true);
}

#[test]
fn unknown_strategy_types_are_refused_with_the_supported_values() {
    let mut ds = beta();
    ds["spec"]["updateStrategy"]["rollingUpdate"]["rollingUpdateType"] = json!("Fast");
    let m = refused(ds);
    assert!(
        m.contains("spec.updateStrategy.rollingUpdate.rollingUpdateType: Unsupported value: \"Fast\": supported values: \"Standard\", \"Surging\", \"InPlaceIfPossible\""),
        "{m}"
    );
    let mut ds = beta();
    ds["spec"]["updateStrategy"]["type"] = json!("Recreate");
    let m = refused(ds);
    assert!(
        m.contains("spec.updateStrategy.type: Unsupported value: \"Recreate\": supported values: \"RollingUpdate\", \"OnDelete\""),
        "{m}"
    );
}

#[test]
fn restart_policy_must_be_always() {
    let mut ds = beta();
    ds["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    let m = refused(ds);
    assert!(
        m.contains("spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\""),
        "{m}"
    );
}

#[test]
fn selector_is_immutable_on_update_but_the_template_is_not() {
    let old = beta();
    let mut new = beta();
    new["spec"]["selector"]["matchLabels"]["tier"] = json!("node");
    new["spec"]["template"]["metadata"]["labels"]["tier"] = json!("node");
    let m = refused_op("UPDATE", "v1beta1", new, Some(old.clone()));
    assert!(
        m.contains("spec.selector: Forbidden: field is immutable"),
        "{m}"
    );
    let mut new = beta();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
    assert_eq!(run("UPDATE", "v1beta1", new, Some(old))["allowed"], true);
}

#[test]
fn several_errors_are_all_reported() {
    let mut ds = beta();
    ds["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] = json!("abc");
    let m = refused(ds);
    assert!(m.contains("spec.template.spec.restartPolicy"), "{m}");
    assert!(
        m.contains("spec.updateStrategy.rollingUpdate.maxSurge"),
        "{m}"
    );
}

/// The object after the mutating hook: its patch applied.
fn defaulted(obj: Value) -> Value {
    let req = crate::review::Request {
        uid: "u".into(),
        operation: kube::core::admission::Operation::Create,
        group: "apps.kruise.io".into(),
        version: "v1beta1".into(),
        kind: "DaemonSet".into(),
        resource: "daemonsets".into(),
        sub_resource: None,
        namespace: Some("default".into()),
        name: "agent".into(),
        object: Some(obj.clone()),
        old_object: None,
        options: None,
        dry_run: false,
        username: "tester".to_owned(),
    };
    match mutate(&req) {
        crate::review::Outcome::Patch(patch) => {
            let mut out = obj;
            json_patch::patch(&mut out, &patch).expect("patch applies");
            out
        }
        other => panic!("expected a patch, got {other:?}"),
    }
}

#[test]
fn defaults_fill_the_rolling_update_and_the_template() {
    let mut ds = beta();
    ds["spec"]
        .as_object_mut()
        .map(|s| s.remove("updateStrategy"));
    let out = defaulted(ds);
    let ru = &out["spec"]["updateStrategy"]["rollingUpdate"];
    assert_eq!(out["spec"]["updateStrategy"]["type"], "RollingUpdate");
    assert_eq!(ru["rollingUpdateType"], "Standard");
    assert_eq!(ru["maxUnavailable"], 1);
    assert_eq!(ru["maxSurge"], 0);
    assert_eq!(ru["partition"], 0);
    assert_eq!(out["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(out["spec"]["burstReplicas"], 250);
    assert_eq!(out["spec"]["template"]["spec"]["restartPolicy"], "Always");
    // The user's own values stay.
    let mut ds = beta();
    ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] = json!("25%");
    let out = defaulted(ds);
    assert_eq!(
        out["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"],
        "25%"
    );
}

#[test]
fn on_delete_gets_no_rolling_update_defaults() {
    let mut ds = beta();
    ds["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    let out = defaulted(ds);
    assert!(out["spec"]["updateStrategy"].get("rollingUpdate").is_none());
}
