//! WorkloadSpreads as the suite reads and writes them: raw JSON, so the webhook sees exactly
//! what a user would write and the suite checks upstream's field names.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{MatchedWorkloadSpread, WorkloadSpread};
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

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

/// Creates the WorkloadSpread `name` (see [`create_raw`]) and returns once the Pod webhook
/// spreads by it, so that the workload a test creates next has every Pod spread.
///
/// The webhook reads WorkloadSpreads from its own watch, as upstream reads its informer, so a
/// Pod created right after the WorkloadSpread can be admitted before the watch delivers it. A
/// watch delivers events in order: once the webhook spreads by a probe WorkloadSpread created
/// after this one, it has this one too. The probe targets a Job of its own name, is asked for by
/// a dry-run Pod create (nothing is written), and is deleted after. With two manager replicas
/// the probe reaches one of them; the wait for the controller's `observedGeneration` after it
/// gives the other's watch the same time again.
pub async fn create_seen(
    client: &Client,
    ns: &str,
    name: &str,
    spec: Value,
) -> crate::Result<DynamicObject> {
    let created = create_raw(client, ns, name, spec).await?;
    let probe = format!("{name}-seen");
    create_raw(
        client,
        ns,
        &probe,
        json!({
            "targetRef": {"apiVersion": "batch/v1", "kind": "Job", "name": probe},
            "subsets": [{"name": "probe", "patch": {"metadata": {"labels": {"probe": "true"}}}}]
        }),
    )
    .await?;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{probe}-"), "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "Job", "name": probe,
            "uid": "00000000-0000-4000-8000-000000000000", "controller": true}]},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "probe", "image": crate::image("testapp", "v1")}]}
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    crate::wait_for(
        &format!("the Pod webhook to spread by WorkloadSpread {probe}"),
        Duration::from_secs(60),
        || async {
            let answer = pods.create(&dry, &pod).await?;
            let matched = MatchedWorkloadSpread::of(answer.metadata.annotations.as_ref());
            Ok(matched.is_some_and(|m| m.name == probe).then_some(()))
        },
    )
    .await?;
    let spreads = api(client, ns);
    spreads.delete(&probe, &DeleteParams::default()).await?;
    // Upstream's e2e waits for this too: the controller has seen the spec.
    let generation = created.metadata.generation;
    crate::wait_for(
        &format!("WorkloadSpread {name} observed"),
        Duration::from_secs(60),
        || async {
            let seen = spreads
                .get(name)
                .await?
                .status
                .map(|s| s.observed_generation);
            Ok((seen.is_some() && seen == generation).then_some(()))
        },
    )
    .await?;
    Ok(created)
}
