//! The MutatingWebhookConfiguration / ValidatingWebhookConfiguration we register
//! ([`mutating`], [`validating`]), and the CRD conversion settings, all pointing at this webhook
//! with the current CA; [`apply`] writes them to the cluster. This module holds what they share:
//! where the webhook is reached and how a rule is built.

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

/// A delete's result, an object already gone counting as done.
fn gone<T>(r: Result<T, kube::Error>) -> Result<(), crate::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(crate::Error::Kube(e)),
    }
}

const CLONESET_VERSIONS: &[&str] = &[keys::VERSION_V1ALPHA1, keys::VERSION_V1BETA1];

#[cfg(test)]
mod snapshot_tests;
#[cfg(test)]
mod tests;
