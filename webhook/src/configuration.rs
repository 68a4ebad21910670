//! The MutatingWebhookConfiguration / ValidatingWebhookConfiguration we register, and the CRD
//! conversion settings, all pointing at this webhook with the current CA.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kruise_api::features::Gate;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams};
use serde_json::json;

use crate::{Error, WebhookConfig, paths};
use kruise_api::keys;

/// Field manager for our server-side applies.
pub const FIELD_MANAGER: &str = "kruise-webhook";

/// Where the API server reaches the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// In cluster: through the Service.
    Service {
        /// Service namespace.
        namespace: String,
        /// Service name.
        name: String,
        /// Service port.
        port: i32,
    },
    /// Dev mode: a URL base such as `https://127.0.0.1:9876`.
    Url(String),
}

impl Endpoint {
    /// The endpoint `cfg` describes.
    pub fn from_config(cfg: &WebhookConfig) -> Self {
        match &cfg.host_url {
            Some(url) => Endpoint::Url(url.trim_end_matches('/').to_owned()),
            None => Endpoint::Service {
                namespace: cfg.namespace.clone(),
                name: cfg.service_name.clone(),
                port: cfg.service_port,
            },
        }
    }

    /// Client config for one path.
    pub fn client_config(&self, path: &str, ca_pem: &str) -> WebhookClientConfig {
        let ca_bundle = Some(ByteString(ca_pem.as_bytes().to_vec()));
        match self {
            Endpoint::Service {
                namespace,
                name,
                port,
            } => WebhookClientConfig {
                ca_bundle,
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.to_owned()),
                    port: Some(*port),
                }),
                url: None,
            },
            Endpoint::Url(base) => WebhookClientConfig {
                ca_bundle,
                service: None,
                url: Some(format!("{base}{path}")),
            },
        }
    }
}

fn rule(
    groups: &[&str],
    versions: &[&str],
    ops: &[&str],
    resources: &[&str],
) -> RuleWithOperations {
    let v = |xs: &[&str]| Some(xs.iter().map(|s| (*s).to_owned()).collect());
    RuleWithOperations {
        api_groups: v(groups),
        api_versions: v(versions),
        operations: v(ops),
        resources: v(resources),
        scope: None,
    }
}

/// Keeps the Pod webhook away from kube-system, from its own namespace and from any namespace
/// labelled `kruise.io/webhook-exempt`: with failurePolicy Fail a manager that is down would
/// otherwise block Pod creation there, including the Pods that would bring it back.
fn excluded_namespaces(cfg: &WebhookConfig) -> LabelSelector {
    let mut values = vec!["kube-system".to_owned(), cfg.namespace.clone()];
    values.dedup();
    LabelSelector {
        match_expressions: Some(vec![
            LabelSelectorRequirement {
                key: keys::k8s::NAMESPACE_NAME_LABEL.to_owned(),
                operator: "NotIn".to_owned(),
                values: Some(values),
            },
            LabelSelectorRequirement {
                key: kruise_api::keys::WEBHOOK_EXEMPT_NAMESPACE_LABEL.to_owned(),
                operator: "DoesNotExist".to_owned(),
                values: None,
            },
        ]),
        match_labels: None,
    }
}

const CLONESET_VERSIONS: &[&str] = &[keys::VERSION_V1ALPHA1, keys::VERSION_V1BETA1];

/// The mutating configuration.
/// Name of the Pod mutating hook (upstream's).
const POD_HOOK: &str = "mpod.kb.io";

pub fn mutating_configuration(cfg: &WebhookConfig, ca_pem: &str) -> MutatingWebhookConfiguration {
    let ep = Endpoint::from_config(cfg);
    let pod_webhook = cfg.feature_gates.enabled(Gate::PodWebhook);
    let hook =
        |name: &str, path: &str, rules: Vec<RuleWithOperations>, ns: Option<LabelSelector>| {
            MutatingWebhook {
                name: name.to_owned(),
                client_config: ep.client_config(path, ca_pem),
                rules: Some(rules),
                // Only the Pod hook's policy is a setting (the chart's webhookConfiguration.failurePolicy.pods).
                failure_policy: Some(if path == paths::MUTATE_POD {
                    cfg.pod_failure_policy.clone()
                } else {
                    "Fail".to_owned()
                }),
                side_effects: "None".to_owned(),
                admission_review_versions: vec!["v1".to_owned()],
                timeout_seconds: Some(cfg.timeout_seconds),
                match_policy: Some("Equivalent".to_owned()),
                namespace_selector: ns,
                reinvocation_policy: Some("Never".to_owned()),
                ..Default::default()
            }
        };
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME.to_owned()),
            ..Default::default()
        },
        webhooks: Some(
            vec![
                hook(
                    POD_HOOK,
                    paths::MUTATE_POD,
                    vec![rule(&[""], &["v1"], &["CREATE"], &["pods"])],
                    Some(excluded_namespaces(cfg)),
                ),
                hook(
                    "mcloneset.kb.io",
                    paths::MUTATE_CLONESET,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["clonesets"],
                    )],
                    None,
                ),
                hook(
                    "mstatefulset.kb.io",
                    paths::MUTATE_STATEFULSET,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["statefulsets"],
                    )],
                    None,
                ),
                hook(
                    "mdaemonset.kb.io",
                    paths::MUTATE_DAEMONSET,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["daemonsets"],
                    )],
                    None,
                ),
                hook(
                    "mimagepulljob.kb.io",
                    paths::MUTATE_IMAGEPULLJOB,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["imagepulljobs"],
                    )],
                    None,
                ),
                hook(
                    "mnodeimage.kb.io",
                    paths::MUTATE_NODEIMAGE,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["nodeimages"],
                    )],
                    None,
                ),
                hook(
                    "mimagelistpulljob.kb.io",
                    paths::MUTATE_IMAGELISTPULLJOB,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["imagelistpulljobs"],
                    )],
                    None,
                ),
                // CREATE only: upstream's handler also refuses spec changes on UPDATE, which here
                // is the validating hook's job (it sees the object after every mutation).
                hook(
                    "mcontainerrecreaterequest.kb.io",
                    paths::MUTATE_CRR,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE"],
                        &["containerrecreaterequests"],
                    )],
                    None,
                ),
                hook(
                    "msidecarset.kb.io",
                    paths::MUTATE_SIDECARSET,
                    vec![rule(
                        &[keys::APPS_GROUP],
                        CLONESET_VERSIONS,
                        &["CREATE", "UPDATE"],
                        &["sidecarsets"],
                    )],
                    None,
                ),
            ]
            .into_iter()
            // Upstream registers no Pod handler without `PodWebhook`, and leaves a hook whose
            // handler is missing out of the configuration.
            .filter(|h| pod_webhook || h.name != POD_HOOK)
            .collect(),
        ),
    }
}

/// The validating configuration.
pub fn validating_configuration(
    cfg: &WebhookConfig,
    ca_pem: &str,
) -> ValidatingWebhookConfiguration {
    let ep = Endpoint::from_config(cfg);
    // Kruise kinds serve v1alpha1 and v1beta1 alike.
    let hook = |name: &str, path: &str, ops: &[&str], resource: &str| ValidatingWebhook {
        name: name.to_owned(),
        client_config: ep.client_config(path, ca_pem),
        rules: Some(vec![rule(
            &[keys::APPS_GROUP],
            CLONESET_VERSIONS,
            ops,
            &[resource],
        )]),
        failure_policy: Some("Fail".to_owned()),
        side_effects: "None".to_owned(),
        admission_review_versions: vec!["v1".to_owned()],
        timeout_seconds: Some(cfg.timeout_seconds),
        match_policy: Some("Equivalent".to_owned()),
        ..Default::default()
    };
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME.to_owned()),
            ..Default::default()
        },
        webhooks: Some(vec![
            hook(
                "vcloneset.kb.io",
                paths::VALIDATE_CLONESET,
                &["CREATE", "UPDATE", "DELETE"],
                "clonesets",
            ),
            hook(
                "vstatefulset.kb.io",
                paths::VALIDATE_STATEFULSET,
                &["CREATE", "UPDATE"],
                "statefulsets",
            ),
            hook(
                "vdaemonset.kb.io",
                paths::VALIDATE_DAEMONSET,
                &["CREATE", "UPDATE", "DELETE"],
                "daemonsets",
            ),
            hook(
                "vimagepulljob.kb.io",
                paths::VALIDATE_IMAGEPULLJOB,
                &["CREATE", "UPDATE"],
                "imagepulljobs",
            ),
            hook(
                "vnodeimage.kb.io",
                paths::VALIDATE_NODEIMAGE,
                &["CREATE", "UPDATE"],
                "nodeimages",
            ),
            hook(
                "vimagelistpulljob.kb.io",
                paths::VALIDATE_IMAGELISTPULLJOB,
                &["CREATE", "UPDATE"],
                "imagelistpulljobs",
            ),
            hook(
                "vcontainerrecreaterequest.kb.io",
                paths::VALIDATE_CRR,
                &["CREATE", "UPDATE"],
                "containerrecreaterequests",
            ),
            hook(
                "vsidecarset.kb.io",
                paths::VALIDATE_SIDECARSET,
                &["CREATE", "UPDATE"],
                "sidecarsets",
            ),
        ]),
    }
}

/// Creates or updates both webhook configurations (server-side apply, so fields owned by
/// others, e.g. a Helm chart's labels, are left alone).
pub async fn apply_webhook_configurations(
    client: &kube::Client,
    cfg: &WebhookConfig,
    ca_pem: &str,
) -> Result<(), Error> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let m = mutating_configuration(cfg, ca_pem);
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            keys::MUTATING_WEBHOOK_CONFIGURATION_NAME,
            &pp,
            &Patch::Apply(&m),
        )
        .await?;
    let v = validating_configuration(cfg, ca_pem);
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch(
            keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME,
            &pp,
            &Patch::Apply(&v),
        )
        .await?;
    tracing::debug!("webhook configurations applied");
    Ok(())
}

/// Points the conversion webhook of every Kruise CRD that asks for one (strategy Webhook) at us
/// with the current CA. CRDs with strategy None are left alone, as upstream does.
pub async fn patch_crd_conversion(
    client: &kube::Client,
    cfg: &WebhookConfig,
    ca_pem: &str,
) -> Result<usize, Error> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let wanted = Endpoint::from_config(cfg).client_config(paths::CONVERT, ca_pem);
    let mut patched = 0;
    for crd in api.list(&ListParams::default()).await? {
        let group = crd.spec.group.as_str();
        if group != keys::APPS_GROUP && group != keys::POLICY_GROUP {
            continue;
        }
        let Some(conv) = crd.spec.conversion.as_ref() else {
            continue;
        };
        if conv.strategy != "Webhook" {
            continue;
        }
        let current = conv.webhook.as_ref().and_then(|w| w.client_config.as_ref());
        let same = current.is_some_and(|c| {
            c.ca_bundle == wanted.ca_bundle
                && c.url == wanted.url
                && c.service
                    .as_ref()
                    .map(|s| (&s.namespace, &s.name, &s.path, s.port))
                    == wanted
                        .service
                        .as_ref()
                        .map(|s| (&s.namespace, &s.name, &s.path, s.port))
        });
        if same {
            continue;
        }
        let Some(name) = crd.metadata.name.as_deref() else {
            continue;
        };
        // Merge patch: the explicit nulls clear the other kind of endpoint.
        let patch = json!({"spec": {"conversion": {"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {
            "caBundle": wanted.ca_bundle,
            "url": wanted.url,
            "service": wanted.service,
        }}}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        tracing::info!(crd = name, "patched conversion webhook caBundle");
        patched += 1;
    }
    Ok(patched)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
