//! The MutatingWebhookConfiguration we register: the mutating hooks of [`paths::HOOKS`].

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use kube::api::ObjectMeta;

use super::{Endpoint, Registration, registered};
use crate::{WebhookConfig, paths};
use kruise_api::keys;

/// Name of the Pod mutating hook (upstream's).
pub(super) const POD_HOOK: &str = paths::POD_MUTATING_HOOK;

/// The mutating configuration.
pub fn mutating_configuration(cfg: &WebhookConfig, ca_pem: &str) -> MutatingWebhookConfiguration {
    let ep = Endpoint::from_config(cfg);
    let webhooks = registered(cfg, paths::Kind::Mutating)
        .map(|hook| {
            let r = Registration::of(hook, cfg, &ep, ca_pem);
            MutatingWebhook {
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
                reinvocation_policy: Some("Never".to_owned()),
                ..Default::default()
            }
        })
        .collect();
    MutatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME.to_owned()),
            ..Default::default()
        },
        webhooks: Some(webhooks),
    }
}
