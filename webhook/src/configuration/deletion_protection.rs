//! The validating webhooks of deletion protection, as upstream registers them
//! (`pkg/webhook/{namespace,customresourcedefinition,service,ingress,builtinworkloads}/validating`):
//! DELETE only, failurePolicy Fail. Upstream registers the Service and Ingress hooks only while
//! `ResourcesDeletionProtection` is on, the others always (their handler then admits).
//!
//! One addition: an objectSelector, so that only objects carrying the label are sent to us. The
//! handler admits every other object anyway; without the selector, a manager that is down (or
//! being uninstalled: its own Deployment, Service and Namespace go last) would make every
//! Namespace, Deployment, ReplicaSet and StatefulSet deletion in the cluster fail.

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhook;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::{Endpoint, rule};
use crate::{WebhookConfig, paths};
use kruise_api::features::Gate;
use kruise_api::keys;

/// The hooks, after the Kruise kinds' ones.
pub(super) fn hooks(cfg: &WebhookConfig, ep: &Endpoint, ca_pem: &str) -> Vec<ValidatingWebhook> {
    let hook = |name: &str, path: &str, group: &str, versions: &[&str], resource: &str| {
        ValidatingWebhook {
            name: name.to_owned(),
            client_config: ep.client_config(path, ca_pem),
            rules: Some(vec![rule(&[group], versions, &["DELETE"], &[resource])]),
            failure_policy: Some("Fail".to_owned()),
            side_effects: "None".to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            timeout_seconds: Some(cfg.timeout_seconds),
            match_policy: Some("Equivalent".to_owned()),
            object_selector: Some(labelled()),
            ..Default::default()
        }
    };
    let v1 = &["v1"];
    let v1_beta1 = &["v1", "v1beta1"];
    let mut hooks = vec![
        hook(
            "vnamespace.kb.io",
            paths::VALIDATE_NAMESPACE,
            "",
            v1,
            "namespaces",
        ),
        hook(
            "vcustomresourcedefinition.kb.io",
            paths::VALIDATE_CRD,
            "apiextensions.k8s.io",
            v1_beta1,
            "customresourcedefinitions",
        ),
        hook(
            "vbuiltindeployment.kb.io",
            paths::VALIDATE_APPS_DEPLOYMENT,
            "apps",
            v1,
            "deployments",
        ),
        hook(
            "vbuiltinreplicaset.kb.io",
            paths::VALIDATE_APPS_REPLICASET,
            "apps",
            v1,
            "replicasets",
        ),
        hook(
            "vbuiltinstatefulset.kb.io",
            paths::VALIDATE_APPS_STATEFULSET,
            "apps",
            v1,
            "statefulsets",
        ),
    ];
    if cfg.feature_gates.enabled(Gate::ResourcesDeletionProtection) {
        hooks.push(hook(
            "vservice.kb.io",
            paths::VALIDATE_SERVICE,
            "",
            v1,
            "services",
        ));
        hooks.push(hook(
            "vingress.kb.io",
            paths::VALIDATE_INGRESS,
            "networking.k8s.io",
            v1_beta1,
            "ingresses",
        ));
    }
    hooks
}

/// Objects (the old object, on DELETE) that carry the protection label, whatever its value.
fn labelled() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: keys::DELETE_PROTECTION_LABEL.to_owned(),
            operator: "Exists".to_owned(),
            values: None,
        }]),
        match_labels: None,
    }
}
