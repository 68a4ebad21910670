//! The ValidatingWebhookConfiguration we register: the validating hooks of [`paths::HOOKS`].

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingWebhook, ValidatingWebhookConfiguration,
};
use kube::api::ObjectMeta;

use super::{Endpoint, Registration, registered};
use crate::{WebhookConfig, paths};
use kruise_api::keys;

/// Names of the Pod hooks (upstream's): Pod updates and deletes, and evictions.
pub(super) const POD_HOOKS: &[&str] = &[paths::POD_WRITES_HOOK, paths::POD_EVICTIONS_HOOK];

/// The validating configuration.
pub fn validating_configuration(
    cfg: &WebhookConfig,
    ca_pem: &str,
) -> ValidatingWebhookConfiguration {
    let ep = Endpoint::from_config(cfg);
    let webhooks = registered(cfg, paths::Kind::Validating)
        .map(|hook| {
            let r = Registration::of(hook, cfg, &ep, ca_pem);
            ValidatingWebhook {
                name: r.name,
                client_config: r.client_config,
                rules: r.rules,
                failure_policy: r.failure_policy,
                side_effects: r.side_effects,
                admission_review_versions: r.admission_review_versions,
                timeout_seconds: r.timeout_seconds,
                match_policy: r.match_policy,
                namespace_selector: r.namespace_selector,
                object_selector: r.object_selector,
                ..Default::default()
            }
        })
        .collect();
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME.to_owned()),
            ..Default::default()
        },
        webhooks: Some(webhooks),
    }
}
