//! Upstream's `resourcedistribution_validating_test.go` cases, and each refusal's message.

use kruise_api::features::FeatureGates;
use serde_json::{Value, json};

use super::validation::{distribution_errors, namespace_name_problem};
use crate::field::aggregate;
use crate::review::tests::{response, review_body};
use crate::{gate_refusal, handle_admission, paths};

fn secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "test-secret-1"},
        "type": "Opaque", "data": {"test": "dGVzdA=="}})
}

fn rd(resource: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ResourceDistribution",
        "metadata": {"name": "test-resource-distribution"},
        "spec": {"resource": resource, "targets": {
            "includedNamespaces": {"list": [{"name": "ns-1"}, {"name": "ns-2"}]},
            "excludedNamespaces": {"list": [{"name": "ns-3"}]},
            "namespaceLabelSelector": {"matchLabels": {"group": "one"},
                "matchExpressions": [{"key": "env", "operator": "In", "values": ["dev"]}]}}}})
}

fn errors(rd: &Value, old: Option<&Value>) -> String {
    aggregate(&distribution_errors(rd, old))
}

#[test]
fn a_secret_and_a_configmap_are_accepted() {
    assert!(distribution_errors(&rd(secret()), None).is_empty());
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "game"},
        "data": {"player_initial_lives": "3"}});
    assert!(distribution_errors(&rd(cm), None).is_empty());
}

#[test]
fn an_empty_or_unreadable_resource_is_refused_naming_the_field() {
    for resource in [Value::Null, json!({}), json!("something is wrong....!#@$")] {
        let errs = distribution_errors(&rd(resource.clone()), None);
        assert_eq!(errs.len(), 1, "{resource}: {errs:?}");
        assert!(
            errs[0].to_string().starts_with("spec.resource:"),
            "{errs:?}"
        );
    }
    assert!(errors(&rd(json!({})), None).contains("empty resource is not allowed"));
}

#[test]
fn only_a_v1_secret_or_configmap_with_a_name_is_distributable() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    let e = errors(&rd(pod), None);
    assert!(e.contains("spec.resource.kind"), "{e}");
    assert!(e.contains("only support v1 Secret and v1 ConfigMap"), "{e}");
    let wrong_group = json!({"apiVersion": "apps/v1", "kind": "Secret", "metadata": {"name": "s"}});
    assert!(errors(&rd(wrong_group), None).contains("spec.resource.kind"));
    let nameless = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {}});
    let e = errors(&rd(nameless), None);
    assert!(e.contains("spec.resource.metadata.name"), "{e}");
}

#[test]
fn an_update_may_change_targets_and_data_but_not_kind_or_name() {
    let old = rd(secret());
    let mut new = old.clone();
    new["spec"]["targets"]["includedNamespaces"]["list"]
        .as_array_mut()
        .expect("list")
        .push(json!({"name": "ns-4"}));
    new["spec"]["resource"]["data"] = json!({"test": "MWYyZDFlMmU2N2Rm"});
    assert!(distribution_errors(&new, Some(&old)).is_empty());

    // Upstream's TestResourceDistributionUpdateConflict: another name is one error.
    let mut renamed = old.clone();
    renamed["spec"]["resource"]["metadata"]["name"] = json!("test-secret-2");
    let errs = distribution_errors(&renamed, Some(&old));
    assert_eq!(errs.len(), 1, "{errs:?}");
    let e = errs[0].to_string();
    assert!(e.starts_with("spec.resource:"), "{e}");
    assert!(
        e.contains("resource apiVersion, kind, and name are immutable"),
        "{e}"
    );

    let mut rekinded = old.clone();
    rekinded["spec"]["resource"]["kind"] = json!("ConfigMap");
    assert_eq!(distribution_errors(&rekinded, Some(&old)).len(), 1);
}

#[test]
fn targets_as_upstream_counts_them() {
    // Upstream's TestValidateResourceDistributionTargets: an empty name, a namespace both
    // included and excluded, and a bad selector key: three errors.
    let mut v = rd(secret());
    v["spec"]["targets"] = json!({
        "excludedNamespaces": {"list": [{"name": "ns-1"}]},
        "includedNamespaces": {"list": [{"name": "ns-1"}, {"name": "ns-2"},
            {"name": "kube-system"}, {"name": ""}]},
        "namespaceLabelSelector": {"matchLabels": {"$#%$%": "value"}}
    });
    let errs = distribution_errors(&v, None);
    assert_eq!(errs.len(), 3, "{errs:?}");
    let e = aggregate(&errs);
    assert!(
        e.contains("spec.targets.includedNamespaces.list[3].name"),
        "{e}"
    );
    assert!(e.contains("ambiguous targets"), "{e}");
    assert!(
        e.contains("spec.targets.namespaceLabelSelector.matchLabels"),
        "{e}"
    );
}

#[test]
fn selector_operators_values_and_names_are_checked() {
    let mut v = rd(secret());
    v["spec"]["targets"]["namespaceLabelSelector"] =
        json!({"matchExpressions": [{"key": "a", "operator": "Sometimes"}]});
    let e = errors(&v, None);
    assert!(
        e.contains("spec.targets.namespaceLabelSelector.matchExpressions[0].operator"),
        "{e}"
    );
    v["spec"]["targets"]["namespaceLabelSelector"] = json!({"matchLabels": {"ok": "bad value!"}});
    assert!(errors(&v, None).contains("label value"));
    v["spec"]["targets"]["excludedNamespaces"] = json!({"list": [{"name": "Upper_Case"}]});
    assert!(errors(&v, None).contains("spec.targets.excludedNamespaces.list[0].name"));
    assert_eq!(namespace_name_problem("kube-system"), None);
    assert!(namespace_name_problem(&"a".repeat(64)).is_some());
    assert!(namespace_name_problem("-a").is_some());
}

#[test]
fn the_handler_refuses_with_422_and_the_field() {
    let mut bad = rd(secret());
    bad["spec"]["resource"]["kind"] = json!("Pod");
    let body = review_body(
        "CREATE",
        ("apps.kruise.io", "v1alpha1", "ResourceDistribution"),
        "resourcedistributions",
        Some(bad),
        None,
    );
    let out =
        response(&handle_admission(paths::VALIDATE_RESOURCEDISTRIBUTION, &body).expect("routed"));
    assert_eq!(out["allowed"], false);
    assert_eq!(out["status"]["code"], 422);
    let msg = out["status"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("spec.resource.kind"), "{msg}");
}

#[test]
fn the_gate_off_refuses_every_distribution_as_upstream() {
    let off = FeatureGates::parse("").expect("defaults");
    let refusal = gate_refusal(paths::VALIDATE_RESOURCEDISTRIBUTION, &off).expect("refused");
    let text = format!("{refusal:?}");
    assert!(
        text.contains("feature-gate ResourceDistributionGate is not enabled"),
        "{text}"
    );
    let on = FeatureGates::parse("ResourceDistributionGate=true").expect("gate");
    assert!(gate_refusal(paths::VALIDATE_RESOURCEDISTRIBUTION, &on).is_none());
}

#[test]
fn registered_on_upstreams_path_and_rules() {
    let cfg = crate::WebhookConfig::default();
    let conf = crate::configuration::validating::validating_configuration(&cfg, "ca");
    let hook = conf
        .webhooks
        .iter()
        .flatten()
        .find(|h| h.name == "vresourcedistribution.kb.io")
        .expect("registered");
    let svc = hook.client_config.service.as_ref().expect("service");
    assert_eq!(
        svc.path.as_deref(),
        Some("/validate-apps-kruise-io-v1alpha1-resourcedistribution")
    );
    let rule = &hook.rules.as_ref().expect("rules")[0];
    assert_eq!(
        rule.api_groups.as_deref(),
        Some(&["apps.kruise.io".to_owned()][..])
    );
    assert_eq!(
        rule.api_versions.as_deref(),
        Some(&["v1alpha1".to_owned()][..])
    );
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["resourcedistributions".to_owned()][..])
    );
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_owned(), "UPDATE".to_owned()][..])
    );
    assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
}
