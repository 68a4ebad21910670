//! ResourceDistribution helpers. A distribution is cluster-scoped and writes into every
//! namespace it targets, so a test names its distribution uniquely, targets only namespaces it
//! created (by name, or by a label only they carry) and never uses `allNamespaces`.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kruise_api::apps::v1alpha1::ResourceDistribution;
use kruise_api::keys;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::Result;

/// The ResourceDistributions API.
pub fn api(client: &Client) -> Api<ResourceDistribution> {
    Api::all(client.clone())
}

/// A distribution of `resource` to `targets`.
pub fn new(name: &str, resource: Value, targets: Value) -> Result<ResourceDistribution> {
    Ok(serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1ALPHA1,
        "kind": keys::RD_KIND,
        "metadata": {"name": name},
        "spec": {"resource": resource, "targets": targets},
    }))?)
}

/// An Opaque Secret manifest named `name` with string data `data`.
pub fn secret(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name}, "stringData": data})
}

/// Creates the distribution.
pub async fn create(client: &Client, rd: &ResourceDistribution) -> Result<ResourceDistribution> {
    Ok(api(client).create(&PostParams::default(), rd).await?)
}

/// Deletes the distribution (background: the copies go with the garbage collector).
pub async fn delete(client: &Client, name: &str) -> Result<()> {
    match api(client).delete(name, &DeleteParams::background()).await {
        Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The Secret `name` in `ns`, if any.
pub async fn secret_in(client: &Client, ns: &str, name: &str) -> Result<Option<Secret>> {
    Ok(Api::<Secret>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?)
}

/// Creates a namespace `name` with `labels` (deleted by [`delete_namespace`]).
pub async fn create_namespace(client: &Client, name: &str, labels: Value) -> Result<()> {
    let mut all = json!({crate::E2E_LABEL: "resourcedistribution"});
    if let (Some(a), Some(l)) = (all.as_object_mut(), labels.as_object()) {
        a.extend(l.clone());
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name, "labels": all}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(())
}

/// Deletes a namespace (already gone is fine).
pub async fn delete_namespace(client: &Client, name: &str) -> Result<()> {
    match Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::background())
        .await
    {
        Ok(_) | Err(kube::Error::Api(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The notes of the Events with this reason about the distribution `name`.
pub async fn event_notes(client: &Client, name: &str, reason: &str) -> Result<Vec<String>> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::all(client.clone());
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some(keys::RD_KIND)
                && e.reason.as_deref() == Some(reason)
        })
        .filter_map(|e| e.message)
        .collect())
}
