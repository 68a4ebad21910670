//! Advanced DaemonSet on the real kubelet: the node's daemon Pod is updated in place (same UID,
//! one container restart, a new image) and the node is never without its Pod.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_e2e::daemonset::{self, pod_node, set_image, status_i64, status_str, wait_rolled_out};
use kruise_e2e::{TestNamespace, client, container_status, image};
use kube::api::{ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use serde_json::json;

const ROLLOUT: Duration = Duration::from_secs(180);

/// The nodes a daemon Pod can land on here: the schedulable ones (this cluster has one kubelet).
async fn schedulable_nodes(client: &kube::Client) -> Vec<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .filter(|n| {
            let taints = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            !taints
                .iter()
                .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        })
        .map(|n| n.name_any())
        .collect()
}

#[tokio::test]
async fn image_update_is_in_place_and_the_node_keeps_its_pod() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ads-inplace")
        .await
        .expect("ns");
    let api = daemonset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let nodes = schedulable_nodes(&client).await;
    assert!(!nodes.is_empty(), "no schedulable node");
    let ds = daemonset::new(
        "agent",
        &image("testapp", "v1"),
        json!({"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1}}),
        json!({}),
    )
    .expect("ds");
    api.create(&PostParams::default(), &ds)
        .await
        .expect("create DaemonSet");
    let first = wait_rolled_out(&api, "agent", None, ROLLOUT)
        .await
        .expect("initial rollout");
    let desired = status_i64(&first, "desiredNumberScheduled");
    assert!(
        desired >= i64::try_from(nodes.len()).unwrap_or(0),
        "status {:?}",
        first.data["status"]
    );
    let before = daemonset::pods(&pods, "agent").await.expect("pods");
    assert_eq!(
        i64::try_from(before.len()).unwrap_or(0),
        desired,
        "one Pod per node"
    );
    for p in &before {
        assert!(
            p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some(),
            "scheduled"
        );
        assert_eq!(
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            pod_node(p)
        );
        let v = serde_json::to_value(p.spec.as_ref()).expect("json");
        assert_eq!(
            v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchFields"][0]["key"],
            "metadata.name",
            "bound through node affinity"
        );
    }
    let target = before
        .iter()
        .find(|p| nodes.contains(&pod_node(p)))
        .expect("a Pod on the kubelet's node")
        .clone();
    let uid = target.uid().unwrap_or_default();
    let cid = container_status(&target, "app").and_then(|c| c.container_id.clone());

    // Watch every change of the DaemonSet's Pods during the update.
    let seen: Arc<Mutex<Vec<(String, String, bool)>>> = Arc::default();
    let sink = seen.clone();
    let watch_api = pods.clone();
    let task = tokio::spawn(async move {
        let cfg = watcher::Config::default().labels("app=agent");
        let mut stream = watcher::watcher(watch_api, cfg).boxed();
        while let Some(ev) = stream.next().await {
            let (p, deleted) = match ev {
                Ok(Event::Apply(p) | Event::InitApply(p)) => (p, false),
                Ok(Event::Delete(p)) => (p, true),
                _ => continue,
            };
            let phase = p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            if let Ok(mut v) = sink.lock() {
                v.push((p.uid().unwrap_or_default(), phase, deleted));
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_image(&api, "agent", &image("testapp", "v2"))
        .await
        .expect("set image");
    let old_hash = status_str(&first, "updateRevision").to_owned();
    let done = daemonset::wait_status(&api, "agent", "new revision rolled out", ROLLOUT, |d| {
        status_str(d, "updateRevision") != old_hash
            && status_i64(d, "updatedNumberScheduled") == desired
            && status_i64(d, "numberAvailable") == desired
    })
    .await
    .expect("rollout");
    task.abort();

    let after = daemonset::pods(&pods, "agent").await.expect("pods");
    let p = after
        .iter()
        .find(|p| p.uid().as_deref() == Some(uid.as_str()))
        .unwrap_or_else(|| {
            panic!(
                "Pod {} was replaced: {:?}",
                target.name_any(),
                after.iter().map(|p| p.uid()).collect::<Vec<_>>()
            )
        });
    let c = container_status(p, "app").expect("container status");
    assert_eq!(c.restart_count, 1, "restarted exactly once");
    assert_ne!(c.container_id, cid, "a new container");
    assert_eq!(c.image, image("testapp", "v2"));
    assert_eq!(
        p.labels()
            .get("controller-revision-hash")
            .map(String::as_str),
        Some(status_str(&done, "updateRevision"))
    );
    let history = seen.lock().map(|v| v.clone()).unwrap_or_default();
    assert!(!history.is_empty());
    for (u, phase, deleted) in &history {
        assert_eq!(u, &uid, "no other Pod appeared on the node: {history:?}");
        assert!(
            !deleted && phase == "Running",
            "the node's Pod was never gone or stopped: {history:?}"
        );
    }
    ns.delete().await.expect("cleanup");
}

/// The validating webhook refuses bad DaemonSets before anything reaches a node, and its
/// message names the field to fix.
#[tokio::test]
async fn invalid_daemonsets_are_refused_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ads-invalid")
        .await
        .expect("ns");
    let api = daemonset::api(&client, &ns.name);
    let standard = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}});
    let base = || daemonset::new("bad", &image("testapp", "v1"), standard.clone(), json!({}));
    let mut cases: Vec<(&str, kube::api::DynamicObject, &str)> = Vec::new();
    let mut ds = base().expect("ds");
    ds.data["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    cases.push((
        "selector vs labels",
        ds,
        "spec.template.metadata.labels: Invalid value",
    ));
    let mut ds = base().expect("ds");
    ds.data["spec"]["updateStrategy"]["rollingUpdate"] =
        json!({"maxUnavailable": 0, "maxSurge": 0});
    cases.push((
        "both zero",
        ds,
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
    ));
    let mut ds = base().expect("ds");
    ds.data["spec"]["updateStrategy"]["rollingUpdate"] = json!({"maxUnavailable": "30"});
    cases.push((
        "int-or-percent syntax",
        ds,
        "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"30\"",
    ));
    let mut ds = base().expect("ds");
    ds.data["spec"]["updateStrategy"]["rollingUpdate"] = json!({"partition": "150%"});
    cases.push((
        "partition range",
        ds,
        "spec.updateStrategy.rollingUpdate.partition: Invalid value: \"150%\"",
    ));
    let mut ds = base().expect("ds");
    ds.data["spec"]["updateStrategy"]["rollingUpdate"] = json!({"rollingUpdateType": "Surging"});
    cases.push((
        "Surging without maxSurge",
        ds,
        "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 0: must be greater than 0 when rollingUpdateType is Surging",
    ));
    let mut ds = base().expect("ds");
    ds.data["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    cases.push((
        "restartPolicy",
        ds,
        "spec.template.spec.restartPolicy: Unsupported value: \"Never\"",
    ));
    for (what, ds, want) in cases {
        let err = api
            .create(&PostParams::default(), &ds)
            .await
            .expect_err(what)
            .to_string();
        assert!(
            err.contains("vdaemonset.kb.io"),
            "{what}: refused by our webhook: {err}"
        );
        assert!(err.contains(want), "{what}: message names the field: {err}");
    }
    // The selector cannot change once created; the template can.
    api.create(&PostParams::default(), &base().expect("ds"))
        .await
        .expect("a valid DaemonSet is admitted");
    let err = daemonset::patch_spec(
        &api,
        "bad",
        json!({"selector": {"matchLabels": {"app": "bad", "tier": "x"}},
               "template": {"metadata": {"labels": {"app": "bad", "tier": "x"}}}}),
    )
    .await
    .expect_err("selector change refused")
    .to_string();
    assert!(
        err.contains("spec.selector: Forbidden: field is immutable"),
        "names the field: {err}"
    );
    let got = api.get("bad").await.expect("get");
    assert_eq!(
        got.data["spec"]["selector"],
        json!({"matchLabels": {"app": "bad"}})
    );
    // Defaulting filled what the user left out.
    let ru = &got.data["spec"]["updateStrategy"]["rollingUpdate"];
    assert_eq!(ru["maxSurge"], json!(0), "{ru}");
    assert_eq!(ru["rollingUpdateType"], json!("Standard"), "{ru}");
    ns.delete().await.expect("delete ns");
}
