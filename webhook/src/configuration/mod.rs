//! The MutatingWebhookConfiguration / ValidatingWebhookConfiguration we register
//! ([`mutating`], [`validating`]: the hooks of [`crate::paths::HOOKS`]), and the CRD conversion
//! settings, all pointing at this webhook with the current CA; [`apply`] writes them to the
//! cluster. This module holds what they share: where the webhook is reached and what one hook's
//! declaration registers.

pub mod apply;
mod deletion_protection;
pub mod mutating;
pub mod policy;
pub mod scope;
pub mod uninstall;
pub mod validating;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    RuleWithOperations, ServiceReference, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use crate::WebhookConfig;
use crate::paths::{self, FailurePolicy, Hook, Kind, Namespaces, Objects};
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

/// The hooks of `kind` registered under `cfg`'s gates, in their declared order.
fn registered(cfg: &WebhookConfig, kind: Kind) -> impl Iterator<Item = &'static Hook> + '_ {
    paths::HOOKS
        .iter()
        .filter(move |h| h.kind == kind && h.gate.is_none_or(|g| cfg.feature_gates.enabled(g)))
}

/// The fields a mutating and a validating hook share, from one hook's declaration.
struct Registration {
    name: String,
    client_config: WebhookClientConfig,
    rules: Option<Vec<RuleWithOperations>>,
    failure_policy: Option<String>,
    side_effects: String,
    admission_review_versions: Vec<String>,
    timeout_seconds: Option<i32>,
    match_policy: Option<String>,
    namespace_selector: Option<LabelSelector>,
    object_selector: Option<LabelSelector>,
}

impl Registration {
    fn of(hook: &Hook, cfg: &WebhookConfig, ep: &Endpoint, ca_pem: &str) -> Self {
        let strings = |xs: &[&str]| Some(xs.iter().map(|s| (*s).to_owned()).collect());
        let rule = RuleWithOperations {
            api_groups: strings(hook.rule.groups),
            api_versions: strings(hook.rule.versions),
            operations: strings(hook.rule.operations),
            resources: strings(hook.rule.resources),
            scope: None,
        };
        Registration {
            name: hook.name.to_owned(),
            client_config: ep.client_config(hook.path, ca_pem),
            rules: Some(vec![rule]),
            failure_policy: Some(match hook.failure_policy {
                FailurePolicy::Fail => "Fail".to_owned(),
                FailurePolicy::PodSetting => cfg.pod_failure_policy.clone(),
            }),
            side_effects: hook.side_effects.to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            timeout_seconds: Some(cfg.timeout_seconds),
            match_policy: Some("Equivalent".to_owned()),
            namespace_selector: match hook.namespaces {
                Namespaces::All => None,
                Namespaces::OutsideSystem => Some(excluded_namespaces(cfg)),
            },
            object_selector: match hook.objects {
                Objects::All => None,
                Objects::DeletionProtected => Some(deletion_protection::labelled()),
            },
        }
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

/// A delete's result, an object already gone counting as done.
fn gone<T>(r: Result<T, kube::Error>) -> Result<(), crate::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(crate::Error::Kube(e)),
    }
}

#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;
