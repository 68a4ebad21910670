use super::mutating::*;
use super::validating::*;
use super::*;
use crate::paths;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};

#[test]
fn pod_failure_policy_comes_from_the_env_and_only_for_pods() {
    let cfg = WebhookConfig::from_lookup(|k| {
        (k == keys::ENV_WEBHOOK_POD_FAILURE_POLICY).then(|| "Ignore".to_owned())
    });
    let hooks = mutating_configuration(&cfg, "CA")
        .webhooks
        .unwrap_or_default();
    for h in &hooks {
        let want = if h.name == "mpod.kb.io" {
            "Ignore"
        } else {
            "Fail"
        };
        assert_eq!(h.failure_policy.as_deref(), Some(want), "{}", h.name);
    }
    let bad = WebhookConfig::from_lookup(|k| {
        (k == keys::ENV_WEBHOOK_POD_FAILURE_POLICY).then(|| "ignore".to_owned())
    });
    assert_eq!(
        bad.pod_failure_policy, "Fail",
        "an unknown policy keeps the default"
    );
}

#[test]
fn in_cluster_points_at_service_and_excludes_system_namespaces() {
    let cfg = WebhookConfig::default();
    let m = mutating_configuration(&cfg, "CA");
    let hooks = m.webhooks.unwrap_or_default();
    let pod = &hooks[0];
    assert_eq!(pod.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(pod.side_effects, "None");
    assert_eq!(pod.admission_review_versions, vec!["v1"]);
    let svc = pod.client_config.service.clone().expect("service");
    assert_eq!(svc.name, "kruise-webhook-service");
    assert_eq!(svc.namespace, "kruise-system");
    assert_eq!(svc.path.as_deref(), Some("/mutate-pod"));
    let sel = pod.namespace_selector.clone().expect("selector");
    let exprs = sel.match_expressions.unwrap_or_default();
    let vals = exprs[0].values.clone().unwrap_or_default();
    assert_eq!(exprs[0].key, "kubernetes.io/metadata.name");
    assert_eq!(vals, vec!["kube-system", "kruise-system"]);
    // Namespaces labelled webhook-exempt (the label deploy/ puts on kruise-system) are skipped.
    assert_eq!(exprs[1].key, "kruise.io/webhook-exempt");
    assert_eq!(exprs[1].operator, "DoesNotExist");
    assert!(pod.timeout_seconds.is_some_and(|t| (1..=10).contains(&t)));
}

#[test]
fn pod_webhook_gate_off_leaves_the_pod_hook_out() {
    let names = |cfg: &WebhookConfig| -> Vec<String> {
        let m = mutating_configuration(cfg, "CA");
        m.webhooks
            .unwrap_or_default()
            .into_iter()
            .map(|h| h.name)
            .collect()
    };
    let on = names(&WebhookConfig::default());
    assert!(on.iter().any(|n| n == POD_HOOK));
    let off = WebhookConfig {
        feature_gates: kruise_api::features::FeatureGates::parse("PodWebhook=false")
            .expect("valid"),
        ..Default::default()
    };
    let off = names(&off);
    assert!(!off.iter().any(|n| n == POD_HOOK), "{off:?}");
    assert_eq!(off.len() + 1, on.len(), "only the Pod hook goes");
}

/// A configured path the server does not route answers 404, which with failurePolicy Fail
/// blocks every write of that kind.
#[test]
fn every_configured_path_is_served() {
    let cfg = WebhookConfig::default();
    let m = mutating_configuration(&cfg, "CA")
        .webhooks
        .unwrap_or_default();
    let v = validating_configuration(&cfg, "CA")
        .webhooks
        .unwrap_or_default();
    let configured = m
        .iter()
        .map(|h| &h.client_config)
        .chain(v.iter().map(|h| &h.client_config));
    for cc in configured {
        let path = cc
            .service
            .as_ref()
            .and_then(|s| s.path.clone())
            .expect("service path");
        assert!(
            paths::ADMISSION.contains(&path.as_str()),
            "{path} not routed"
        );
        let body = br#"{"request": {"uid": "u"}}"#;
        let pods = crate::cluster::ApiCluster {
            client: None,
            timeout: std::time::Duration::from_secs(1),
            template_dry_run: true,
            sidecar_sets: None,
            budgets: None,
            persistent_pod_states: None,
            workload_spreads: None,
            pod_probe_markers: None,
            pod_marks: None,
            metrics: Default::default(),
        };
        let served = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(crate::handle_admission_async(
                &path,
                body,
                &pods,
                &kruise_api::features::FeatureGates::default()
                    .with(kruise_api::features::Gate::ImagePullJobGate, true),
            ));
        assert!(served.is_some(), "{path} has no handler");
    }
}

#[test]
fn crr_and_imagelistpulljob_are_registered_fail_closed() {
    let cfg = WebhookConfig::default();
    let m = mutating_configuration(&cfg, "CA")
        .webhooks
        .unwrap_or_default();
    let v = validating_configuration(&cfg, "CA")
        .webhooks
        .unwrap_or_default();
    let rules_of = |rules: &Option<Vec<RuleWithOperations>>| {
        let r = &rules.as_ref().expect("rules")[0];
        (
            r.resources.clone().unwrap_or_default(),
            r.operations.clone().unwrap_or_default(),
            r.api_versions.clone().unwrap_or_default(),
        )
    };
    let crr_m = m
        .iter()
        .find(|h| h.name == "mcontainerrecreaterequest.kb.io")
        .expect("CRR mutating hook");
    assert_eq!(crr_m.failure_policy.as_deref(), Some("Fail"));
    assert!(crr_m.timeout_seconds.is_some_and(|t| t <= 10));
    assert_eq!(
        rules_of(&crr_m.rules),
        (
            vec!["containerrecreaterequests".to_owned()],
            vec!["CREATE".to_owned()],
            vec!["v1alpha1".to_owned(), "v1beta1".to_owned()]
        )
    );
    let crr_v = v
        .iter()
        .find(|h| h.name == "vcontainerrecreaterequest.kb.io")
        .expect("CRR validating hook");
    assert_eq!(crr_v.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(rules_of(&crr_v.rules).1, vec!["CREATE", "UPDATE"]);
    for hooks in [
        m.iter().map(|h| (&h.name, &h.rules)).collect::<Vec<_>>(),
        v.iter().map(|h| (&h.name, &h.rules)).collect::<Vec<_>>(),
    ] {
        let (_, rules) = hooks
            .into_iter()
            .find(|(n, _)| n.contains("imagelistpulljob"))
            .expect("ImageListPullJob hook");
        assert_eq!(rules_of(rules).0, vec!["imagelistpulljobs"]);
    }
}

#[test]
fn dev_mode_points_at_url() {
    let cfg = WebhookConfig {
        host_url: Some("https://127.0.0.1:9876/".to_owned()),
        ..Default::default()
    };
    let v = validating_configuration(&cfg, "CA");
    let hooks = v.webhooks.unwrap_or_default();
    assert_eq!(
        hooks[0].client_config.url.as_deref(),
        Some("https://127.0.0.1:9876/validate-apps-kruise-io-cloneset")
    );
    assert!(hooks[0].client_config.service.is_none());
}

#[test]
fn a_known_scope_restricts_only_the_pod_hooks() {
    let cfg = WebhookConfig::default();
    let m = mutating_configuration(&cfg, "CA");
    let mut v = validating_configuration(&cfg, "CA");
    scope::restrict(&m, &mut v, None, &cfg.feature_gates);
    let conditioned = |m: &MutatingWebhookConfiguration, v: &ValidatingWebhookConfiguration| {
        m.webhooks
            .iter()
            .flatten()
            .filter(|h| h.match_conditions.is_some())
            .map(|h| h.name.clone())
            .chain(
                v.webhooks
                    .iter()
                    .flatten()
                    .filter(|h| h.match_conditions.is_some())
                    .map(|h| h.name.clone()),
            )
            .collect::<Vec<_>>()
    };
    assert_eq!(
        conditioned(&m, &v),
        vec!["vpod.kb.io"],
        "unknown scope: every Pod create and eviction"
    );
    let refused = scope::restrict(
        &m,
        &mut v,
        Some(&scope::PodScope::default()),
        &cfg.feature_gates,
    );
    // The create hook is called for every Pod; the scope goes to the admission policy.
    assert_eq!(
        conditioned(&m, &v),
        vec!["vpod.kb.io", "vpodeviction.kb.io"]
    );
    let refused = refused.expect("a scope gives the policy its condition");
    assert!(
        refused[0].expression.contains("ownerReferences"),
        "{refused:?}"
    );
    // Every Pod gets the readiness gate with KruisePodReadinessGate: the create hook stays whole.
    let all =
        kruise_api::features::FeatureGates::parse("KruisePodReadinessGate=true").expect("valid");
    let m = mutating_configuration(&cfg, "CA");
    let refused = scope::restrict(&m, &mut v, Some(&scope::PodScope::default()), &all);
    assert!(
        refused.is_none(),
        "no policy: the create hook fails closed for every Pod"
    );
    assert!(
        m.webhooks
            .iter()
            .flatten()
            .all(|h| h.match_conditions.is_none())
    );
}
