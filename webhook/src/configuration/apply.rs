//! Writing the configurations to the cluster: both webhook configurations (server-side
//! apply) and the caBundle of Kruise CRDs' conversion settings.

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::mutating::mutating_configuration;
use super::policy;
use super::scope::{PodScope, restrict};
use super::validating::validating_configuration;
use super::{Endpoint, FIELD_MANAGER};
use crate::{Error, WebhookConfig, paths};
use kruise_api::keys;

/// Creates or updates both webhook configurations (server-side apply, so fields owned by
/// others, e.g. a Helm chart's labels, are left alone), with the Pod hooks scoped to `scope`
/// (see [`super::scope`]) and owned by the manager's ClusterRole.
pub async fn apply_webhook_configurations(
    client: &kube::Client,
    cfg: &WebhookConfig,
    ca_pem: &str,
    scope: Option<&PodScope>,
) -> Result<(), Error> {
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let mut m = mutating_configuration(cfg, ca_pem);
    let mut v = validating_configuration(cfg, ca_pem);
    let refused = restrict(&m, &mut v, scope, &cfg.feature_gates);
    if cfg.external_certs() {
        leave_ca_bundles(&mut m, &mut v);
    }
    let owner = owner(client).await;
    m.metadata.owner_references.clone_from(&owner);
    v.metadata.owner_references.clone_from(&owner);
    // With a scope, the Pod CREATE hook (called for every Pod) fails open and the policy
    // refuses, within the scope, what it did not mark, naming Kruise-rs (super::policy); the
    // policy goes first. Without one (caches loading, the readiness gate on every Pod, the
    // user chose Ignore, or the hook is off) there is no policy and the hook keeps its
    // configured failure policy.
    let pod_hook = m
        .webhooks
        .iter_mut()
        .flatten()
        .find(|h| h.name == super::mutating::POD_HOOK);
    let refused = refused.filter(|_| cfg.pod_failure_policy == "Fail");
    match (refused, pod_hook) {
        (Some(conditions), Some(hook)) => {
            match policy::apply(client, cfg, &conditions, owner.as_deref()).await {
                Ok(()) => hook.failure_policy = Some("Ignore".to_owned()),
                // Kept failing closed, with the API server's message.
                Err(e) => tracing::warn!(error = %e, "applying the Pod webhook's admission policy"),
            }
        }
        _ => {
            if let Err(e) = policy::remove(client).await {
                tracing::debug!(error = %e, "removing the Pod webhook's admission policy");
            }
        }
    }
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .patch(
            keys::MUTATING_WEBHOOK_CONFIGURATION_NAME,
            &pp,
            &Patch::Apply(&m),
        )
        .await?;
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

/// An owner reference to the manager's ClusterRole, which every way of installing creates and
/// every way of uninstalling deletes: the garbage collector then removes the configurations we
/// created at run time, which would otherwise outlive the webhook and refuse what they match.
/// `None` (no owner) when the role cannot be read, e.g. a manager run outside the cluster.
async fn owner(client: &kube::Client) -> Option<Vec<OwnerReference>> {
    let role = match Api::<ClusterRole>::all(client.clone())
        .get_opt(keys::MANAGER_CLUSTER_ROLE)
        .await
    {
        Ok(Some(role)) => role,
        Ok(None) => return None,
        Err(e) => {
            tracing::debug!(error = %e, "reading the manager's ClusterRole for the owner reference");
            return None;
        }
    };
    let uid = role.metadata.uid?;
    Some(vec![OwnerReference {
        api_version: "rbac.authorization.k8s.io/v1".to_owned(),
        kind: "ClusterRole".to_owned(),
        name: keys::MANAGER_CLUSTER_ROLE.to_owned(),
        uid,
        ..Default::default()
    }])
}

/// Whether `crd` is a Kruise CRD whose conversion asks for a webhook (strategy Webhook); CRDs
/// with strategy None are left alone, as upstream does.
fn converted_by_us(crd: &CustomResourceDefinition) -> bool {
    let group = crd.spec.group.as_str();
    (group == keys::APPS_GROUP || group == keys::POLICY_GROUP)
        && crd
            .spec
            .conversion
            .as_ref()
            .is_some_and(|c| c.strategy == "Webhook")
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
        let Some(conv) = crd
            .spec
            .conversion
            .as_ref()
            .filter(|_| converted_by_us(&crd))
        else {
            continue;
        };
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

/// Under `EnableExternalCerts` the caBundles are someone else's (cert-manager's CA injector,
/// say): the configurations we apply carry none, so server-side apply leaves the injected
/// ones alone, as upstream leaves the whole configuration alone then.
fn leave_ca_bundles(m: &mut MutatingWebhookConfiguration, v: &mut ValidatingWebhookConfiguration) {
    for hook in m.webhooks.iter_mut().flatten() {
        hook.client_config.ca_bundle = None;
    }
    for hook in v.webhooks.iter_mut().flatten() {
        hook.client_config.ca_bundle = None;
    }
}

/// Under `EnableExternalCerts`: the objects whose caBundle is not `ca_pem` (upstream's check
/// in `configuration.Ensure` and `crd.Ensure`), as `kind/name` — both webhook configurations
/// and every Kruise CRD converted by a webhook. The API server refuses our certificate when
/// calling those until whoever provisions the certificates injects the CA.
pub async fn external_ca_missing(
    client: &kube::Client,
    ca_pem: &str,
) -> Result<Vec<String>, Error> {
    let ca = Some(ByteString(ca_pem.as_bytes().to_vec()));
    let mut missing = Vec::new();
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await?;
    if let Some(m) = mutating
        && m.webhooks
            .iter()
            .flatten()
            .any(|h| h.client_config.ca_bundle != ca)
    {
        missing.push(format!("MutatingWebhookConfiguration/{}", m.name_any()));
    }
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME)
        .await?;
    if let Some(v) = validating
        && v.webhooks
            .iter()
            .flatten()
            .any(|h| h.client_config.ca_bundle != ca)
    {
        missing.push(format!("ValidatingWebhookConfiguration/{}", v.name_any()));
    }
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for crd in crds.list(&ListParams::default()).await? {
        if converted_by_us(&crd)
            && crd
                .spec
                .conversion
                .as_ref()
                .and_then(|c| c.webhook.as_ref())
                .and_then(|w| w.client_config.as_ref())
                .map(|c| &c.ca_bundle)
                != Some(&ca)
        {
            missing.push(format!("CustomResourceDefinition/{}", crd.name_any()));
        }
    }
    Ok(missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `EnableExternalCerts`: what we apply carries no caBundle, so the injected one stays.
    #[test]
    fn external_certs_leave_every_ca_bundle_out() {
        let cfg = WebhookConfig::default();
        let mut m = mutating_configuration(&cfg, "CA");
        let mut v = validating_configuration(&cfg, "CA");
        let all = |m: &MutatingWebhookConfiguration, v: &ValidatingWebhookConfiguration| {
            let mut b: Vec<_> = m
                .webhooks
                .iter()
                .flatten()
                .map(|h| h.client_config.ca_bundle.clone())
                .collect();
            b.extend(
                v.webhooks
                    .iter()
                    .flatten()
                    .map(|h| h.client_config.ca_bundle.clone()),
            );
            b
        };
        assert!(
            all(&m, &v)
                .iter()
                .all(|b| b.as_ref().is_some_and(|b| b.0 == b"CA"))
        );
        leave_ca_bundles(&mut m, &mut v);
        let bundles = all(&m, &v);
        assert!(bundles.len() > 10, "{}", bundles.len());
        assert!(bundles.iter().all(Option::is_none));
    }
}
