//! The cluster under test itself: a Ready node, Pods from the local registry, the upstream
//! in-place image guarantee the whole project rests on, and garbage collection.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_e2e::{TestNamespace, client, container_status, image, pod_ready, wait_for, wait_pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

fn test_pod(name: &str, tag: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "app",
                "image": image("testapp", tag),
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {
                    "httpGet": {"path": "/", "port": 8080},
                    "periodSeconds": 1
                }
            }]
        }
    }))
    .expect("valid pod")
}

#[tokio::test]
async fn node_is_ready() {
    let client = client().await.expect("cluster");
    let nodes: Api<Node> = Api::all(client);
    let ready = wait_for("a Ready node", Duration::from_secs(60), || async {
        let list = nodes.list(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .find(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .map(|n| n.name_any()))
    })
    .await
    .expect("node Ready");
    assert!(!ready.is_empty());
}

#[tokio::test]
async fn pod_runs_from_local_registry() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pod").await.expect("ns");
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &test_pod("web", "v1"))
        .await
        .expect("create pod");
    let pod = wait_pod(&pods, "web", "Ready", Duration::from_secs(90), pod_ready)
        .await
        .expect("pod Ready");
    let status = container_status(&pod, "app").expect("container status");
    assert_eq!(status.image, image("testapp", "v1"));
    assert!(
        status.image_id.contains("sha256:"),
        "imageID is a digest: {}",
        status.image_id
    );
    ns.delete().await.expect("delete ns");
}

/// Patching only a container's image restarts that container in the same Pod: same UID, a new
/// containerID, restartCount 1 and a different imageID.
#[tokio::test]
async fn image_patch_restarts_container_in_place() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-inplace")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    pods.create(&PostParams::default(), &test_pod("web", "v1"))
        .await
        .expect("create pod");
    let before = wait_pod(&pods, "web", "Ready", Duration::from_secs(90), pod_ready)
        .await
        .expect("pod Ready");
    let old = container_status(&before, "app").expect("status").clone();
    assert_eq!(old.restart_count, 0);
    let old_id = old.container_id.clone().expect("containerID");

    let patch = json!({"spec": {"containers": [{"name": "app", "image": image("testapp", "v2")}]}});
    pods.patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("patch image");

    let after = wait_pod(
        &pods,
        "web",
        "container restarted on the new image and Ready",
        Duration::from_secs(90),
        |p| {
            container_status(p, "app").is_some_and(|c| {
                c.container_id.as_deref().is_some_and(|id| id != old_id) && c.ready
            }) && pod_ready(p)
        },
    )
    .await
    .expect("in-place restart");
    let new = container_status(&after, "app").expect("status");
    assert_eq!(after.uid(), before.uid(), "the Pod was not recreated");
    assert_eq!(new.restart_count, 1);
    assert_eq!(new.image, image("testapp", "v2"));
    assert_ne!(
        new.image_id, old.image_id,
        "the new container runs another image"
    );
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn deleting_a_deployment_collects_its_replicaset_and_pods() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-gc").await.expect("ns");
    let deploys: Api<Deployment> = ns.api();
    let rs: Api<ReplicaSet> = ns.api();
    let pods: Api<Pod> = ns.api();
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{"name": "app", "image": image("testapp", "v1")}]
                }
            }
        }
    }))
    .expect("valid deployment");
    deploys
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create deployment");
    let lp = ListParams::default().labels("app=web");
    wait_for(
        "2 pods of the deployment",
        Duration::from_secs(60),
        || async {
            let n = pods.list(&lp).await?.items.len();
            Ok((n == 2).then_some(()))
        },
    )
    .await
    .expect("pods created");
    assert_eq!(rs.list(&lp).await.expect("list rs").items.len(), 1);

    deploys
        .delete("web", &DeleteParams::background())
        .await
        .expect("delete deployment");
    wait_for(
        "the ReplicaSet and Pods to be garbage-collected",
        Duration::from_secs(90),
        || async {
            let left = rs.list(&lp).await?.items.len() + pods.list(&lp).await?.items.len();
            Ok((left == 0).then_some(()))
        },
    )
    .await
    .expect("garbage collection");
    ns.delete().await.expect("delete ns");
}
