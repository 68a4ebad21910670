//! What an uninstall must do before Kruise-rs goes (the Helm chart's pre-delete hook runs it,
//! as `kruise-manager --pre-delete-hook`): refuse while Kruise objects users made exist, as
//! upstream's `helm_hook` does for its workloads, then remove the webhook configurations and the
//! admission policy the manager created at run time, which no manifest lists.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::discovery::{Discovery, verbs};

use crate::Error;
use kruise_api::keys;

/// Kinds Kruise-rs makes itself, one per node: never a user's.
const MANAGED: &[&str] = &["nodeimages", "nodepodprobes"];

/// `Kind namespace/name` of every Kruise object a user made: any object of a Kruise kind but
/// those Kruise-rs makes per node and those another object controls (they go with it).
pub async fn user_objects(client: &kube::Client) -> Result<Vec<String>, Error> {
    let discovery = Discovery::new(client.clone())
        .filter(&[keys::APPS_GROUP, keys::POLICY_GROUP])
        .run()
        .await?;
    let mut found = Vec::new();
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) || MANAGED.contains(&ar.plural.as_str()) {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            for o in api.list(&ListParams::default()).await? {
                let controlled = o
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.controller == Some(true));
                if controlled {
                    continue;
                }
                let name = o.metadata.name.unwrap_or_default();
                found.push(match o.metadata.namespace {
                    Some(ns) => format!("{} {ns}/{name}", ar.kind),
                    None => format!("{} {name}", ar.kind),
                });
            }
        }
    }
    Ok(found)
}

/// Refuses (unless `allow_objects`) while [`user_objects`] finds any, then deletes both webhook
/// configurations.
pub async fn pre_delete(client: &kube::Client, allow_objects: bool) -> Result<(), Error> {
    if !allow_objects {
        let found = user_objects(client).await?;
        if !found.is_empty() {
            return Err(Error::UserObjectsExist(found));
        }
    }
    delete_webhook_configurations(client).await
}

/// Deletes both webhook configurations and the Pod webhook's admission policy (absent ones are
/// fine).
pub async fn delete_webhook_configurations(client: &kube::Client) -> Result<(), Error> {
    let dp = DeleteParams::default();
    super::gone(
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME, &dp)
            .await,
    )?;
    super::gone(
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME, &dp)
            .await,
    )?;
    super::policy::remove(client).await?;
    tracing::info!("webhook configurations and admission policy deleted");
    Ok(())
}
