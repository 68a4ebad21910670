//! WorkloadSpreads as the suite reads and writes them: raw JSON, so the webhook sees exactly
//! what a user would write and the suite checks upstream's field names.

use kruise_api::apps::v1alpha1::WorkloadSpread;
use kube::api::{ApiResource, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::Value;

pub fn api(client: &Client, ns: &str) -> Api<WorkloadSpread> {
    Api::namespaced(client.clone(), ns)
}

/// Creates the WorkloadSpread `name` with raw `spec`; the API server's answer.
pub async fn create_raw(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> std::result::Result<DynamicObject, kube::Error> {
    let ar = ApiResource::erase::<WorkloadSpread>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "WorkloadSpread",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .map_err(kube::Error::SerdeError)?;
    api.create(&PostParams::default(), &obj).await
}
