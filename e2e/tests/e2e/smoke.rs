//! The smoke gate, run before anything else (`hack/test.sh` stops the run with the components'
//! logs when it fails): the cluster has a Ready node, Kruise-rs serves (manager, webhook,
//! daemon), and one CloneSet rolls out in place. One test, so that a broken install costs
//! minutes, not the whole suite's timeouts.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::keys;
use kruise_e2e::cloneset::{self, set_image, wait_rolled_out};
use kruise_e2e::mode::{self, Mode};
use kruise_e2e::{TestNamespace, client, container_status, image, pod_condition, wait_for};
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

/// Each step's own limit: the whole gate stays well inside the five minutes a broken install
/// may cost.
const STEP: Duration = Duration::from_secs(60);

#[tokio::test]
async fn smoke_cluster_kruise_and_one_in_place_rollout() {
    let client = client().await.expect("cluster");

    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("a Ready node", STEP, || async {
        let list = nodes.list(&ListParams::default()).await?;
        Ok(list.items.iter().any(kruise_e2e::node_ready).then_some(()))
    })
    .await
    .expect("the cluster has a Ready node");

    if mode::mode() == Mode::InCluster {
        mode::manager_leader_pod(&client)
            .await
            .expect("a manager Pod holds the lease");
        let daemon = mode::daemon_pod(&client).await.expect("the daemon Pod");
        assert!(
            kruise_e2e::pod_ready(&daemon),
            "the daemon Pod {} is Ready",
            daemon.name_any()
        );
    }

    let ns = TestNamespace::create(&client, "e2e-smoke")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"
    }});
    // The webhook answers: the CloneSet is defaulted and validated through it.
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 2, "v1", strategy).expect("cs"),
    )
    .await
    .expect("the webhook admits a CloneSet");
    wait_rolled_out(&api, "web", 2, STEP)
        .await
        .expect("2 Pods Ready");
    let before = cloneset::pods(&pods, "web").await.expect("pods");
    for p in &before {
        // The Pod webhook injected the readiness gate and the manager set it.
        assert_eq!(
            pod_condition(p, keys::KRUISE_POD_READY),
            Some("True"),
            "{} has the KruisePodReady condition True",
            p.name_any()
        );
    }

    set_image(&api, "web", "v2").await.expect("set image");
    wait_rolled_out(&api, "web", 2, STEP * 2)
        .await
        .expect("the in-place rollout completes");
    let after = cloneset::pods(&pods, "web").await.expect("pods");
    assert_eq!(after.len(), 2);
    for b in &before {
        let a = after
            .iter()
            .find(|a| a.uid() == b.uid())
            .unwrap_or_else(|| panic!("Pod {} was replaced, not updated in place", b.name_any()));
        let app = container_status(a, "app").expect("app status");
        assert_eq!(
            app.restart_count,
            1,
            "{}: the container restarted once",
            a.name_any()
        );
        assert_eq!(
            a.spec.as_ref().map(|s| s.containers[0].image.clone()),
            Some(Some(image("testapp", "v2")))
        );
        assert_ne!(
            Some(app.container_id.clone()),
            b.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.name == "app"))
                .map(|c| c.container_id.clone()),
            "{}: a new container runs",
            a.name_any()
        );
    }
    ns.delete().await.expect("delete ns");
}
