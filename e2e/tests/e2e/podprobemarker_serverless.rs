//! PodProbeMarker on serverless Pods (gate `EnablePodProbeMarkerOnServerless`, off by default
//! as upstream: a gated-phase test), installed from `deploy/`. A Node object labelled
//! `type: virtual-kubelet` stands for a serverless node (no kubelet, no kruise-daemon: the test
//! plays the node's agent by writing the Pod's conditions, as upstream's agent reports its
//! results). The Pod webhook writes the marker's probes into `kruise.io/podprobe`; the
//! manager marks the serverless Pod from its conditions and gives its node no NodePodProbe; a
//! Pod on a real node with the same conditions written by hand is not marked from them.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::features::Gate;
use kruise_api::keys;
use kruise_e2e::podprobemarker::{self, listed_probes, node_pod_probe, testapp_pod};
use kruise_e2e::{ScratchNode, TestNamespace, client, image, manager, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const MARK: Duration = Duration::from_secs(60);
const IDLE: &str = "e2e.kruise.io/idle";
const HEALTHY: &str = "e2e.kruise.io/healthy";
const COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// Two probes with condition types and policies. Their handlers never run here: the
/// serverless node has no daemon, and on the real node the first run is an hour away, so
/// only the conditions written by the test can mark a Pod.
fn probes() -> Value {
    let later = |cmd: &str| json!({"exec": {"command": [cmd]}, "initialDelaySeconds": 3600});
    json!([
        {"name": "idle", "containerName": "main", "probe": later("/idle.sh"),
            "podConditionType": IDLE,
            "markerPolicy": [
                {"state": "Succeeded", "labels": {"idle": "true"}, "annotations": {COST: "-10"}},
                {"state": "Failed", "labels": {"idle": "false"}, "annotations": {COST: "10"}}]},
        {"name": "healthy", "containerName": "main", "probe": later("/healthy.sh"),
            "podConditionType": HEALTHY,
            "markerPolicy": [
                {"state": "Succeeded", "labels": {"healthy": "true"}},
                {"state": "Failed", "labels": {"healthy": "false"}}]},
    ])
}

/// Writes `conditions` (type, status) into the Pod's status, as a node agent does.
async fn report(pods: &Api<Pod>, name: &str, conditions: &[(&str, &str)]) {
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|(t, s)| json!({"type": t, "status": s}))
        .collect();
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Strategic(json!({"status": {"conditions": conditions}})),
    )
    .await
    .unwrap_or_else(|e| panic!("report conditions of {name}: {e}"));
}

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.labels().get(key).map(String::as_str)
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.annotations().get(key).map(String::as_str)
}

/// The probes written for the agent: name, container and condition, and no marker policy.
fn written_probes(pod: &Pod) -> Vec<(String, String, String)> {
    let raw = annotation(pod, keys::POD_PROBE_MARKER_ANNOTATION).unwrap_or("[]");
    let list: Vec<Value> = serde_json::from_str(raw).expect("kruise.io/podprobe is JSON");
    for p in &list {
        assert!(p.get("markerPolicy").is_none(), "policy written: {p}");
        assert!(p["probe"]["exec"].is_object(), "the probe itself: {p}");
    }
    list.iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap_or_default().to_owned();
            (s("name"), s("containerName"), s("podConditionType"))
        })
        .collect()
}

#[tokio::test]
async fn gated_serverless_pods_get_their_probes_and_are_marked_from_their_conditions() {
    let client = client().await.expect("cluster");
    manager::require_gates(&client, &[Gate::EnablePodProbeMarkerOnServerless])
        .await
        .expect("the gated phase's manager");
    let ns = TestNamespace::create(&client, "e2e-ppm-vk")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    let api = podprobemarker::api(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &podprobemarker::marker("game", "game", probes()).expect("marker"),
    )
    .await
    .expect("create marker");

    // The serverless node: upstream's label, and the taint a virtual-kubelet node carries so
    // that nothing else is scheduled onto it.
    let vk = format!("{}-vk", ns.name);
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": vk, "labels": {keys::VIRTUAL_KUBELET_LABEL_KEY: keys::VIRTUAL_KUBELET_LABEL_VALUE}},
        "spec": {"taints": [{"key": "virtual-kubelet.io/provider", "value": "e2e", "effect": "NoSchedule"}]},
    }))
    .expect("node");
    let vk_node = ScratchNode::create(&client, &node)
        .await
        .expect("create node");
    let serverless: Pod = serde_json::from_value(json!({
        "metadata": {"name": "vk", "labels": {"app": "game"}},
        "spec": {"nodeName": vk, "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}],
            "containers": [{"name": "main", "image": image("testapp", "v1")}]},
    }))
    .expect("pod");
    // The webhook reads markers from its watch cache, which learns of the new one a moment after
    // the API server answered: a dry run through admission shows when it has.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    wait_for("the Pod webhook to know the marker", MARK, || async {
        let answer = pods.create(&dry, &serverless).await?;
        Ok((!written_probes(&answer).is_empty()).then_some(()))
    })
    .await
    .expect("the webhook's cache");
    let created = pods
        .create(&PostParams::default(), &serverless)
        .await
        .expect("create serverless pod");
    let normal = testapp_pod(&pods, "normal", "game").await.expect("normal");

    // The webhook wrote the probes for the agent (upstream writes them on every selected Pod).
    let want = vec![
        ("idle".to_owned(), "main".to_owned(), IDLE.to_owned()),
        ("healthy".to_owned(), "main".to_owned(), HEALTHY.to_owned()),
    ];
    for p in [&created, &normal] {
        assert_eq!(written_probes(p), want, "{}", p.name_any());
        assert_eq!(
            annotation(p, keys::POD_PROBE_MARKER_LIST_ANNOTATION),
            Some("game")
        );
    }

    // The same conditions written on the normal Pod first: the watch delivers them before the
    // serverless Pod's, so the reconcile that marks the serverless Pod has seen them too.
    report(&pods, "normal", &[(IDLE, "True"), (HEALTHY, "False")]).await;
    report(
        &pods,
        "vk",
        &[("Initialized", "True"), (IDLE, "True"), (HEALTHY, "False")],
    )
    .await;
    let marked = wait_for("the serverless Pod marked", MARK, || async {
        let p = pods.get("vk").await?;
        let ok = label(&p, "idle") == Some("true")
            && label(&p, "healthy") == Some("false")
            && annotation(&p, COST) == Some("-10");
        Ok(ok.then_some(p))
    })
    .await
    .expect("marked");
    assert_eq!(marked.uid(), created.uid());
    assert_eq!(label(&marked, "app"), Some("game"), "its own labels stay");

    // The agent reports a change: the other state's markers replace these.
    report(&pods, "vk", &[(IDLE, "False")]).await;
    wait_for("the serverless Pod re-marked", MARK, || async {
        let p = pods.get("vk").await?;
        let ok = label(&p, "idle") == Some("false") && annotation(&p, COST) == Some("10");
        Ok(ok.then_some(()))
    })
    .await
    .expect("re-marked");

    // A Pod on a real node is marked from the daemon's results only.
    let normal = pods.get("normal").await.expect("normal");
    assert_eq!(label(&normal, "idle"), None, "{:?}", normal.labels());
    assert_eq!(label(&normal, "healthy"), None, "{:?}", normal.labels());
    assert_eq!(annotation(&normal, COST), None);
    // Its node's NodePodProbe lists it; the serverless node gets none.
    let host = normal
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound");
    let uid = normal.uid().expect("uid");
    wait_for("the normal Pod in its NodePodProbe", MARK, || async {
        let npp = node_pod_probe(&client, &host).await?;
        Ok(npp
            .filter(|n| listed_probes(n, &uid) == ["game#idle", "game#healthy"])
            .map(|_| ()))
    })
    .await
    .expect("listed");
    assert_eq!(
        node_pod_probe(&client, &vk).await.expect("get"),
        None,
        "no NodePodProbe for a virtual-kubelet node"
    );

    // No kubelet finishes the serverless Pod's deletion: force it, then the node goes.
    pods.delete("vk", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete vk pod");
    drop(vk_node);
    api.delete("game", &DeleteParams::default())
        .await
        .expect("delete marker");
    ns.delete().await.expect("delete ns");
}
