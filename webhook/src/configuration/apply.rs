//! Writing the configurations to the cluster: both webhook configurations (server-side
//! apply) and the caBundle of Kruise CRDs' conversion settings.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::mutating::mutating_configuration;
use super::validating::validating_configuration;
use super::{Endpoint, FIELD_MANAGER};
use crate::{Error, WebhookConfig, paths};
use kruise_api::keys;

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
