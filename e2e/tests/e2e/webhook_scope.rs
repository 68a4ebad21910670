//! Which Pods the Pod webhook sees. With failurePolicy Fail a manager outage refuses every Pod
//! create the webhook covers, so it must skip kube-system, Kruise's own namespace and namespaces
//! labelled `kruise.io/webhook-exempt`. Server-side dry runs show what admission did to a Pod
//! without running it. Runs in dev mode and in cluster.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_api::keys;
use kruise_e2e::{TestNamespace, client, image};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// A Pod with two ordered containers: the webhook gives each a launch barrier env.
fn ordered_pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "scope",
                     "annotations": {keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION: keys::CONTAINER_LAUNCH_PRIORITY_ORDERED}},
        "spec": {"containers": [
            {"name": "a", "image": image("testapp", "v1")},
            {"name": "b", "image": image("sidecar", "v1")}
        ]}
    }))
    .expect("pod")
}

/// Whether admission injected the launch barrier into a dry-run create in `ns`.
async fn mutated_in(client: &Client, ns: &str) -> bool {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let created = pods
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &ordered_pod(),
        )
        .await
        .expect("dry-run create");
    created
        .spec
        .expect("spec")
        .containers
        .iter()
        .flat_map(|c| c.env.iter().flatten())
        .any(|e| e.name == keys::ENV_CONTAINER_BARRIER)
}

#[tokio::test]
async fn pod_webhook_skips_exempt_and_system_namespaces() {
    let client = client().await.expect("cluster");
    let covered = TestNamespace::create(&client, "e2e-scope")
        .await
        .expect("ns");
    let exempt = TestNamespace::create(&client, "e2e-scope-exempt")
        .await
        .expect("ns");
    assert!(
        mutated_in(&client, &covered.name).await,
        "a namespace without the label is covered by the Pod webhook"
    );

    Api::<Namespace>::all(client.clone())
        .patch(
            &exempt.name,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {keys::WEBHOOK_EXEMPT_NAMESPACE_LABEL: "true"}}}),
            ),
        )
        .await
        .expect("label the namespace");
    assert!(
        !mutated_in(&client, &exempt.name).await,
        "a namespace labelled {} is skipped",
        keys::WEBHOOK_EXEMPT_NAMESPACE_LABEL
    );
    assert!(
        !mutated_in(&client, "kube-system").await,
        "kube-system is skipped"
    );
    covered.delete().await.expect("delete ns");
    exempt.delete().await.expect("delete ns");
}
