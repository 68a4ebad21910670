//! Namespaces and Pods. The scale cluster has no controller-manager: no ServiceAccounts to wait
//! for, and no garbage collector, so Pods are deleted here.

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_e2e::{Result, wait_for};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::timeout_for;

/// Requests the setup (creating and deleting bare Pods) keeps in flight; not measured.
pub(crate) const SETUP_CONCURRENCY: usize = 64;

pub(crate) async fn create_ns(client: &Client, name: &str) -> Result<Api<Pod>> {
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {kruise_e2e::E2E_LABEL: "scale-bench"}}
    }))?;
    let api = Api::<Namespace>::all(client.clone());
    if api.get_opt(name).await?.is_none() {
        api.create(&PostParams::default(), &ns).await?;
    }
    Ok(Api::namespaced(client.clone(), name))
}

/// Deletes the Pods one by one (one delete-collection of 5,000 Pods outlives the client's
/// request timeout), retrying on errors, and waits until they are gone.
pub(crate) async fn delete_pods(pods: &Api<Pod>, selector: &str, n: usize) -> Result<()> {
    wait_for(
        &format!("{selector} pods deleted"),
        timeout_for(n),
        || async {
            let left = pods
                .list_metadata(&ListParams::default().labels(selector))
                .await?;
            if left.items.is_empty() {
                return Ok(Some(()));
            }
            let live = left
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| p.name_any());
            // Errors (a Pod already gone, a dropped connection) are retried by the next round.
            stream::iter(live)
                .for_each_concurrent(SETUP_CONCURRENCY, |name| async move {
                    let _ = pods.delete(&name, &DeleteParams::default()).await;
                })
                .await;
            Ok(None)
        },
    )
    .await
}

pub(crate) fn pod_spec(image: &str) -> serde_json::Value {
    json!({
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "app", "image": image}]
    })
}
