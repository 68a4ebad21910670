//! PersistentPodStates as the suite reads and writes them.

use kruise_api::apps::v1alpha1::PersistentPodState;
use kube::api::{DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::Value;

pub fn api(client: &Client, ns: &str) -> Api<PersistentPodState> {
    Api::namespaced(client.clone(), ns)
}

/// Creates the PersistentPodState `name` with raw `spec` (raw, so that the webhook sees
/// exactly what a user would write); the API server's answer.
pub async fn create_raw(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> std::result::Result<DynamicObject, kube::Error> {
    let ar = kube::api::ApiResource::erase::<PersistentPodState>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "PersistentPodState",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .map_err(kube::Error::SerdeError)?;
    api.create(&PostParams::default(), &obj).await
}

/// The message of a refused request; `None` when it was accepted or failed otherwise.
pub fn refusal(res: std::result::Result<DynamicObject, kube::Error>) -> Option<String> {
    match res {
        Err(kube::Error::Api(s)) => Some(s.message),
        _ => None,
    }
}
