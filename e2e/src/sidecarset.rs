//! SidecarSet helpers: the cluster-scoped SidecarSets a test creates are scoped to its
//! namespace through `namespaceSelector` (so parallel tests never inject into each other's
//! Pods) and deleted again by [`Guard::delete`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::keys;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::Result;

/// The SidecarSets API.
pub fn api(client: &Client) -> Api<SidecarSet> {
    Api::all(client.clone())
}

/// A v1beta1 SidecarSet selecting `app=<app>` Pods of namespace `ns`; `spec` is merged over it.
pub fn new(name: &str, ns: &str, app: &str, spec: Value) -> Result<SidecarSet> {
    let mut base = json!({
        "apiVersion": keys::APPS_V1BETA1,
        "kind": "SidecarSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "namespaceSelector": {"matchLabels": {keys::k8s::NAMESPACE_NAME_LABEL: ns}},
        }
    });
    json_patch::merge(&mut base["spec"], &spec);
    Ok(serde_json::from_value(base)?)
}

/// Deletes the SidecarSets it names when asked (cluster-scoped objects outlive namespaces).
pub struct Guard {
    api: Api<SidecarSet>,
    names: Vec<String>,
}

impl Guard {
    /// Creates `set` and remembers it.
    pub async fn create(client: &Client, set: &SidecarSet) -> Result<(Self, SidecarSet)> {
        let api = api(client);
        let created = api.create(&PostParams::default(), set).await?;
        let names = vec![created.metadata.name.clone().unwrap_or_default()];
        Ok((Self { api, names }, created))
    }

    /// Deletes every SidecarSet it created.
    pub async fn delete(self) -> Result<()> {
        for n in &self.names {
            match self.api.delete(n, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// Merge-patches the SidecarSet's spec.
pub async fn patch_spec(api: &Api<SidecarSet>, name: &str, spec: Value) -> Result<()> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "spec": spec })),
    )
    .await?;
    Ok(())
}

/// Container names of the Pod in spec order.
pub fn container_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
        .collect()
}

/// The image the Pod's spec gives a container.
pub fn spec_image(pod: &Pod, container: &str) -> Option<String> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == container)?
        .image
        .clone()
}

/// Env of a container as name → value (values from fields count as empty).
pub fn env(pod: &Pod, container: &str) -> BTreeMap<String, String> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .filter(|c| c.name == container)
        .flat_map(|c| c.env.iter().flatten())
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

/// The notes of the Events with this reason about the cluster-scoped SidecarSet `name`.
pub async fn event_notes(client: &Client, name: &str, reason: &str) -> Result<Vec<String>> {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::all(client.clone());
    let lp = kube::api::ListParams::default().fields(&format!("involvedObject.name={name}"));
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("SidecarSet")
                && e.reason.as_deref() == Some(reason)
        })
        .filter_map(|e| e.message)
        .collect())
}

/// Merge-patches the labels of a namespace (`null` removes one).
pub async fn label_namespace(client: &Client, ns: &str, labels: Value) -> Result<()> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    api.patch(
        ns,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": labels}})),
    )
    .await?;
    Ok(())
}
