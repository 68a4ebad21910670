//! `kubectl-kruise` against the workload kinds beyond CloneSet and Deployment: apps/v1
//! StatefulSets and DaemonSets (status, partition, history, undo; kube-controller-manager rolls
//! them), and the Kruise kinds (Advanced StatefulSet, Advanced DaemonSet, SidecarSet) when their
//! CRDs and controllers are installed. Every run passes `--kubeconfig` and `-n` explicitly and
//! checks the exit code; what a command claims is checked by reading the cluster back.
//!
//! Needs the binary: `cargo build -p kubectl-kruise`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kruise_e2e::plugin::{
    CLI_LIMIT, Fixture, assert_code, assert_stdout, described_pods, kruise_resource, template,
};
use kruise_e2e::{container_status, image, wait_for};
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const OK: i32 = 0;
const USAGE: i32 = 2;

/// The workload's Pods by name: (UID, image of container `app`).
async fn pods_of(fx: &Fixture, app: &str) -> BTreeMap<String, (String, String)> {
    fx.pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list Pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == "app"))
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            (p.name_any(), (p.uid().unwrap_or_default(), image))
        })
        .collect()
}

fn template_image(obj: &Value) -> String {
    obj["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// apps/v1 StatefulSet `db` of 2: status waits for the Pods, a partition of 1 holds `db-0`
/// back (status exits 0 with a partitioned message while `db-0` still runs v1), `promote
/// --full` finishes, history lists both revisions, undo goes back to v1; pause is refused.
#[tokio::test]
async fn native_statefulset_status_partition_history_undo() {
    let fx = Fixture::new("e2e-cli-sts").await;
    let api: Api<StatefulSet> = fx.ns.api();
    let sts: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2, "serviceName": "db", "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "db"}},
            "template": template("db", "v1"),
        }
    }))
    .expect("StatefulSet");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create StatefulSet");

    let run = fx.status("sts/db").await;
    assert_code(&run, OK);
    assert_stdout(&run, "statefulset \"db\" successfully rolled out");
    let s = api.get("db").await.expect("read back");
    let st = s.status.clone().unwrap_or_default();
    assert_eq!(st.ready_replicas, Some(2), "{st:?}");
    let v1 = pods_of(&fx, "db").await;
    assert_eq!(v1.len(), 2, "{v1:?}");

    let run = fx.run(&["rollout", "partition", "sts/db", "1"]).await;
    assert_code(&run, OK);
    let s = api.get("db").await.expect("read back");
    let partition = s
        .spec
        .as_ref()
        .and_then(|sp| sp.update_strategy.as_ref())
        .and_then(|u| u.rolling_update.as_ref())
        .and_then(|r| r.partition);
    assert_eq!(partition, Some(1), "the partition reached the object");

    let run = fx
        .run(&[
            "set",
            "image",
            "sts/db",
            &format!("app={}", image("testapp", "v2")),
        ])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, "RECREATED");
    assert_stdout(&run, "partition keeps 1 of 2");

    let run = fx.status("sts/db").await;
    assert_code(&run, OK);
    assert_stdout(&run, "partitioned rollout complete: 1 of 2 pods updated");
    let now = pods_of(&fx, "db").await;
    assert_eq!(now["db-0"], v1["db-0"], "db-0 is kept: same UID, v1");
    assert_eq!(now["db-1"].1, image("testapp", "v2"), "{now:?}");
    assert_ne!(now["db-1"].0, v1["db-1"].0, "db-1 was recreated");

    let run = fx.run(&["rollout", "promote", "sts/db", "--full"]).await;
    assert_code(&run, OK);
    let run = fx.status("sts/db").await;
    assert_code(&run, OK);
    assert_stdout(&run, "successfully rolled out");
    let now = pods_of(&fx, "db").await;
    assert!(
        now.values().all(|(_, img)| *img == image("testapp", "v2")),
        "{now:?}"
    );

    let run = fx
        .run(&["rollout", "history", "sts/db", "-o", "json"])
        .await;
    assert_code(&run, OK);
    let revs: Vec<Value> = serde_json::from_str(run.stdout.trim()).expect("history JSON");
    let images: Vec<String> = revs
        .iter()
        .map(|r| r["images"][0].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        images,
        [
            format!("app={}", image("testapp", "v1")),
            format!("app={}", image("testapp", "v2"))
        ],
        "{run}"
    );
    assert_eq!(revs[1]["update"], true, "{run}");

    let run = fx.run(&["rollout", "undo", "sts/db"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "rolling back to revision 1");
    let s = api.get("db").await.expect("read back");
    let raw = serde_json::to_value(&s).expect("json");
    assert_eq!(template_image(&raw), image("testapp", "v1"));
    let run = fx.status("sts/db").await;
    assert_code(&run, OK);
    let now = pods_of(&fx, "db").await;
    assert!(
        now.values().all(|(_, img)| *img == image("testapp", "v1")),
        "{now:?}"
    );
    let (doc, _) = fx.describe("sts/db").await;
    assert_eq!(doc["kind"], "StatefulSet", "{doc}");
    assert_eq!(
        described_pods(&doc, "update"),
        now.keys().cloned().collect::<Vec<_>>(),
        "{doc}"
    );
    assert!(
        doc["revisions"].as_array().is_some_and(|r| r.len() >= 2),
        "{doc}"
    );

    let run = fx.run(&["rollout", "pause", "sts/db"]).await;
    assert_code(&run, USAGE);
    assert!(run.stderr.contains("no pause switch"), "{run}");
    fx.ns.delete().await.expect("delete namespace");
}

/// apps/v1 DaemonSet `agent` on the node(s): status, a recreating image change, history with
/// both revisions, undo; partition is refused (a native DaemonSet has none).
#[tokio::test]
async fn native_daemonset_status_history_undo() {
    let fx = Fixture::new("e2e-cli-ds").await;
    let api: Api<DaemonSet> = fx.ns.api();
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template("agent", "v1")}
    }))
    .expect("DaemonSet");
    api.create(&PostParams::default(), &ds)
        .await
        .expect("create DaemonSet");

    let run = fx.status("ds/agent").await;
    assert_code(&run, OK);
    assert_stdout(&run, "daemonset \"agent\" successfully rolled out");
    let st = api
        .get("agent")
        .await
        .expect("read back")
        .status
        .unwrap_or_default();
    assert!(st.desired_number_scheduled >= 1, "{st:?}");
    assert_eq!(st.number_available, Some(st.desired_number_scheduled));
    let v1 = pods_of(&fx, "agent").await;

    let run = fx
        .run(&[
            "set",
            "image",
            "daemonset/agent",
            &format!("app={}", image("testapp", "v2")),
        ])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, "RECREATED");
    let run = fx.status("daemonset/agent").await;
    assert_code(&run, OK);
    let v2 = pods_of(&fx, "agent").await;
    assert_eq!(v2.len(), v1.len(), "one Pod per node: {v2:?}");
    for (uid, img) in v2.values() {
        assert_eq!(*img, image("testapp", "v2"));
        assert!(v1.values().all(|(old, _)| old != uid), "Pods were replaced");
    }

    let run = fx.run(&["rollout", "history", "ds/agent"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, &image("testapp", "v1"));
    assert_stdout(&run, &image("testapp", "v2"));

    let run = fx
        .run(&["rollout", "undo", "ds/agent", "--to-revision", "1"])
        .await;
    assert_code(&run, OK);
    let run = fx.status("ds/agent").await;
    assert_code(&run, OK);
    let back = pods_of(&fx, "agent").await;
    assert!(
        back.values().all(|(_, img)| *img == image("testapp", "v1")),
        "{back:?}"
    );

    let run = fx.run(&["rollout", "partition", "ds/agent", "1"]).await;
    assert_code(&run, USAGE);
    fx.ns.delete().await.expect("delete namespace");
}

/// The served resource of a Kruise kind; the CRDs ship in deploy/, so a cluster under test
/// that does not serve it is a failure.
/// Pod name → (UID, containerID of `app`, restartCount of `app`).
async fn incarnations(pods: &Api<Pod>, app: &str) -> BTreeMap<String, (String, String, i32)> {
    pods.list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list Pods")
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let c = container_status(p, "app");
            (
                p.name_any(),
                (
                    p.uid().unwrap_or_default(),
                    c.and_then(|c| c.container_id.clone()).unwrap_or_default(),
                    c.map(|c| c.restart_count).unwrap_or(-1),
                ),
            )
        })
        .collect()
}

/// Advanced StatefulSet `web` of 3, InPlaceIfPossible with partition 1 (issue 14, acceptance 2):
/// after an image change `rollout status asts/web` exits 0 with a partitioned message once
/// ordinals 2 and 1 were updated in place (same UID, restartCount 1) and ordinal 0 is untouched;
/// `promote --full` finishes it and status exits 0 again.
#[tokio::test]
async fn asts_partitioned_in_place_status_and_promote() {
    let fx = Fixture::new("e2e-cli-asts").await;
    let ar = kruise_resource(&fx.client, "statefulsets").await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version,
        "kind": "StatefulSet",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3, "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": template("web", "v1"),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                "podUpdatePolicy": "InPlaceIfPossible", "partition": 1, "maxUnavailable": 1}}
        }
    }))
    .expect("Advanced StatefulSet");
    let api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &ar);
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create Advanced StatefulSet");
    let run = fx.status("asts/web").await;
    assert_code(&run, OK);
    let before = incarnations(&fx.pods, "web").await;
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        ["web-0", "web-1", "web-2"],
        "{before:?}"
    );

    let run = fx
        .run(&[
            "set",
            "image",
            "asts/web",
            &format!("app={}", image("testapp", "v2")),
        ])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, "IN PLACE");
    let run = fx.status("statefulset.apps.kruise.io/web").await;
    assert_code(&run, OK);
    assert_stdout(&run, "partitioned rollout complete: 2 of 3 pods updated");
    let after = incarnations(&fx.pods, "web").await;
    assert_eq!(after["web-0"], before["web-0"], "ordinal 0 is kept");
    for o in ["web-1", "web-2"] {
        assert_eq!(after[o].0, before[o].0, "{o} kept its UID");
        assert_ne!(after[o].1, before[o].1, "{o} has a new container");
        assert_eq!(after[o].2, 1, "{o} restarted once");
    }
    // describe: the partition and both revisions' Pods, with the UIDs the cluster has.
    let (doc, text) = fx.describe("asts/web").await;
    assert_eq!(doc["kind"], "Advanced StatefulSet", "{doc}");
    assert_eq!(doc["strategy"]["partition"], "1", "{doc}");
    assert_eq!(doc["strategy"]["podUpdatePolicy"], "InPlaceIfPossible");
    assert_eq!(described_pods(&doc, "update"), ["web-1", "web-2"], "{doc}");
    assert_eq!(described_pods(&doc, "current"), ["web-0"], "{doc}");
    let uids: Vec<&str> = doc["podGroups"][0]["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .filter_map(|p| p["uid"].as_str())
        .collect();
    assert_eq!(uids, [after["web-1"].0.as_str(), after["web-2"].0.as_str()]);
    assert_eq!(
        doc["revisions"].as_array().map(Vec::len),
        Some(2),
        "both revisions: {doc}"
    );
    assert!(
        text.contains("Strategy:      InPlaceIfPossible, partition 1"),
        "{text}"
    );
    assert!(text.contains(" [update] (2 Pods):"), "{text}");

    let run = fx.run(&["rollout", "promote", "asts/web", "--full"]).await;
    assert_code(&run, OK);
    let run = fx.status("asts/web").await;
    assert_code(&run, OK);
    assert_stdout(&run, "successfully rolled out");
    let done = incarnations(&fx.pods, "web").await;
    assert_eq!(done["web-0"].0, before["web-0"].0, "web-0 updated in place");
    assert_eq!(done["web-0"].2, 1, "web-0 restarted once");
    fx.ns.delete().await.expect("delete namespace");
}

/// Advanced DaemonSet with InPlaceIfPossible (issue 15, acceptance 1, CLI part): `rollout
/// status ads/NAME` exits 0 once the node's Pod runs the new image, same UID, restartCount 1.
#[tokio::test]
async fn ads_in_place_status() {
    let fx = Fixture::new("e2e-cli-ads").await;
    let ar = kruise_resource(&fx.client, "daemonsets").await;
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": ar.api_version,
        "kind": "DaemonSet",
        "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": template("agent", "v1"),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible"}}
        }
    }))
    .expect("Advanced DaemonSet");
    let api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &ar);
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create Advanced DaemonSet");
    let run = fx.status("ads/agent").await;
    assert_code(&run, OK);
    let before = incarnations(&fx.pods, "agent").await;
    assert!(!before.is_empty());

    let run = fx
        .run(&[
            "set",
            "image",
            "daemon/agent",
            &format!("app={}", image("testapp", "v2")),
        ])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, "IN PLACE");
    let run = fx.status("daemonset.apps.kruise.io/agent").await;
    assert_code(&run, OK);
    let after = incarnations(&fx.pods, "agent").await;
    for (name, (uid, cid, restarts)) in &after {
        let (old_uid, old_cid, _) = &before[name];
        assert_eq!(uid, old_uid, "{name} kept its UID");
        assert_ne!(cid, old_cid, "{name} has a new container");
        assert_eq!(*restarts, 1, "{name} restarted once");
    }
    let (doc, _) = fx.describe("ads/agent").await;
    assert_eq!(doc["kind"], "Advanced DaemonSet", "{doc}");
    let updated = described_pods(&doc, "update");
    assert_eq!(
        updated,
        after.keys().cloned().collect::<Vec<_>>(),
        "every Pod on the update revision: {doc}"
    );
    for p in doc["podGroups"][0]["pods"].as_array().expect("pods") {
        assert_eq!(p["restarts"], 1, "{p}");
        assert!(p["node"].as_str().is_some_and(|n| !n.is_empty()), "{p}");
        assert_eq!(p["state"], "Running", "{p}");
    }
    fx.ns.delete().await.expect("delete namespace");
}

/// SidecarSet (issue 16, acceptance 6, CLI part): after the sidecar's image changes, `rollout
/// status sidecarset/NAME` exits 0 only when every matched Pod runs the new sidecar image.
#[tokio::test]
async fn sidecarset_status_waits_for_every_matched_pod() {
    let fx = Fixture::new("e2e-cli-sidecar").await;
    let ar = kruise_resource(&fx.client, "sidecarsets").await;
    let api: Api<DynamicObject> = Api::all_with(fx.client.clone(), &ar);
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
    api.create(&PostParams::default(), &sc)
        .await
        .expect("create SidecarSet");
    let deploy: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}}, "template": template(&app, "v1")}
    }))
    .expect("Deployment");
    fx.ns
        .api::<k8s_openapi::api::apps::v1::Deployment>()
        .create(&PostParams::default(), &deploy)
        .await
        .expect("create Deployment");
    let proxy_images = || async {
        let pods = fx
            .pods
            .list(&ListParams::default().labels(&format!("app={app}")))
            .await?
            .items;
        Ok::<Vec<String>, kube::Error>(
            pods.iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| container_status(p, "proxy").map(|c| c.image.clone()))
                .collect(),
        )
    };
    // Bounded below the test's own time limit, so that a Pod left without the sidecar (or a
    // stalled rollout below) fails with the state that explains it rather than a kill.
    let injected = wait_for(
        "two Pods with the sidecar",
        Duration::from_secs(40),
        || async {
            let imgs = proxy_images().await?;
            Ok((imgs.len() == 2).then_some(()))
        },
    )
    .await;
    if let Err(e) = injected {
        let pods = fx.pods.list(&ListParams::default()).await.expect("list");
        let seen: Vec<String> = pods
            .items
            .iter()
            .map(|p| {
                format!(
                    "{} containers={:?} annotations={:?} phase={:?}",
                    p.name_any(),
                    kruise_e2e::sidecarset::container_names(p),
                    p.metadata.annotations,
                    p.status.as_ref().and_then(|s| s.phase.clone())
                )
            })
            .collect();
        panic!("sidecar not injected: {e}; Pods: {seen:#?}");
    }
    let target = format!("sidecarset/{name}");
    // `rollout status` bounded too: at its timeout it prints what holds each Pod.
    let bounded = || async {
        let args = ["rollout", "status", target.as_str(), "--timeout", "40s"];
        let run = fx
            .kk
            .run_for(&args, CLI_LIMIT)
            .await
            .expect("rollout status");
        assert_code(&run, OK);
    };
    bounded().await;

    let run = fx
        .run(&[
            "set",
            "image",
            &target,
            &format!("proxy={}", image("sidecar", "v2")),
        ])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, "sidecar updated IN PLACE");
    bounded().await;
    let imgs = proxy_images().await.expect("list Pods");
    assert_eq!(imgs.len(), 2);
    for img in imgs {
        assert!(
            img.ends_with("sidecar:v2"),
            "every matched Pod runs v2: {img}"
        );
    }
    let (doc, _) = fx.describe(&target).await;
    assert_eq!(doc["kind"], "SidecarSet", "{doc}");
    assert_eq!(described_pods(&doc, "update").len(), 2, "{doc}");
    assert!(
        doc["images"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|i| i["container"] == "proxy"
                && i["image"]
                    .as_str()
                    .is_some_and(|s| s.ends_with("sidecar:v2"))),
        "{doc}"
    );
    api.delete(&name, &Default::default())
        .await
        .expect("delete SidecarSet");
    fx.ns.delete().await.expect("delete namespace");
}

/// `rollout list` lists every kind (text and JSON). `scaledown T --pods` (kruise-tools'
/// command): a CloneSet loses exactly the named Pod through
/// `podsToDelete`, an Advanced StatefulSet exactly the named ordinal through `reserveOrdinals`;
/// the other Pods keep their UIDs. A Pod that is not the workload's is refused, naming it.
#[tokio::test]
async fn scaledown_removes_exactly_the_named_pods() {
    let fx = Fixture::new("e2e-cli-scaledown").await;
    let cs_ar = kruise_resource(&fx.client, "clonesets").await;
    let sts_ar = kruise_resource(&fx.client, "statefulsets").await;
    let cs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": cs_ar.api_version, "kind": "CloneSet", "metadata": {"name": "cs"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "cs"}},
                 "template": template("cs", "v1")}
    }))
    .expect("CloneSet");
    let sts: DynamicObject = serde_json::from_value(json!({
        "apiVersion": sts_ar.api_version, "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": 3, "serviceName": "db", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "db"}}, "template": template("db", "v1")}
    }))
    .expect("Advanced StatefulSet");
    let cs_api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &cs_ar);
    let sts_api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &sts_ar);
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    sts_api
        .create(&PostParams::default(), &sts)
        .await
        .expect("create Advanced StatefulSet");
    assert_code(&fx.status("cloneset/cs").await, OK);
    assert_code(&fx.status("asts/db").await, OK);
    // `rollout list` without a kind lists every kind, as TYPE/NAME.
    let run = fx.run(&["rollout", "list"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "cloneset/cs");
    assert_stdout(&run, "asts/db");
    let run = fx.run(&["rollout", "list", "asts"]).await;
    assert_code(&run, OK);
    assert!(!run.stdout.contains("cs "), "only the asts kind: {run}");
    let run = fx.run(&["rollout", "list", "-o", "json"]).await;
    assert_code(&run, OK);
    let doc: Value = serde_json::from_str(&run.stdout).expect("json");
    let mut kinds: Vec<&str> = doc
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|r| r["kind"].as_str())
        // SidecarSets are cluster-scoped: other tests' may be listed too.
        .filter(|k| *k != "SidecarSet")
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["CloneSet", "StatefulSet"], "{run}");

    let before = pods_of(&fx, "cs").await;
    let victim = before.keys().next().expect("a Pod").clone();
    let run = fx
        .run(&["scaledown", "cloneset/cs", "--pods", "not-a-pod"])
        .await;
    assert_code(&run, USAGE);
    assert!(
        run.stderr.contains("not Pods of") && run.stderr.contains("not-a-pod"),
        "{run}"
    );
    let run = fx
        .run(&["scaledown", "cloneset/cs", "--pods", &victim])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, &format!("replicas 3 -> 2, deleting {victim}"));
    let after = wait_for("the CloneSet's Pod gone", CLI_LIMIT, || async {
        let now = pods_of(&fx, "cs").await;
        Ok((now.len() == 2 && !now.contains_key(&victim)).then_some(now))
    })
    .await
    .expect("scaled down");
    for (name, pod) in &after {
        assert_eq!(&before[name], pod, "{name} kept its UID");
    }
    let obj = cs_api.get("cs").await.expect("CloneSet");
    assert_eq!(obj.data["spec"]["replicas"], 2);

    let before = pods_of(&fx, "db").await;
    let run = fx.run(&["scaledown", "asts/db", "--pods", "db-1"]).await;
    assert_code(&run, OK);
    let after = wait_for("db-1 gone", CLI_LIMIT, || async {
        let now = pods_of(&fx, "db").await;
        Ok((now.len() == 2 && !now.contains_key("db-1")).then_some(now))
    })
    .await
    .expect("scaled down");
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        ["db-0", "db-2"],
        "the other ordinals stay"
    );
    for (name, pod) in &after {
        assert_eq!(&before[name], pod, "{name} kept its UID");
    }
    let obj = sts_api.get("db").await.expect("Advanced StatefulSet");
    assert_eq!(obj.data["spec"]["reserveOrdinals"], json!([1]));
    assert_eq!(obj.data["spec"]["replicas"], 2);
    fx.ns.delete().await.expect("delete namespace");
}

/// The app container's cpu request and env of each of the CloneSet's Pods, by name.
async fn pod_specs(fx: &Fixture, app: &str) -> BTreeMap<String, (String, Value)> {
    fx.pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list Pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let c = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.iter().find(|c| c.name == "app"))
                .cloned()
                .unwrap_or_default();
            let cpu = c
                .resources
                .and_then(|r| r.requests)
                .and_then(|r| r.get("cpu").map(|q| q.0.clone()))
                .unwrap_or_default();
            (p.name_any(), (cpu, json!(c.env)))
        })
        .collect()
}

/// `set resources` and `set env` say what the manager will do before writing, and it does it:
/// with the shipped gates (`InPlaceWorkloadVerticalScaling` on), a cpu request raised within
/// the QoS class is resized in place (same Pods); an env var recreates them; a dry run writes
/// nothing; bad arguments are usage errors naming the argument.
#[tokio::test]
async fn set_resources_and_env_predict_and_do_in_place_or_recreate() {
    let fx = Fixture::new("e2e-cli-set").await;
    let cs_ar = kruise_resource(&fx.client, "clonesets").await;
    let mut tpl = template("cs", "v1");
    tpl["spec"]["containers"][0]["resources"] = json!({"requests": {"cpu": "10m"}});
    let cs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": cs_ar.api_version, "kind": "CloneSet", "metadata": {"name": "cs"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "cs"}}, "template": tpl,
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                     "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}}}
    }))
    .expect("CloneSet");
    let cs_api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &cs_ar);
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    assert_code(&fx.status("cloneset/cs").await, OK);
    let before = pods_of(&fx, "cs").await;

    let run = fx.run(&["set", "env", "cloneset/cs", "BAD"]).await;
    assert_code(&run, USAGE);
    assert!(run.stderr.contains("\"BAD\" is neither KEY=VALUE"), "{run}");
    let run = fx
        .run(&["set", "resources", "cloneset/cs", "--requests", "cpu"])
        .await;
    assert_code(&run, USAGE);
    assert!(run.stderr.contains("--requests \"cpu\""), "{run}");

    // Within the class, with the shipped gate: resized in place.
    let run = fx
        .run(&[
            "set",
            "resources",
            "cloneset/cs",
            "-c",
            "app",
            "--requests",
            "cpu=20m",
        ])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, "RESIZED IN PLACE");
    assert_code(&fx.status("cloneset/cs").await, OK);
    let resized = wait_for("the Pods' cpu request 20m", CLI_LIMIT, || async {
        let s = pod_specs(&fx, "cs").await;
        Ok((s.len() == 2 && s.values().all(|(cpu, _)| cpu == "20m")).then_some(()))
    })
    .await;
    resized.expect("resized");
    assert_eq!(
        pods_of(&fx, "cs").await,
        before,
        "the same Pods (UIDs kept)"
    );

    // An env var: predicted and done as a recreate; the dry run first writes nothing.
    let generation = cs_api.get("cs").await.expect("cs").metadata.generation;
    let run = fx
        .run(&["set", "env", "cloneset/cs", "MODE=b", "--dry-run"])
        .await;
    assert_code(&run, OK);
    assert_stdout(&run, "RECREATED (spec.containers[0].env");
    assert_stdout(&run, "dry run: nothing changed");
    assert_eq!(
        cs_api.get("cs").await.expect("cs").metadata.generation,
        generation,
        "the dry run wrote nothing"
    );
    let run = fx.run(&["set", "env", "cloneset/cs", "MODE=b"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "RECREATED");
    assert_code(&fx.status("cloneset/cs").await, OK);
    let after = wait_for("new Pods with MODE=b", CLI_LIMIT, || async {
        let s = pod_specs(&fx, "cs").await;
        let done = s.len() == 2
            && s.values()
                .all(|(_, env)| *env == json!([{"name": "MODE", "value": "b"}]));
        Ok(done.then_some(()))
    })
    .await;
    after.expect("env set");
    let now = pods_of(&fx, "cs").await;
    for (uid, _) in now.values() {
        assert!(
            before.values().all(|(old, _)| old != uid),
            "every Pod recreated: {before:?} {now:?}"
        );
    }

    // A service account: not in place, so predicted and done as a recreate.
    let accounts: Api<ServiceAccount> = Api::namespaced(fx.client.clone(), &fx.ns.name);
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "builder"}})).expect("sa");
    accounts
        .create(&PostParams::default(), &sa)
        .await
        .expect("create service account");
    let run = fx.run(&["set", "sa", "cloneset/cs", "builder"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "serviceAccountName (default) -> builder");
    assert_stdout(&run, "RECREATED");
    assert_code(&fx.status("cloneset/cs").await, OK);
    let pods = fx
        .pods
        .list(&ListParams::default().labels("app=cs"))
        .await
        .expect("pods");
    let accounts_used: Vec<Option<String>> = pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.spec.as_ref().and_then(|s| s.service_account_name.clone()))
        .collect();
    assert_eq!(
        accounts_used,
        vec![Some("builder".to_owned()); 2],
        "both Pods run as builder"
    );
    for p in pods
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        assert!(
            now.values()
                .all(|(old, _)| Some(old) != p.metadata.uid.as_ref()),
            "recreated: {:?}",
            p.metadata.name
        );
    }
    let run = fx.run(&["set", "sa", "cloneset/cs", "builder"]).await;
    assert_code(&run, OK);
    assert_stdout(&run, "already builder: nothing will roll out");
}

/// `rollout status` says why a rollout does not progress, Pod by Pod: an image that cannot be
/// pulled names the Pod, the image and what to do, in text (before the timeout's error) and in
/// `-o json` (`held`).
#[tokio::test]
async fn status_names_the_pod_and_why_a_rollout_is_stuck() {
    let fx = Fixture::new("e2e-cli-held").await;
    let cs_ar = kruise_resource(&fx.client, "clonesets").await;
    let cs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": cs_ar.api_version, "kind": "CloneSet", "metadata": {"name": "cs"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "cs"}},
                 "template": template("cs", "v1"),
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                     "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}}}
    }))
    .expect("CloneSet");
    let cs_api: Api<DynamicObject> = Api::namespaced_with(fx.client.clone(), &fx.ns.name, &cs_ar);
    cs_api
        .create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    assert_code(&fx.status("cloneset/cs").await, OK);
    let missing = image("testapp", "no-such-tag");
    let run = fx
        .run(&["set", "image", "cloneset/cs", &format!("app={missing}")])
        .await;
    assert_code(&run, OK);
    // The first Pod updated in place cannot pull its new image; the kubelet says so.
    let stuck = wait_for("a Pod that cannot pull", CLI_LIMIT, || async {
        let pods = fx
            .pods
            .list(&ListParams::default().labels("app=cs"))
            .await?
            .items;
        Ok(pods.into_iter().find_map(|p| {
            let waiting = container_status(&p, "app")?.state.clone()?.waiting?;
            matches!(
                waiting.reason.as_deref(),
                Some("ErrImagePull" | "ImagePullBackOff")
            )
            .then(|| p.name_any())
        }))
    })
    .await
    .expect("stuck Pod");
    let run = fx
        .kk
        .run_for(
            &["rollout", "status", "cloneset/cs", "--timeout", "3s"],
            CLI_LIMIT,
        )
        .await
        .expect("run");
    assert_code(&run, 4);
    assert_stdout(
        &run,
        &format!("  {stuck}: image {missing} of container app cannot be pulled ("),
    );
    assert_stdout(&run, "fix the image reference or its pull secret");
    let run = fx
        .kk
        .run_for(
            &[
                "rollout",
                "status",
                "cloneset/cs",
                "--watch=false",
                "-o",
                "json",
            ],
            CLI_LIMIT,
        )
        .await
        .expect("run");
    let doc: Value = serde_json::from_str(run.stdout.trim()).expect("json");
    let held = doc["held"].as_array().cloned().unwrap_or_default();
    assert!(
        held.iter().any(|h| h["pod"] == stuck.as_str()
            && h["reason"]
                .as_str()
                .is_some_and(|r| r.contains("cannot be pulled"))),
        "{doc}"
    );
}
