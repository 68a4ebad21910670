//! Advanced DaemonSet on the real kubelet: the node's daemon Pod is updated in place (same UID,
//! one container restart, a new image) and the node is never without its Pod; the lifecycle
//! hooks hold a Pod's deletion and its in-place restart until their label goes; a Pod the API
//! server refuses shows as a condition and an Event.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::keys;
use kruise_e2e::daemonset::{self, pod_node, set_image, status_i64, status_str, wait_rolled_out};
use kruise_e2e::{TestNamespace, client, container_status, image};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use serde_json::json;

const ROLLOUT: Duration = Duration::from_secs(180);
/// How long a hooked Pod is watched to stay held.
const HELD: Duration = Duration::from_secs(8);
/// The hook label the tests' templates carry and their lifecycle hooks name.
const HOLD: &str = "e2e.kruise-rs.io/hold";

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

/// Merge-patches one Pod's labels (`null` removes one).
async fn label_pod(pods: &Api<Pod>, name: &str, labels: serde_json::Value) {
    pods.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": labels}})),
    )
    .await
    .expect("label pod");
}

fn lifecycle_state(p: &Pod) -> Option<String> {
    p.labels().get(keys::LIFECYCLE_STATE_LABEL).cloned()
}

/// A DaemonSet whose template carries the hook label and whose `hook` (preDelete or
/// inPlaceUpdate) names it (with `mark_not_ready`), rolled out; returns its Pod on the
/// kubelet's node.
async fn hooked_daemonset(
    client: &kube::Client,
    api: &Api<kube::api::DynamicObject>,
    pods: &Api<Pod>,
    name: &str,
    rolling_type: &str,
    hook: &str,
    mark_not_ready: bool,
) -> Pod {
    let nodes = schedulable_nodes(client).await;
    let mut ds = daemonset::new(
        name,
        &image("testapp", "v1"),
        json!({"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": rolling_type, "maxUnavailable": 1}}),
        json!({}),
    )
    .expect("ds");
    ds.data["spec"]["template"]["metadata"]["labels"][HOLD] = json!("true");
    ds.data["spec"]["lifecycle"] =
        json!({ hook: {"labelsHandler": {HOLD: "true"}, "markPodNotReady": mark_not_ready} });
    api.create(&PostParams::default(), &ds)
        .await
        .expect("create DaemonSet");
    wait_rolled_out(api, name, None, ROLLOUT)
        .await
        .expect("initial rollout");
    daemonset::pods(pods, name)
        .await
        .expect("pods")
        .into_iter()
        .find(|p| nodes.contains(&pod_node(p)))
        .expect("a Pod on the kubelet's node")
}

/// `lifecycle.preDelete` with markPodNotReady: a recreate update moves the old Pod to
/// PreparingDelete and leaves it running, but not Ready, while the hook label is on it; removing
/// the label lets it go and its node gets a Pod of the new revision.
#[tokio::test]
async fn pre_delete_hook_holds_the_pod_until_its_label_goes() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ads-predelete")
        .await
        .expect("ns");
    let api = daemonset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let target =
        hooked_daemonset(&client, &api, &pods, "held", "Standard", "preDelete", true).await;
    let (name, uid) = (target.name_any(), target.uid().unwrap_or_default());
    let node = pod_node(&target);
    // The installed manager counts the recreation once the Pod goes (a global counter: other
    // tests may add to it, never take from it).
    let recreations = || async {
        let labels = r#"controller="daemonset",method="recreate""#;
        kruise_e2e::manager::metric_sum(&client, "kruise_manager_pod_updates_total", labels).await
    };
    let incluster = kruise_e2e::mode::mode() == kruise_e2e::mode::Mode::InCluster;
    let recreated_before = if incluster {
        recreations().await.expect("metrics")
    } else {
        0.0
    };

    set_image(&api, "held", &image("testapp", "v2"))
        .await
        .expect("set image");
    kruise_e2e::wait_for("the Pod in PreparingDelete", ROLLOUT, || async {
        let p = pods.get(&name).await?;
        Ok((lifecycle_state(&p).as_deref() == Some("PreparingDelete")).then_some(()))
    })
    .await
    .expect("PreparingDelete");
    tokio::time::sleep(HELD).await;
    let p = pods.get(&name).await.expect("the held Pod is still there");
    assert_eq!(p.uid().as_deref(), Some(uid.as_str()), "same Pod");
    assert!(p.metadata.deletion_timestamp.is_none(), "not being deleted");
    assert_eq!(lifecycle_state(&p).as_deref(), Some("PreparingDelete"));
    let c = container_status(&p, "app").expect("container status");
    assert!(
        c.state.as_ref().and_then(|s| s.running.as_ref()).is_some(),
        "still running: {c:?}"
    );
    assert_eq!(c.image, image("testapp", "v1"));
    let cond = |t: &str| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == t))
            .map(|c| c.status.clone())
    };
    assert_eq!(
        cond(keys::KRUISE_POD_READY).as_deref(),
        Some("False"),
        "markPodNotReady holds KruisePodReady False: {:?}",
        p.status
    );
    assert_eq!(cond("Ready").as_deref(), Some("False"), "out of service");
    let on_node = daemonset::pods(&pods, "held").await.expect("pods");
    assert!(
        on_node
            .iter()
            .filter(|p| pod_node(p) == node)
            .all(|p| p.uid().as_deref() == Some(uid.as_str())),
        "no replacement beside the held Pod without surge"
    );

    label_pod(&pods, &name, json!({ HOLD: null })).await;
    kruise_e2e::wait_for("the released Pod gone", ROLLOUT, || async {
        Ok(pods
            .get_opt(&name)
            .await?
            .is_none_or(|p| p.uid().as_deref() != Some(uid.as_str()))
            .then_some(()))
    })
    .await
    .expect("deleted after release");
    let done = wait_rolled_out(&api, "held", None, ROLLOUT)
        .await
        .expect("rollout");
    let after = daemonset::pods(&pods, "held").await.expect("pods");
    let p = after
        .iter()
        .find(|p| pod_node(p) == node)
        .expect("the node has a Pod again");
    assert_ne!(p.uid().as_deref(), Some(uid.as_str()), "a new Pod");
    assert_eq!(
        p.labels()
            .get("controller-revision-hash")
            .map(String::as_str),
        Some(status_str(&done, "updateRevision"))
    );
    let c = container_status(p, "app").expect("container status");
    assert_eq!(c.image, image("testapp", "v2"));
    if incluster {
        let after = recreations().await.expect("metrics");
        assert!(
            after > recreated_before,
            "pod_updates_total{{method=recreate}}: {recreated_before} then {after}"
        );
    }
    ns.delete().await.expect("cleanup");
}

/// `lifecycle.inPlaceUpdate`: the Pod waits in PreparingUpdate with its old container while
/// the hook label is on it; once removed it restarts in place (same UID, restartCount 1),
/// goes to Updated, and back to Normal when the label returns.
#[tokio::test]
async fn in_place_update_hook_holds_the_restart_until_its_label_goes() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ads-updatehook")
        .await
        .expect("ns");
    let api = daemonset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let target = hooked_daemonset(
        &client,
        &api,
        &pods,
        "gated",
        "InPlaceIfPossible",
        "inPlaceUpdate",
        false,
    )
    .await;
    let (name, uid) = (target.name_any(), target.uid().unwrap_or_default());
    let cid = container_status(&target, "app").and_then(|c| c.container_id.clone());

    set_image(&api, "gated", &image("testapp", "v2"))
        .await
        .expect("set image");
    kruise_e2e::wait_for("the Pod in PreparingUpdate", ROLLOUT, || async {
        let p = pods.get(&name).await?;
        Ok((lifecycle_state(&p).as_deref() == Some("PreparingUpdate")).then_some(()))
    })
    .await
    .expect("PreparingUpdate");
    tokio::time::sleep(HELD).await;
    let p = pods.get(&name).await.expect("pod");
    assert_eq!(lifecycle_state(&p).as_deref(), Some("PreparingUpdate"));
    let c = container_status(&p, "app").expect("container status");
    assert_eq!(c.restart_count, 0, "not restarted while held");
    assert_eq!(c.container_id, cid, "the same container");
    assert_eq!(c.image, image("testapp", "v1"));

    label_pod(&pods, &name, json!({ HOLD: null })).await;
    let p = kruise_e2e::wait_for("the in-place restart", ROLLOUT, || async {
        let p = pods.get(&name).await?;
        let restarted = container_status(&p, "app").is_some_and(|c| {
            c.restart_count == 1
                && c.image == image("testapp", "v2")
                && c.state.as_ref().and_then(|s| s.running.as_ref()).is_some()
        });
        Ok(restarted.then_some(p))
    })
    .await
    .expect("restarted in place");
    assert_eq!(p.uid().as_deref(), Some(uid.as_str()), "same Pod");
    kruise_e2e::wait_for("the Pod Updated", ROLLOUT, || async {
        let p = pods.get(&name).await?;
        Ok((lifecycle_state(&p).as_deref() == Some("Updated")).then_some(()))
    })
    .await
    .expect("Updated once the update is done and the hook label is gone");
    label_pod(&pods, &name, json!({ HOLD: "true" })).await;
    kruise_e2e::wait_for("the Pod Normal", ROLLOUT, || async {
        let p = pods.get(&name).await?;
        Ok((lifecycle_state(&p).as_deref() == Some("Normal")).then_some(()))
    })
    .await
    .expect("Normal once the hook label is back");
    wait_rolled_out(&api, "gated", None, ROLLOUT)
        .await
        .expect("rolled out");
    let p = pods.get(&name).await.expect("pod");
    let c = container_status(&p, "app").expect("container status");
    assert_eq!(c.restart_count, 1, "restarted exactly once");
    ns.delete().await.expect("cleanup");
}

/// A Pod the API server refuses (a quota of no Pods) shows as the FailedScale condition with the
/// server's reason and a FailedCreate Warning Event; once the quota goes, the retries create it
/// and the condition is removed.
#[tokio::test]
async fn refused_pod_creation_shows_a_condition_and_an_event_until_it_succeeds() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, ResourceQuota};
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ads-quota")
        .await
        .expect("ns");
    let quotas: Api<ResourceQuota> = ns.api();
    let quota: ResourceQuota = serde_json::from_value(
        json!({"metadata": {"name": "no-pods"}, "spec": {"hard": {"pods": "0"}}}),
    )
    .expect("quota");
    quotas
        .create(&PostParams::default(), &quota)
        .await
        .expect("create quota");
    // Admission enforces a quota once the quota controller has filled its status.
    kruise_e2e::wait_for("the quota in force", Duration::from_secs(60), || async {
        let q = quotas.get("no-pods").await?;
        Ok(q.status
            .and_then(|s| s.hard)
            .is_some_and(|h| h.contains_key("pods"))
            .then_some(()))
    })
    .await
    .expect("quota status");
    let api = daemonset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let ds = daemonset::new(
        "refused",
        &image("testapp", "v1"),
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
        json!({}),
    )
    .expect("ds");
    api.create(&PostParams::default(), &ds)
        .await
        .expect("create DaemonSet");
    let failed =
        daemonset::wait_status(&api, "refused", "the FailedScale condition", ROLLOUT, |d| {
            d.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| {
                    c["type"] == keys::DAEMONSET_CONDITION_FAILED_SCALE
                        && c["status"] == "True"
                        && c["reason"] == "FailedCreate"
                })
        })
        .await
        .expect("condition");
    let cond = failed.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == keys::DAEMONSET_CONDITION_FAILED_SCALE)
        .cloned()
        .unwrap_or_default();
    assert!(
        cond["message"]
            .as_str()
            .unwrap_or("")
            .contains("exceeded quota"),
        "the server's reason: {cond}"
    );
    let events: Api<CoreEvent> = ns.api();
    let notes: Vec<String> = events
        .list(&ListParams::default().fields("involvedObject.name=refused"))
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("DaemonSet")
                && e.reason.as_deref() == Some("FailedCreate")
                && e.type_.as_deref() == Some("Warning")
        })
        .filter_map(|e| e.message)
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("exceeded quota")),
        "a FailedCreate Warning naming the cause: {notes:?}"
    );
    assert!(
        daemonset::pods(&pods, "refused")
            .await
            .expect("pods")
            .is_empty(),
        "no Pod got through"
    );

    quotas
        .delete("no-pods", &Default::default())
        .await
        .expect("delete quota");
    let done = wait_rolled_out(&api, "refused", None, ROLLOUT)
        .await
        .expect("created once the quota is gone");
    let left: Vec<_> = done.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == keys::DAEMONSET_CONDITION_FAILED_SCALE)
        .collect();
    assert!(left.is_empty(), "condition removed: {left:?}");
    ns.delete().await.expect("cleanup");
}

/// `rollingUpdate.paused` holds an image change (no Pod touched, updatedNumberScheduled 0) and
/// resuming rolls it out in place; the paused object reads the same through v1alpha1 as through
/// v1beta1 (one schema, both served).
#[tokio::test]
async fn paused_holds_an_image_change_until_resumed_and_reads_the_same_in_both_versions() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ads-paused")
        .await
        .expect("ns");
    let api = daemonset::api(&client, &ns.name);
    let alpha: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &daemonset::resource(keys::VERSION_V1ALPHA1),
    );
    let pods: Api<Pod> = ns.api();
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
    wait_rolled_out(&api, "agent", None, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = daemonset::pods(&pods, "agent").await.expect("pods");

    daemonset::patch_spec(
        &api,
        "agent",
        json!({"updateStrategy": {"rollingUpdate": {"paused": true}}}),
    )
    .await
    .expect("pause");
    set_image(&api, "agent", &image("testapp", "v2"))
        .await
        .expect("set image");
    let held = daemonset::wait_status(&api, "agent", "new revision observed", ROLLOUT, |ds| {
        status_i64(ds, "updatedNumberScheduled") == 0
    })
    .await
    .expect("paused status");
    tokio::time::sleep(HELD).await;
    let during = daemonset::pods(&pods, "agent").await.expect("pods");
    assert_eq!(during.len(), before.len());
    for (b, d) in before.iter().zip(&during) {
        assert_eq!(d.uid(), b.uid(), "paused: {} untouched", d.name_any());
        assert_eq!(
            d.spec.as_ref().map(|s| s.containers[0].image.clone()),
            Some(Some(image("testapp", "v1"))),
            "paused: {} keeps v1",
            d.name_any()
        );
    }
    let now = api.get("agent").await.expect("get");
    assert_eq!(status_i64(&now, "updatedNumberScheduled"), 0, "held");
    let old = alpha.get("agent").await.expect("get v1alpha1");
    assert_eq!(old.data["spec"], now.data["spec"], "same spec in v1alpha1");
    assert_eq!(
        old.data["spec"]["updateStrategy"]["rollingUpdate"]["paused"],
        true
    );
    // v1beta1's status.updateRevision is v1alpha1's status.daemonSetHash.
    assert!(!status_str(&held, "updateRevision").is_empty());
    assert_eq!(
        status_str(&old, "daemonSetHash"),
        status_str(&now, "updateRevision")
    );

    daemonset::patch_spec(
        &api,
        "agent",
        json!({"updateStrategy": {"rollingUpdate": {"paused": false}}}),
    )
    .await
    .expect("resume");
    wait_rolled_out(&api, "agent", None, ROLLOUT)
        .await
        .expect("resumed rollout");
    let after = daemonset::pods(&pods, "agent").await.expect("pods");
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(a.uid(), b.uid(), "{} updated in place", a.name_any());
        assert_eq!(
            a.spec.as_ref().map(|s| s.containers[0].image.clone()),
            Some(Some(image("testapp", "v2")))
        );
    }
    ns.delete().await.expect("cleanup");
}

/// A partition above this cluster's node count: it holds every node's Pod back.
const PAST_EVERY_NODE: i64 = 100;
/// How long a DaemonSet whose partition holds every creation is watched to stay without Pods.
const NO_POD_FOR: Duration = Duration::from_secs(5);

/// Waits until the DaemonSet's status is for its generation and counts its nodes, then checks
/// for `NO_POD_FOR` that it has no Pod; returns the number of nodes.
async fn assert_held_without_pods(api: &Api<kube::api::DynamicObject>, pods: &Api<Pod>) -> i64 {
    let held = daemonset::wait_status(
        api,
        "agent",
        "status for the held DaemonSet",
        ROLLOUT,
        |d| status_i64(d, "desiredNumberScheduled") > 0,
    )
    .await
    .expect("held status");
    let deadline = tokio::time::Instant::now() + NO_POD_FOR;
    while tokio::time::Instant::now() < deadline {
        let now = daemonset::pods(pods, "agent").await.expect("pods");
        assert!(
            now.is_empty(),
            "the partition holds every node's Pod back, but {:?} exist",
            now.iter()
                .map(|p| (p.name_any(), pod_node(p)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    status_i64(&held, "desiredNumberScheduled")
}

/// Lowers the partition to 0 and waits for a Pod on every node.
async fn release_partition(api: &Api<kube::api::DynamicObject>, pods: &Api<Pod>, nodes: i64) {
    daemonset::patch_spec(
        api,
        "agent",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 0}}}),
    )
    .await
    .expect("lower the partition");
    wait_rolled_out(api, "agent", Some(nodes), ROLLOUT)
        .await
        .expect("a Pod on every node once the partition is 0");
    let now = daemonset::pods(pods, "agent").await.expect("pods");
    assert_eq!(
        i64::try_from(now.len()).unwrap_or(0),
        nodes,
        "one Pod per node"
    );
}

/// `scaleStrategy.partitionedScaling` rolls a new DaemonSet onto nodes progressively: with the
/// partition above the number of nodes no Pod is created at all, lowering it to 0 creates them.
#[tokio::test]
async fn partitioned_scaling_creates_only_desired_minus_partition_pods() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ads-partscale")
        .await
        .expect("ns");
    let api = daemonset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let mut ds = daemonset::new(
        "agent",
        &image("testapp", "v1"),
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": PAST_EVERY_NODE}}),
        json!({}),
    )
    .expect("ds");
    ds.data["spec"]["scaleStrategy"] = json!({"partitionedScaling": true});
    api.create(&PostParams::default(), &ds)
        .await
        .expect("create DaemonSet");
    let nodes = assert_held_without_pods(&api, &pods).await;
    release_partition(&api, &pods, nodes).await;
    ns.delete().await.expect("cleanup");
}

/// v1alpha1's form of the same switch, the annotation `daemonset.kruise.io/progressive-create-pod`:
/// it reads as `partitionedScaling` in v1beta1 and holds the creations the same way.
#[tokio::test]
async fn progressive_create_annotation_in_v1alpha1_is_partitioned_scaling() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ads-progressive")
        .await
        .expect("ns");
    let api = daemonset::api(&client, &ns.name);
    let alpha: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &daemonset::resource(keys::VERSION_V1ALPHA1),
    );
    let pods: Api<Pod> = ns.api();
    let mut ds = daemonset::new(
        "agent",
        &image("testapp", "v1"),
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": PAST_EVERY_NODE}}),
        json!({}),
    )
    .expect("ds");
    ds.types = Some(kube::api::TypeMeta {
        api_version: format!("{}/{}", keys::APPS_GROUP, keys::VERSION_V1ALPHA1),
        kind: "DaemonSet".into(),
    });
    ds.metadata.annotations = Some(
        [(
            keys::DAEMONSET_PROGRESSIVE_CREATE_POD_ANNOTATION.to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    alpha
        .create(&PostParams::default(), &ds)
        .await
        .expect("create v1alpha1 DaemonSet");
    let beta = api.get("agent").await.expect("get v1beta1");
    assert_eq!(
        beta.data["spec"]["scaleStrategy"]["partitionedScaling"], true,
        "the annotation reads as partitionedScaling: {}",
        beta.data["spec"]
    );
    let nodes = assert_held_without_pods(&api, &pods).await;
    release_partition(&api, &pods, nodes).await;
    let back = alpha.get("agent").await.expect("get v1alpha1");
    assert_eq!(
        back.annotations()
            .get(keys::DAEMONSET_PROGRESSIVE_CREATE_POD_ANNOTATION)
            .map(String::as_str),
        Some("true")
    );
    ns.delete().await.expect("cleanup");
}
