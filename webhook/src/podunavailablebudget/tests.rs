use std::collections::BTreeMap;

use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::core::admission::Operation;
use serde_json::{Value, json};

use super::PubLookup;
use super::validation::validate;
use crate::review::{Outcome, Request};

#[derive(Default)]
struct Budgets(Vec<PodUnavailableBudget>);

impl PubLookup for Budgets {
    async fn budgets(&self, _namespace: &str) -> Result<Vec<PodUnavailableBudget>, String> {
        Ok(self.0.clone())
    }
}

fn request(op: Operation, object: Value, old: Option<Value>) -> Request {
    Request {
        uid: "u".into(),
        operation: op,
        group: keys::POLICY_GROUP.into(),
        version: "v1alpha1".into(),
        kind: "PodUnavailableBudget".into(),
        resource: "podunavailablebudgets".into(),
        sub_resource: None,
        namespace: Some("ns".into()),
        name: "pub".into(),
        object: Some(object),
        old_object: old,
        options: None,
        dry_run: false,
        username: "tester".to_owned(),
    }
}

fn budget(spec: Value) -> Value {
    json!({
        "apiVersion": "policy.kruise.io/v1alpha1",
        "kind": "PodUnavailableBudget",
        "metadata": {"name": "pub", "namespace": "ns"},
        "spec": spec,
    })
}

fn good() -> Value {
    budget(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}))
}

async fn run(req: Request, others: Vec<PodUnavailableBudget>, gates: &FeatureGates) -> Outcome {
    validate(req, &Budgets(others), gates).await
}

async fn refusal(object: Value) -> String {
    match run(
        request(Operation::Create, object, None),
        Vec::new(),
        &FeatureGates::default(),
    )
    .await
    {
        Outcome::Deny { code, message, .. } => {
            assert_eq!(code, 400, "upstream answers 400: {message}");
            message
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_valid_budget_passes() {
    let out = run(
        request(Operation::Create, good(), None),
        Vec::new(),
        &FeatureGates::default(),
    )
    .await;
    assert_eq!(out, Outcome::Allow);
}

#[tokio::test]
async fn both_or_neither_bound_is_refused_naming_the_fields() {
    let m = refusal(budget(json!({"selector": {"matchLabels": {"app": "web"}}}))).await;
    assert_eq!(
        m,
        "spec.maxUnavailable, minAvailable: Required value: no maxUnavailable or minAvailable defined in PodUnavailableBudget"
    );
    let m = refusal(budget(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1, "minAvailable": 1}))).await;
    assert!(
        m.contains("maxUnavailable and minAvailable are mutually exclusive"),
        "{m}"
    );
}

#[tokio::test]
async fn percentages_over_100_and_garbage_are_refused() {
    let m = refusal(budget(
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "120%"}),
    ))
    .await;
    assert_eq!(
        m,
        r#"spec.maxUnavailable: Invalid value: "120%": must not be greater than 100%"#
    );
    let m = refusal(budget(
        json!({"selector": {"matchLabels": {"app": "web"}}, "minAvailable": "x"}),
    ))
    .await;
    assert!(
        m.starts_with("spec.minAvailable: Invalid value: \"x\""),
        "{m}"
    );
    let m = refusal(budget(
        json!({"selector": {"matchLabels": {"app": "web"}}, "minAvailable": -1}),
    ))
    .await;
    assert!(m.contains("must be greater than or equal to 0"), "{m}");
}

#[tokio::test]
async fn selector_and_target_ref_both_or_neither_or_bad() {
    let m = refusal(budget(json!({"maxUnavailable": 1}))).await;
    assert!(
        m.starts_with("spec.selector, targetRef: Required value: no selector or targetRef"),
        "{m}"
    );
    let m = refusal(budget(json!({"selector": {"matchLabels": {"a": "b"}}, "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}, "maxUnavailable": 1}))).await;
    assert!(
        m.contains("selector and targetRef are mutually exclusive"),
        "{m}"
    );
    let m = refusal(budget(json!({"selector": {}, "maxUnavailable": 1}))).await;
    assert!(m.starts_with("spec.selector: Invalid value"), "{m}");
    let m = refusal(budget(json!({"selector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]}, "maxUnavailable": 1}))).await;
    assert!(
        m.contains("spec.selector.matchExpressions[0].operator: Unsupported value"),
        "{m}"
    );
    let m = refusal(budget(
        json!({"targetRef": {"kind": "Deployment", "name": "d"}, "maxUnavailable": 1}),
    ))
    .await;
    assert!(m.starts_with("spec.targetRef: Invalid value"), "{m}");
}

#[tokio::test]
async fn selector_or_target_ref_change_is_refused() {
    let new = budget(json!({"selector": {"matchLabels": {"app": "other"}}, "maxUnavailable": 1}));
    let out = run(
        request(Operation::Update, new, Some(good())),
        Vec::new(),
        &FeatureGates::default(),
    )
    .await;
    let Outcome::Deny { message, .. } = out else {
        panic!("expected a refusal")
    };
    assert_eq!(
        message,
        "spec.selector, targetRef: Required value: selector and targetRef cannot be modified"
    );
    // Changing the bound is fine.
    let new = budget(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 2}));
    let out = run(
        request(Operation::Update, new, Some(good())),
        Vec::new(),
        &FeatureGates::default(),
    )
    .await;
    assert_eq!(out, Outcome::Allow);
}

fn other(name: &str, spec: Value) -> PodUnavailableBudget {
    let mut v = budget(spec);
    v["metadata"]["name"] = json!(name);
    serde_json::from_value(v).expect("a budget")
}

#[tokio::test]
async fn overlap_with_another_budget_is_refused_naming_it() {
    let others = vec![other(
        "first",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )];
    let out = run(
        request(Operation::Create, good(), None),
        others,
        &FeatureGates::default(),
    )
    .await;
    let Outcome::Deny { message, .. } = out else {
        panic!("expected a refusal")
    };
    assert!(
        message.starts_with("spec.selector: Invalid value")
            && message.ends_with(
                "pub.spec.selector is in conflict with other PodUnavailableBudget first"
            ),
        "{message}"
    );
    let target = |v: &str| json!({"targetRef": {"apiVersion": v, "kind": "CloneSet", "name": "web"}, "maxUnavailable": 1});
    let others = vec![other("first", target("apps.kruise.io/v1beta1"))];
    let out = run(
        request(
            Operation::Create,
            budget(target("apps.kruise.io/v1alpha1")),
            None,
        ),
        others.clone(),
        &FeatureGates::default(),
    )
    .await;
    let Outcome::Deny { message, .. } = out else {
        panic!("expected a refusal")
    };
    assert!(
        message.contains(
            "pub.spec.targetReference is in conflict with other PodUnavailableBudget first"
        ),
        "{message}"
    );
    // Its own old copy is no conflict.
    let mut same = others[0].clone();
    same.metadata.name = Some("pub".into());
    let out = run(
        request(
            Operation::Create,
            budget(target("apps.kruise.io/v1beta1")),
            None,
        ),
        vec![same],
        &FeatureGates::default(),
    )
    .await;
    assert_eq!(out, Outcome::Allow);
}

#[tokio::test]
async fn bad_annotations_are_refused_naming_them() {
    let mut v = good();
    v["metadata"]["annotations"] = json!({keys::PUB_PROTECT_OPERATIONS_ANNOTATION: "DELETE,evict"});
    let m = refusal(v).await;
    assert_eq!(
        m,
        r#"metadata.annotations[kruise.io/pub-protect-operations]: Unsupported value: "evict": supported values: "UPDATE", "DELETE", "EVICT", "RESIZE""#
    );
    let mut v = good();
    v["metadata"]["annotations"] = json!({keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION: "%%"});
    let m = refusal(v).await;
    assert!(
        m.starts_with("metadata.annotations[pub.kruise.io/protect-total-replicas]: Invalid value"),
        "{m}"
    );
}

#[tokio::test]
async fn refused_while_both_gates_are_off() {
    let gates = FeatureGates::default()
        .with(Gate::PodUnavailableBudgetDeleteGate, false)
        .with(Gate::PodUnavailableBudgetUpdateGate, false);
    let out = run(request(Operation::Create, good(), None), Vec::new(), &gates).await;
    let Outcome::Deny { code, message, .. } = out else {
        panic!("expected a refusal")
    };
    assert_eq!(code, 400);
    assert_eq!(
        message,
        "feature PodUnavailableBudget is invalid, please open via feature-gate(PodUnavailableBudgetDeleteGate, PodUnavailableBudgetUpdateGate)"
    );
    let one_on = gates.with(Gate::PodUnavailableBudgetUpdateGate, true);
    assert_eq!(
        run(
            request(Operation::Create, good(), None),
            Vec::new(),
            &one_on
        )
        .await,
        Outcome::Allow
    );
    let _ = BTreeMap::<String, String>::new();
}

#[test]
fn registered_on_upstreams_path_and_rules() {
    let cfg = crate::WebhookConfig::default();
    let conf = crate::configuration::validating::validating_configuration(&cfg, "ca");
    let hook = conf
        .webhooks
        .iter()
        .flatten()
        .find(|h| h.name == "vpodunavailablebudget.kb.io")
        .expect("registered");
    let svc = hook.client_config.service.as_ref().expect("service");
    assert_eq!(
        svc.path.as_deref(),
        Some("/validate-policy-kruise-io-podunavailablebudget")
    );
    let rule = &hook.rules.as_ref().expect("rules")[0];
    assert_eq!(
        rule.api_groups.as_deref(),
        Some(&["policy.kruise.io".to_owned()][..])
    );
    assert_eq!(
        rule.api_versions.as_deref(),
        Some(&["v1alpha1".to_owned(), "v1beta1".to_owned()][..])
    );
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["podunavailablebudgets".to_owned()][..])
    );
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_owned(), "UPDATE".to_owned()][..])
    );
    assert_eq!(hook.failure_policy.as_deref(), Some("Fail"));
}

fn beta_request(op: Operation, object: Value, old: Option<Value>) -> Request {
    Request {
        version: keys::VERSION_V1BETA1.into(),
        ..request(op, object, old)
    }
}

fn beta_budget(spec: Value) -> Value {
    let mut v = budget(spec);
    v["apiVersion"] = json!(keys::POLICY_V1BETA1);
    v
}

async fn beta_refusal(req: Request) -> String {
    match run(req, Vec::new(), &FeatureGates::default()).await {
        Outcome::Deny { code, message, .. } => {
            assert_eq!(code, 400, "{message}");
            message
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_v1beta1_budget_with_ignored_pod_selector_is_refused() {
    let v = beta_budget(
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1,
        "ignoredPodSelector": {"matchLabels": {"skip": "true"}}}),
    );
    let m = beta_refusal(beta_request(Operation::Create, v.clone(), None)).await;
    assert_eq!(
        m,
        format!(
            "spec.ignoredPodSelector: Forbidden: {}",
            super::validation::ignored_pod_selector_message()
        )
    );
    assert!(m.contains("Kruise-rs does not support"), "{m}");
    // Adding it on an update is refused too; removing it is not.
    let plain =
        beta_budget(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}));
    let m = beta_refusal(beta_request(
        Operation::Update,
        v.clone(),
        Some(plain.clone()),
    ))
    .await;
    assert!(m.starts_with("spec.ignoredPodSelector: Forbidden"), "{m}");
    let out = run(
        beta_request(Operation::Update, plain, Some(v.clone())),
        Vec::new(),
        &FeatureGates::default(),
    )
    .await;
    assert_eq!(out, Outcome::Allow);
    // Written as v1alpha1 with the conversion record of such an object: refused all the same.
    let alpha = crate::podunavailablebudget::conversion::convert(&v, keys::POLICY_V1ALPHA1)
        .expect("converts");
    assert!(alpha["spec"].get("ignoredPodSelector").is_none());
    let m = refusal(alpha).await;
    assert!(m.starts_with("spec.ignoredPodSelector: Forbidden"), "{m}");
}

#[tokio::test]
async fn a_v1beta1_budget_is_checked_by_the_same_rules() {
    let ok = beta_budget(
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1,
        "protectOperations": ["DELETE", "EVICT"], "protectTotalReplicas": 5}),
    );
    let out = run(
        beta_request(Operation::Create, ok.clone(), None),
        Vec::new(),
        &FeatureGates::default(),
    )
    .await;
    assert_eq!(out, Outcome::Allow);
    let both = beta_budget(json!({"selector": {"matchLabels": {"app": "web"}},
        "maxUnavailable": 1, "minAvailable": 1, "protectOperations": ["DELETE"]}));
    let m = beta_refusal(beta_request(Operation::Create, both, None)).await;
    assert_eq!(
        m,
        "spec.maxUnavailable, minAvailable: Required value: maxUnavailable and minAvailable are mutually exclusive"
    );
    let m = beta_refusal(beta_request(
        Operation::Create,
        beta_budget(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "120%"})),
        None,
    ))
    .await;
    assert!(m.contains("must not be greater than 100%"), "{m}");
    // The selector stays immutable, the old object read as v1beta1 too.
    let moved = beta_budget(json!({"selector": {"matchLabels": {"app": "other"}},
        "maxUnavailable": 1, "protectOperations": ["DELETE", "EVICT"], "protectTotalReplicas": 5}));
    let m = beta_refusal(beta_request(Operation::Update, moved, Some(ok.clone()))).await;
    assert_eq!(
        m,
        "spec.selector, targetRef: Required value: selector and targetRef cannot be modified"
    );
    // And it overlaps the budgets of its namespace like any other.
    let others = vec![other(
        "first",
        json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}),
    )];
    let out = run(
        beta_request(Operation::Create, ok, None),
        others,
        &FeatureGates::default(),
    )
    .await;
    let Outcome::Deny { message, .. } = out else {
        panic!("expected a refusal")
    };
    assert!(
        message.ends_with("pub.spec.selector is in conflict with other PodUnavailableBudget first"),
        "{message}"
    );
}

#[tokio::test]
async fn a_v1beta1_budget_refuses_what_upstreams_v1beta1_rules_refuse() {
    let with = |ann: Value, spec_extra: Value| {
        let mut v =
            beta_budget(json!({"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}));
        v["metadata"]["annotations"] = ann;
        if let (Some(spec), Some(extra)) = (v["spec"].as_object_mut(), spec_extra.as_object()) {
            spec.extend(extra.clone());
        }
        v
    };
    let m = beta_refusal(beta_request(
        Operation::Create,
        with(
            json!({keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION: "abc"}),
            json!({}),
        ),
        None,
    ))
    .await;
    assert_eq!(
        m,
        r#"metadata.annotations[pub.kruise.io/protect-total-replicas]: Invalid value: "abc": must be a valid int32"#
    );
    let m = beta_refusal(beta_request(
        Operation::Create,
        with(
            json!({keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION: "3"}),
            json!({"protectTotalReplicas": 4}),
        ),
        None,
    ))
    .await;
    assert!(
        m.ends_with("must match spec.protectTotalReplicas when both are set"),
        "{m}"
    );
    // Agreeing annotation and field, as a budget converted from v1alpha1 has them, pass.
    let out = run(
        beta_request(
            Operation::Create,
            with(
                json!({keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION: "4"}),
                json!({"protectTotalReplicas": 4}),
            ),
            None,
        ),
        Vec::new(),
        &FeatureGates::default(),
    )
    .await;
    assert_eq!(out, Outcome::Allow);
    let m = beta_refusal(beta_request(
        Operation::Create,
        with(
            json!({}),
            json!({"protectOperations": ["DELETE", "delete"]}),
        ),
        None,
    ))
    .await;
    assert_eq!(
        m,
        r#"spec.protectOperations[1]: Unsupported value: "delete": supported values: "DELETE", "UPDATE", "EVICT", "RESIZE""#
    );
}
