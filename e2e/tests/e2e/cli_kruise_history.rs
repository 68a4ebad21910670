//! `kubectl-kruise` rollout commands beyond status on the Kruise kinds: pause / resume, history
//! and undo on an Advanced StatefulSet and an Advanced DaemonSet (their ControllerRevisions,
//! the rollback reusing the old revision), the in-place restart (ContainerRecreateRequests,
//! highest ordinal first), and partition / pause / resume / promote on a SidecarSet. Every claim
//! a command prints is checked by reading the cluster back: Pod UIDs, containerIDs,
//! restartCounts, revisions.
//!
//! Needs the binary: `cargo build -p kubectl-kruise`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_e2e::plugin::{
    CLI_LIMIT, Fixture, assert_code, assert_stdout, kruise_resource, template,
};
use kruise_e2e::{container_status, image, wait_for};
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const OK: i32 = 0;
const PAUSED: i32 = 3;

#[derive(Clone, Debug, PartialEq)]
struct Incarnation {
    uid: String,
    container_id: String,
    restarts: i32,
    image: String,
}

/// Pod name → (UID, containerID, restartCount, image) of container `container`.
async fn incarnations(fx: &Fixture, app: &str, container: &str) -> BTreeMap<String, Incarnation> {
    fx.pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list Pods")
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let c = container_status(p, container);
            let spec_image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == container))
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            (
                p.name_any(),
                Incarnation {
                    uid: p.uid().unwrap_or_default(),
                    container_id: c.and_then(|c| c.container_id.clone()).unwrap_or_default(),
                    restarts: c.map(|c| c.restart_count).unwrap_or(-1),
                    image: spec_image,
                },
            )
        })
        .collect()
}

/// The ControllerRevisions in the namespace: name → revision number.
async fn revisions(fx: &Fixture) -> BTreeMap<String, i64> {
    fx.ns
        .api::<ControllerRevision>()
        .list(&ListParams::default())
        .await
        .expect("list ControllerRevisions")
        .items
        .into_iter()
        .map(|r| (r.name_any(), r.revision))
        .collect()
}

/// Every Pod kept its UID, got a new container and restarted `restarts` times in all, on `tag`.
fn assert_in_place(
    before: &BTreeMap<String, Incarnation>,
    after: &BTreeMap<String, Incarnation>,
    restarts: i32,
    tag: &str,
) {
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "the same Pods: {after:?}"
    );
    for (name, now) in after {
        let then = &before[name];
        assert_eq!(now.uid, then.uid, "{name} kept its UID");
        assert_ne!(
            now.container_id, then.container_id,
            "{name} has a new container"
        );
        assert_eq!(now.restarts, restarts, "{name} restart count: {after:?}");
        assert_eq!(now.image, image("testapp", tag), "{name} image");
    }
}

/// The images `rollout history -o json` lists, oldest first, and which one is the update.
async fn history(fx: &Fixture, target: &str) -> (Vec<String>, Vec<bool>) {
    let run = fx.run(&["rollout", "history", target, "-o", "json"]).await;
    assert_code(&run, OK);
    let revs: Vec<Value> = serde_json::from_str(run.stdout.trim()).expect("history JSON");
    (
        revs.iter()
            .map(|r| r["images"][0].as_str().unwrap_or_default().to_string())
            .collect(),
        revs.iter()
            .map(|r| r["update"].as_bool().unwrap_or(false))
            .collect(),
    )
}

/// Advanced StatefulSet `web` of 3 in place: while paused an image change reaches no Pod and
/// `rollout status` exits 3; resume rolls it in place; history lists both revisions; undo goes
/// back to v1 in place by reusing the first revision (no third ControllerRevision: the old one
/// gets the newest number); `rollout restart` recreates every container in place, highest
/// ordinal first.
#[tokio::test]
async fn asts_pause_resume_history_undo_restart() {
    let fx = Fixture::new("e2e-clih-asts").await;
    let ar = kruise_resource(&fx.client, "statefulsets").await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3, "serviceName": "web", "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "web"}},
            "template": template("web", "v1"),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}
        }
    }))
    .expect("Advanced StatefulSet");
    let api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &ar);
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create Advanced StatefulSet");
    assert_code(&fx.status("asts/web").await, OK);
    let v1 = incarnations(&fx, "web", "app").await;
    assert_eq!(v1.len(), 3, "{v1:?}");

    assert_code(&fx.run(&["rollout", "pause", "asts/web"]).await, OK);
    let run = fx
        .run(&[
            "set",
            "image",
            "asts/web",
            &format!("app={}", image("testapp", "v2")),
        ])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, "paused");
    // The controller has seen the change (observedGeneration) and still touches no Pod.
    let generation = api.get("web").await.expect("read back").metadata.generation;
    wait_for(
        "the paused change observed",
        Duration::from_secs(60),
        || async {
            let o = api.get("web").await?;
            Ok((o.data["status"]["observedGeneration"].as_i64() == generation).then_some(()))
        },
    )
    .await
    .expect("observedGeneration");
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        incarnations(&fx, "web", "app").await,
        v1,
        "paused: no Pod changed"
    );
    let run = fx
        .run(&["rollout", "status", "asts/web", "--watch=false"])
        .await;
    assert_code(&run, PAUSED);

    assert_code(&fx.run(&["rollout", "resume", "asts/web"]).await, OK);
    assert_code(&fx.status("asts/web").await, OK);
    let v2 = incarnations(&fx, "web", "app").await;
    assert_in_place(&v1, &v2, 1, "v2");

    let (images, update) = history(&fx, "asts/web").await;
    assert_eq!(
        images,
        [
            format!("app={}", image("testapp", "v1")),
            format!("app={}", image("testapp", "v2"))
        ]
    );
    assert_eq!(update, [false, true]);
    let revs_before_undo = revisions(&fx).await;
    assert_eq!(revs_before_undo.len(), 2, "{revs_before_undo:?}");

    let run = fx.run(&["rollout", "undo", "asts/web"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "rolling back to revision 1");
    assert_code(&fx.status("asts/web").await, OK);
    let back = incarnations(&fx, "web", "app").await;
    assert_in_place(&v2, &back, 2, "v1");
    // The rollback reused the v1 revision, renumbered past the v2 one.
    let revs = revisions(&fx).await;
    assert_eq!(
        revs.keys().collect::<Vec<_>>(),
        revs_before_undo.keys().collect::<Vec<_>>(),
        "no new ControllerRevision for a rollback: {revs:?}"
    );
    let max_before = revs_before_undo.values().max().copied().unwrap_or_default();
    assert!(
        revs.values().any(|&n| n == max_before + 1),
        "the v1 revision got number {}: {revs:?}",
        max_before + 1
    );
    let o = api.get("web").await.expect("read back");
    let status = &o.data["status"];
    assert_eq!(
        status["updateRevision"], status["currentRevision"],
        "{status}"
    );
    assert_eq!(status["updatedReplicas"], 3, "{status}");

    let run = fx.run(&["rollout", "restart", "asts/web"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "all 3 pods restarted in place");
    let order: Vec<&str> = run
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("batch ").and_then(|l| l.split_once(": ")))
        .map(|(_, pods)| pods)
        .collect();
    assert_eq!(
        order,
        ["web-2", "web-1", "web-0"],
        "highest ordinal first: {run}"
    );
    let restarted = incarnations(&fx, "web", "app").await;
    assert_in_place(&back, &restarted, 3, "v1");
    fx.ns.delete().await.expect("delete namespace");
}

/// Advanced DaemonSet `agent` in place: history lists both revisions, undo goes back to v1 in
/// place (same UID, a new container), `rollout restart ads/agent` recreates the container in
/// place through a ContainerRecreateRequest.
#[tokio::test]
async fn ads_history_undo_restart() {
    let fx = Fixture::new("e2e-clih-ads").await;
    let ar = kruise_resource(&fx.client, "daemonsets").await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": template("agent", "v1"),
            "updateStrategy": {"type": "RollingUpdate",
                "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible"}}
        }
    }))
    .expect("Advanced DaemonSet");
    let api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &ar);
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create Advanced DaemonSet");
    assert_code(&fx.status("ads/agent").await, OK);
    let v1 = incarnations(&fx, "agent", "app").await;
    assert!(!v1.is_empty(), "a Pod per node");

    let run = fx
        .run(&[
            "set",
            "image",
            "ads/agent",
            &format!("app={}", image("testapp", "v2")),
        ])
        .await;
    assert_code(&run, OK);
    assert_code(&fx.status("ads/agent").await, OK);
    let v2 = incarnations(&fx, "agent", "app").await;
    assert_in_place(&v1, &v2, 1, "v2");

    let (images, update) = history(&fx, "ads/agent").await;
    assert_eq!(
        images,
        [
            format!("app={}", image("testapp", "v1")),
            format!("app={}", image("testapp", "v2"))
        ]
    );
    assert_eq!(update, [false, true]);

    let run = fx.run(&["rollout", "undo", "ads/agent"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "rolling back to revision 1");
    assert_code(&fx.status("ads/agent").await, OK);
    let back = incarnations(&fx, "agent", "app").await;
    assert_in_place(&v2, &back, 2, "v1");
    assert_eq!(
        revisions(&fx).await.len(),
        2,
        "a rollback reuses the v1 revision"
    );

    let run = fx.run(&["rollout", "restart", "ads/agent"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "restarted in place");
    let restarted = incarnations(&fx, "agent", "app").await;
    assert_in_place(&back, &restarted, 3, "v1");
    fx.ns.delete().await.expect("delete namespace");
}

/// SidecarSet over a CloneSet of 3: `rollout partition sidecarset/NAME 2` then a paused
/// `set image` (status counts fall to 0), resumed, upgrades exactly one Pod's sidecar in place
/// and `rollout status` reports the partition;
/// paused, partition 0 upgrades no more Pods and status exits 3; `promote --full` resumes and
/// finishes in place; restart is refused (a SidecarSet has no Pods of its own).
#[tokio::test]
async fn sidecarset_partition_pause_promote() {
    let fx = Fixture::new("e2e-clih-sc").await;
    let ar = kruise_resource(&fx.client, "sidecarsets").await;
    let cs_ar = kruise_resource(&fx.client, "clonesets").await;
    let sc_api: Api<DynamicObject> = Api::all_with(fx.client.clone(), &ar);
    let app = fx.ns.name.clone();
    let name = format!("{app}-proxy");
    let sc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version, "kind": "SidecarSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": app}},
            "namespace": fx.ns.name,
            "containers": [{"name": "proxy", "image": image("sidecar", "v1")}],
            "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": 1}
        }
    }))
    .expect("SidecarSet");
    sc_api
        .create(&PostParams::default(), &sc)
        .await
        .expect("create SidecarSet");
    let cs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": cs_ar.api_version, "kind": "CloneSet",
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": app}},
                 "template": template(&app, "v1")}
    }))
    .expect("CloneSet");
    Api::<DynamicObject>::namespaced_with(fx.client.clone(), &fx.ns.name, &cs_ar)
        .create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    let target = format!("sidecarset/{name}");
    wait_for("three Pods with the sidecar running", CLI_LIMIT, || async {
        let now = incarnations(&fx, &app, "proxy").await;
        Ok((now.len() == 3
            && now
                .values()
                .all(|i| i.restarts == 0 && !i.container_id.is_empty()))
        .then_some(()))
    })
    .await
    .expect("sidecar injected");
    assert_code(&fx.status(&target).await, OK);
    let v1 = incarnations(&fx, &app, "proxy").await;

    let run = fx.run(&["rollout", "partition", &target, "2"]).await;
    assert_code(&run, OK);
    let partition =
        sc_api.get(&name).await.expect("read back").data["spec"]["updateStrategy"]["partition"]
            .clone();
    assert_eq!(partition, json!(2), "the partition reached the object");
    let status_of = || async {
        let o = sc_api.get(&name).await?;
        Ok::<_, kube::Error>((o.metadata.generation, o.data["status"].clone()))
    };
    let (_, st) = status_of().await.expect("read back");
    assert_eq!(
        (
            &st["matchedPods"],
            &st["updatedPods"],
            &st["updatedReadyPods"]
        ),
        (&json!(3), &json!(3), &json!(3)),
        "{st}"
    );
    // Paused, the new image reaches no Pod, and every count of updated Pods falls to 0 (a
    // merge patch of the status that left zeros out would keep the old 3).
    assert_code(&fx.run(&["rollout", "pause", &target]).await, OK);
    let run = fx
        .run(&[
            "set",
            "image",
            &target,
            &format!("proxy={}", image("sidecar", "v2")),
        ])
        .await;
    assert_code(&run, OK);
    let st = wait_for("the paused change observed", CLI_LIMIT, || async {
        let (generation, st) = status_of().await?;
        Ok((st["observedGeneration"].as_i64() == generation).then_some(st))
    })
    .await
    .expect("observedGeneration");
    assert_eq!(st["updatedPods"].as_i64().unwrap_or(0), 0, "{st}");
    assert_eq!(st["updatedReadyPods"].as_i64().unwrap_or(0), 0, "{st}");
    assert_code(&fx.run(&["rollout", "resume", &target]).await, OK);
    let run = fx.status(&target).await;
    assert_code(&run, OK);
    assert_stdout(&run, "partitioned");
    let upgraded = |now: &BTreeMap<String, Incarnation>| {
        now.values()
            .filter(|i| i.image == image("sidecar", "v2"))
            .count()
    };
    let now = incarnations(&fx, &app, "proxy").await;
    assert_eq!(
        upgraded(&now),
        1,
        "partition 2 of 3 holds two back: {now:?}"
    );
    for (pod, inc) in &now {
        assert_eq!(inc.uid, v1[pod].uid, "{pod} kept its UID");
    }

    assert_code(&fx.run(&["rollout", "pause", &target]).await, OK);
    assert_code(&fx.run(&["rollout", "partition", &target, "0"]).await, OK);
    let o = sc_api.get(&name).await.expect("read back");
    let strategy = &o.data["spec"]["updateStrategy"];
    assert_eq!(strategy["paused"], json!(true), "{strategy}");
    assert_eq!(strategy["partition"], json!(0), "{strategy}");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let now = incarnations(&fx, &app, "proxy").await;
    assert_eq!(
        upgraded(&now),
        1,
        "paused: no more sidecars upgraded: {now:?}"
    );
    let run = fx
        .run(&["rollout", "status", &target, "--watch=false"])
        .await;
    assert_code(&run, PAUSED);

    // promote resumes a paused rollout.
    let run = fx.run(&["rollout", "promote", &target, "--full"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "resumed");
    assert_code(&fx.status(&target).await, OK);
    let done = incarnations(&fx, &app, "proxy").await;
    assert_eq!(upgraded(&done), 3, "{done:?}");
    for (pod, inc) in &done {
        assert_eq!(inc.uid, v1[pod].uid, "{pod} kept its UID");
        assert_eq!(inc.restarts, 1, "{pod}: only the sidecar restarted, once");
    }
    let run = fx.run(&["rollout", "restart", &target]).await;
    assert_eq!(run.code, Some(2), "restart refused: {run}");
    assert!(run.stderr.contains("no Pods of its own"), "{run}");
    sc_api
        .delete(&name, &Default::default())
        .await
        .expect("delete SidecarSet");
    fx.ns.delete().await.expect("delete namespace");
}
