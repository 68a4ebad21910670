//! The webhook configurations as the API server receives them, for every input that changes
//! them (gates, endpoint, Pod failure policy, the Pod hooks' scope), compared with the JSON in
//! `testdata/configurations.txt`. A change there is a change of what the cluster is told.
//! `KRUISE_UPDATE_SNAPSHOTS=1 cargo test -p kruise-webhook snapshot` rewrites the file.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::features::{FeatureGates, Gate};
use serde_json::{Value, json};

use super::mutating::mutating_configuration;
use super::scope::{PodScope, restrict};
use super::validating::validating_configuration;
use crate::WebhookConfig;

const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/configuration/testdata/configurations.txt"
);

fn gates(f: impl Fn(Gate) -> bool) -> FeatureGates {
    Gate::ALL
        .iter()
        .fold(FeatureGates::default(), |g, &gate| g.with(gate, f(gate)))
}

fn configs() -> Vec<(&'static str, WebhookConfig)> {
    let base = WebhookConfig::default;
    vec![
        ("default", base()),
        (
            "all-on",
            WebhookConfig {
                feature_gates: gates(|_| true),
                ..base()
            },
        ),
        (
            "all-off",
            WebhookConfig {
                feature_gates: gates(|_| false),
                ..base()
            },
        ),
        (
            "pod-webhook-off",
            WebhookConfig {
                feature_gates: FeatureGates::default().with(Gate::PodWebhook, false),
                ..base()
            },
        ),
        (
            "url-ignore-custom",
            WebhookConfig {
                host_url: Some("https://10.0.0.1:9443/".to_owned()),
                namespace: "other-ns".to_owned(),
                pod_failure_policy: "Ignore".to_owned(),
                timeout_seconds: 7,
                ..base()
            },
        ),
        (
            "service-custom",
            WebhookConfig {
                namespace: "kube-system".to_owned(),
                service_name: "svc".to_owned(),
                service_port: 8443,
                ..base()
            },
        ),
    ]
}

fn scopes() -> Vec<(&'static str, Option<PodScope>)> {
    let selector = |v: Value| -> LabelSelector { serde_json::from_value(v).unwrap_or_default() };
    vec![
        ("unscoped", None),
        ("empty-scope", Some(PodScope::default())),
        (
            "scope",
            Some(PodScope {
                sidecar_sets: vec![
                    (
                        Some(selector(
                            json!({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}),
                        )),
                        selector(json!({"matchLabels": {"app": "web"},
                            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]})),
                    ),
                    (None, selector(json!({"matchLabels": {"b": "c"}}))),
                ],
                create_namespaces: ["ws".to_owned(), "pps".to_owned()].into(),
                guard_namespaces: ["pub".to_owned()].into(),
            }),
        ),
    ]
}

/// The hooks of one case, as `mutating NAME` / `validating NAME` and compact JSON, in order
/// (the configurations' own metadata first).
fn hooks(cfg: &WebhookConfig, scope: Option<Option<&PodScope>>) -> Vec<(String, String)> {
    let m = mutating_configuration(cfg, "CA");
    let mut v = validating_configuration(cfg, "CA");
    let refused = scope.and_then(|scope| restrict(&m, &mut v, scope, &cfg.feature_gates));
    let compact = |x: &dyn erased::Ser| x.json();
    let mut out = vec![
        ("mutating -".to_owned(), compact(&m.metadata)),
        ("validating -".to_owned(), compact(&v.metadata)),
    ];
    // What the admission policy refuses while the manager is down (configuration::policy).
    if let Some(refused) = refused {
        out.push(("policy conditions".to_owned(), compact(&refused)));
    }
    for h in m.webhooks.iter().flatten() {
        out.push((format!("mutating {}", h.name), compact(h)));
    }
    for h in v.webhooks.iter().flatten() {
        out.push((format!("validating {}", h.name), compact(h)));
    }
    out
}

mod erased {
    /// Compact JSON of anything serialisable, behind one object-safe method.
    pub trait Ser {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Ser for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap_or_default()
        }
    }
}

/// One line per hook of `default/built`, the configurations as built with the installed gates;
/// then for every other configuration, its hooks as built, and after [`restrict`] with each
/// scope: the list of its hooks (so an added, dropped or moved hook shows) and one line per hook
/// that differs from the one before (`default/built`, or the configuration as built).
fn rendered() -> Vec<String> {
    let configs = configs();
    let default = hooks(&configs[0].1, None);
    let mut out: Vec<String> = default
        .iter()
        .map(|(at, json)| format!("default/built {at} {json}"))
        .collect();
    let case = |out: &mut Vec<String>, case: String, got: &[(String, String)], base: &[_]| {
        let names: Vec<&str> = got.iter().map(|(at, _)| at.as_str()).collect();
        out.push(format!("{case} hooks {}", names.join(",")));
        for (at, json) in got {
            if !base.contains(&(at.clone(), json.clone())) {
                out.push(format!("{case} {at} {json}"));
            }
        }
    };
    for (name, cfg) in &configs {
        let built = hooks(cfg, None);
        if *name != "default" {
            case(&mut out, format!("{name}/built"), &built, &default);
        }
        for (scope_name, scope) in scopes() {
            let got = hooks(cfg, Some(scope.as_ref()));
            case(&mut out, format!("{name}/{scope_name}"), &got, &built);
        }
    }
    out
}

#[test]
fn configurations_match_the_snapshot() {
    let got = rendered();
    if std::env::var_os("KRUISE_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(SNAPSHOT, got.join("\n") + "\n").expect("write the snapshot");
        return;
    }
    let text = std::fs::read_to_string(SNAPSHOT).expect("read the snapshot");
    let want: Vec<&str> = text.lines().collect();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert_eq!(got.len(), want.len(), "lines in the snapshot");
}
