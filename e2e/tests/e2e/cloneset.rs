//! CloneSet in-place update, end to end: a real kube-apiserver, kubelet and containerd, with
//! kruise-manager (and its webhook) and kruise-daemon running. Each test has its own namespace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolumeClaim, Pod};
use kruise_api::features::Gate;
use kruise_api::keys;
use kruise_e2e::cloneset::{
    self, patch_spec, pod_revision, set_image, status_i64, status_str, wait_rolled_out, wait_status,
};
use kruise_e2e::manager;
use kruise_e2e::recorder::PodRecorder;
use kruise_e2e::{TestNamespace, client, container_status, image, wait_for};
use kube::api::{ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::{Api, ResourceExt};
use serde_json::json;

const ROLLOUT: Duration = Duration::from_secs(180);

/// What identifies a Pod's incarnation and its app container's.
#[derive(Debug, Clone, PartialEq)]
struct Snapshot {
    uid: String,
    container_id: String,
    image_id: String,
    restarts: i32,
}

fn snapshot(pods: &[Pod]) -> BTreeMap<String, Snapshot> {
    pods.iter()
        .map(|p| {
            let c = container_status(p, "app");
            (
                p.name_any(),
                Snapshot {
                    uid: p.uid().unwrap_or_default(),
                    container_id: c.and_then(|c| c.container_id.clone()).unwrap_or_default(),
                    image_id: c.map(|c| c.image_id.clone()).unwrap_or_default(),
                    restarts: c.map(|c| c.restart_count).unwrap_or(-1),
                },
            )
        })
        .collect()
}

/// A template change that cannot go in place: a new env var.
fn add_env() -> serde_json::Value {
    json!([{"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [{"name": "MODE", "value": "b"}]}])
}

fn in_place(update_strategy: serde_json::Value) -> serde_json::Value {
    let mut s =
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}});
    if let (Some(base), Some(extra)) = (
        s["rollingUpdate"].as_object_mut(),
        update_strategy.as_object(),
    ) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    s
}

/// Scenario 1: every Pod keeps its UID, its container restarts once with a new imageID,
/// InPlaceUpdateReady goes False then True, and the status ends fully updated.
#[tokio::test]
async fn image_update_is_in_place() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-inplace")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let cs =
        cloneset::new("web", 3, "v1", in_place(json!({"maxUnavailable": "100%"}))).expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    let first = wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    assert_eq!(before.len(), 3);
    for p in cloneset::pods(&pods, "web").await.expect("pods") {
        let gates: Vec<String> = p
            .spec
            .as_ref()
            .and_then(|s| s.readiness_gates.as_ref())
            .map(|g| g.iter().map(|g| g.condition_type.clone()).collect())
            .unwrap_or_default();
        assert!(
            gates.contains(&keys::INPLACE_UPDATE_READY.to_string()),
            "gates of {}: {gates:?}",
            p.name_any()
        );
    }

    let recorder = PodRecorder::start(pods.clone(), "app=web");
    let started = Instant::now();
    set_image(&api, "web", "v2").await.expect("set image");
    let done = wait_status(&api, "web", "update revision to change", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    let done = wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .unwrap_or(done);
    let took = started.elapsed();
    println!("in-place rollout of 3 Pods took {:.1}s", took.as_secs_f64());

    let after_pods = cloneset::pods(&pods, "web").await.expect("pods");
    let after = snapshot(&after_pods);
    assert_eq!(after.len(), 3, "{after:?}");
    for (name, b) in &before {
        let a = after
            .get(name)
            .unwrap_or_else(|| panic!("Pod {name} was replaced: {after:?}"));
        assert_eq!(a.uid, b.uid, "{name} kept its UID");
        assert_ne!(a.container_id, b.container_id, "{name} has a new container");
        assert_ne!(a.image_id, b.image_id, "{name} runs another image");
        assert_eq!(a.restarts, 1, "{name} restarted exactly once");
        let seq = recorder.inplace_ready_sequence(&b.uid);
        let f = seq.iter().position(|s| s == "False");
        let t = seq.iter().rposition(|s| s == "True");
        assert!(
            matches!((f, t), (Some(f), Some(t)) if f < t),
            "{name}: InPlaceUpdateReady went {seq:?}"
        );
    }
    for p in &after_pods {
        assert_eq!(
            container_status(p, "app").map(|c| c.image.as_str()),
            Some(image("testapp", "v2").as_str())
        );
        assert_eq!(pod_revision(p), status_str(&done, "updateRevision"));
    }
    assert_eq!(status_i64(&done, "updatedReplicas"), 3);
    assert_eq!(status_i64(&done, "updatedReadyReplicas"), 3);
    assert_eq!(
        status_str(&done, "currentRevision"),
        status_str(&done, "updateRevision")
    );
    ns.delete().await.expect("delete ns");
}

/// The API server's calls to the conversion webhook for CRD `crd` so far, summed over the
/// series of `apiserver_crd_conversion_webhook_duration_seconds_count`.
async fn conversion_calls(client: &kube::Client, crd: &str) -> f64 {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let text = client.request_text(req).await.expect("API server /metrics");
    let label = format!("crd_name=\"{crd}\"");
    text.lines()
        .filter(|l| l.starts_with("apiserver_crd_conversion_webhook_duration_seconds_count{"))
        .filter(|l| l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// CloneSets are stored as v1alpha1 and the controller reads and writes that version, converting
/// in process: an in-place rollout driven and watched at v1alpha1 costs the API server at most one
/// conversion webhook call per change of the CloneSet (what a v1beta1 watcher outside Kruise, such
/// as the garbage collector's, costs: the API server converts each change once for all of them).
/// While the controller read v1beta1 it cost 33 calls for 5 changes.
/// Serial: the metric counts every CloneSet conversion of the cluster.
#[tokio::test]
async fn serial_rollout_calls_no_conversion_webhook() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-stored")
        .await
        .expect("ns");
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &cloneset::resource(keys::VERSION_V1ALPHA1),
    );
    let mut cs = cloneset::new(
        "web",
        3,
        "v1",
        json!({"type": "InPlaceIfPossible", "maxUnavailable": "100%"}),
    )
    .expect("cs");
    cs.types = Some(kube::api::TypeMeta {
        api_version: format!("{}{}", keys::APPS_GROUP_PREFIX, keys::VERSION_V1ALPHA1),
        kind: "CloneSet".into(),
    });
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create v1alpha1 CloneSet");
    wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("initial rollout");
    // Every change of the CloneSet from here on, seen at v1alpha1 (no conversion either).
    let changes = Arc::new(AtomicUsize::new(0));
    let counted = changes.clone();
    let cfg = kube::runtime::watcher::Config::default().fields("metadata.name=web");
    let watch = tokio::spawn(
        kube::runtime::watcher(api.clone(), cfg)
            .touched_objects()
            .for_each(move |_| {
                counted.fetch_add(1, Ordering::SeqCst);
                futures::future::ready(())
            }),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    // The namespace controller, emptying the earlier tests' namespaces, deletes their CloneSets
    // at the group's preferred version (v1beta1): conversions that are not the rollout's. Past
    // the wait the count is taken anyway (a namespace stuck terminating is another test's).
    let quiet = wait_for(
        "the earlier tests' namespaces to be gone",
        Duration::from_secs(180),
        || async {
            let lp = ListParams::default().labels(kruise_e2e::E2E_LABEL);
            let terminating = Api::<Namespace>::all(client.clone())
                .list(&lp)
                .await?
                .items
                .iter()
                .filter(|n| n.metadata.deletion_timestamp.is_some())
                .count();
            Ok((terminating == 0).then_some(()))
        },
    )
    .await;
    if let Err(e) = quiet {
        eprintln!("counting anyway: {e}");
    }
    let crd = "clonesets.apps.kruise.io";
    let before = conversion_calls(&client, crd).await;
    let listed = changes.load(Ordering::SeqCst);
    set_image(&api, "web", "v2").await.expect("set image");
    wait_status(&api, "web", "v2 rolled out", ROLLOUT, |cs| {
        status_i64(cs, "updatedReadyReplicas") == 3
            && status_i64(cs, "readyReplicas") == 3
            && status_str(cs, "currentRevision") == status_str(cs, "updateRevision")
            && cs.data["spec"]["template"]["spec"]["containers"][0]["image"]
                == image("testapp", "v2")
    })
    .await
    .expect("rollout to v2");
    // The last status write's event.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let calls = conversion_calls(&client, crd).await - before;
    let changed = changes.load(Ordering::SeqCst) - listed;
    watch.abort();
    println!(
        "{calls} conversion webhook calls for {crd} during a 3-Pod in-place rollout of {changed} changes"
    );
    assert!(changed > 0, "the watch saw no change of the CloneSet");
    assert!(
        calls <= changed as f64 + 1.0,
        "{calls} conversion webhook calls for {crd} during one 3-Pod rollout of {changed} changes"
    );
    ns.delete().await.expect("delete ns");
}

/// A rollback: the template goes back to v1 after v2. The v1 revision is used again with its
/// number bumped past v2's (no third revision), and the Pods go back to it in place.
#[tokio::test]
async fn rollback_reuses_the_earlier_revision_in_place() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-rollback")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let revisions: Api<ControllerRevision> = ns.api();
    let cs =
        cloneset::new("web", 2, "v1", in_place(json!({"maxUnavailable": "100%"}))).expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    let first = wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("initial rollout");
    let r1 = status_str(&first, "updateRevision").to_owned();
    let before = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    assert_eq!(before.len(), 2, "{before:?}");

    set_image(&api, "web", "v2").await.expect("set v2");
    wait_status(&api, "web", "the v2 revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != r1
    })
    .await
    .expect("v2 revision");
    let second = wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("v2 rollout");
    let r2 = status_str(&second, "updateRevision").to_owned();

    set_image(&api, "web", "v1").await.expect("set v1 again");
    wait_status(&api, "web", "the v1 revision again", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") == r1
    })
    .await
    .expect("v1 revision again");
    let done = wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rollback");
    assert_eq!(status_str(&done, "currentRevision"), r1);

    let listed = revisions
        .list(&ListParams::default())
        .await
        .expect("revisions")
        .items;
    let names: Vec<String> = listed.iter().map(|r| r.name_any()).collect();
    assert_eq!(names.len(), 2, "no third revision: {names:?}");
    let number = |name: &str| {
        listed
            .iter()
            .find(|r| r.name_any() == name)
            .map(|r| r.revision)
    };
    assert!(
        number(&r1) > number(&r2),
        "{r1} ({:?}) is numbered after {r2} ({:?})",
        number(&r1),
        number(&r2)
    );

    let after_pods = cloneset::pods(&pods, "web").await.expect("pods");
    let after = snapshot(&after_pods);
    for (name, b) in &before {
        let a = after
            .get(name)
            .unwrap_or_else(|| panic!("Pod {name} was replaced: {after:?}"));
        assert_eq!(a.uid, b.uid, "{name} kept its UID");
        assert_eq!(a.restarts, 2, "{name} restarted once per update");
    }
    for p in &after_pods {
        assert_eq!(pod_revision(p), r1, "{}", p.name_any());
        assert_eq!(
            container_status(p, "app").map(|c| c.image.as_str()),
            Some(image("testapp", "v1").as_str())
        );
    }
}

/// Scenario 2: partition "50%" of 4 keeps exactly 2 Pods on the old revision; partition 0
/// finishes the rollout.
#[tokio::test]
async fn partition_holds_back_pods() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-partition")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let cs = cloneset::new(
        "web",
        4,
        "v1",
        in_place(json!({"partition": "50%", "maxUnavailable": "100%"})),
    )
    .expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    wait_rolled_out(&api, "web", 4, ROLLOUT)
        .await
        .expect("initial rollout");

    set_image(&api, "web", "v2").await.expect("set image");
    let partial = wait_status(&api, "web", "2 of 4 updated and ready", ROLLOUT, |cs| {
        status_i64(cs, "updatedReplicas") == 2 && status_i64(cs, "updatedReadyReplicas") == 2
    })
    .await
    .expect("partial rollout");
    assert_eq!(status_i64(&partial, "expectedUpdatedReplicas"), 2);
    // It stays there.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let list = cloneset::pods(&pods, "web").await.expect("pods");
    let update = status_str(&partial, "updateRevision").to_string();
    let updated = list.iter().filter(|p| pod_revision(p) == update).count();
    assert_eq!(
        (list.len(), updated),
        (4, 2),
        "4 Pods, 2 on the update revision"
    );

    patch_spec(
        &api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 0}}}),
    )
    .await
    .expect("partition 0");
    let done = wait_rolled_out(&api, "web", 4, ROLLOUT)
        .await
        .expect("full rollout");
    assert_eq!(status_i64(&done, "expectedUpdatedReplicas"), 4);
    ns.delete().await.expect("delete ns");
}

/// Scenario 3: with maxUnavailable 1, no more than one Pod is unavailable at any time.
#[tokio::test]
async fn max_unavailable_is_respected() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-maxunavail")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let cs = cloneset::new("web", 4, "v1", in_place(json!({"maxUnavailable": 1}))).expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    let first = wait_rolled_out(&api, "web", 4, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));

    let recorder = PodRecorder::start(pods.clone(), "app=web");
    tokio::time::sleep(Duration::from_secs(1)).await;
    set_image(&api, "web", "v2").await.expect("set image");
    wait_status(&api, "web", "a new update revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("revision change seen");
    wait_rolled_out(&api, "web", 4, ROLLOUT)
        .await
        .expect("rollout");
    let after = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    for (name, b) in &before {
        assert_eq!(
            after.get(name).map(|a| &a.uid),
            Some(&b.uid),
            "{name} updated in place"
        );
    }
    assert_eq!(
        recorder.max_unavailable(),
        1,
        "at most (and, during an update, exactly) one Pod unavailable"
    );
    ns.delete().await.expect("delete ns");
}

/// Scenario 4a: a change that cannot go in place (an env var) recreates the Pods under
/// InPlaceIfPossible.
#[tokio::test]
async fn env_change_recreates_pods_under_in_place_if_possible() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-recreate")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let cs =
        cloneset::new("web", 3, "v1", in_place(json!({"maxUnavailable": "100%"}))).expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    let first = wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));

    cloneset::json_patch(&api, "web", add_env())
        .await
        .expect("add env");
    wait_status(&api, "web", "a new update revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("update seen");
    wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("rollout");
    let after = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    let old_uids: Vec<&String> = before.values().map(|s| &s.uid).collect();
    assert_eq!(after.len(), 3);
    for (name, a) in &after {
        assert!(!old_uids.contains(&&a.uid), "{name} is a new Pod");
    }
    ns.delete().await.expect("delete ns");
}

/// Scenario 4b: under InPlaceOnly the webhook refuses a template change that cannot go in place,
/// so nothing reaches the Pods.
#[tokio::test]
async fn env_change_is_refused_by_the_webhook_under_in_place_only() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-inplaceonly")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly", "maxUnavailable": "100%"}});
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 2, "v1", strategy).expect("cs"),
    )
    .await
    .expect("create");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));

    let msg = cloneset::json_patch(&api, "web", add_env())
        .await
        .expect_err("the webhook refuses an env change under InPlaceOnly")
        .to_string();
    assert!(
        msg.contains("only allowed to update images in spec for InPlaceOnly"),
        "rejection names the rule: {msg}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    assert_eq!(after, before, "no Pod was touched");
    ns.delete().await.expect("delete ns");
}

/// How many times the CloneSet's Events with `reason` were emitted, per related Pod name found
/// in the message (a repeated Event is one object whose series count grows).
fn event_counts(events: &[Event], reason: &str, pods: &[String]) -> BTreeMap<String, i32> {
    let mut out = BTreeMap::new();
    for e in events.iter().filter(|e| {
        e.involved_object.kind.as_deref() == Some("CloneSet")
            && e.involved_object.name.as_deref() == Some("web")
            && e.reason.as_deref() == Some(reason)
    }) {
        let msg = e.message.clone().unwrap_or_default();
        let Some(pod) = pods.iter().find(|p| msg.contains(p.as_str())) else {
            continue;
        };
        let n = e
            .series
            .as_ref()
            .and_then(|s| s.count)
            .or(e.count)
            .unwrap_or(1)
            .max(1);
        *out.entry(pod.clone()).or_insert(0) += n;
    }
    out
}

/// Scenario 4c: the controller's own refusal under InPlaceOnly. The webhook lets the change in
/// while the policy is InPlaceIfPossible and a partition holds every Pod back; switching the
/// policy alone (no template change, so the webhook has nothing to refuse) and then lifting the
/// partition leaves the controller with Pods it cannot update in place. It must leave them alone,
/// say why in a Warning Event and the FailedUpdate condition, and retry slowly, not in a loop.
#[tokio::test]
async fn controller_refuses_recreate_under_in_place_only() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-refuse")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    // Three Pods, all refused at once: the refusal must not depend on which one is reported.
    let cs = cloneset::new(
        "web",
        3,
        "v1",
        in_place(json!({"partition": 3, "maxUnavailable": "100%"})),
    )
    .expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    let first = wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    let names: Vec<String> = before.keys().cloned().collect();

    // Admitted under InPlaceIfPossible; the partition keeps both Pods on the old revision.
    cloneset::json_patch(&api, "web", add_env())
        .await
        .expect("env change admitted under InPlaceIfPossible");
    let held = wait_status(&api, "web", "a new update revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    assert_eq!(status_i64(&held, "updatedReplicas"), 0, "partition holds");
    patch_spec(
        &api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}),
    )
    .await
    .expect("the policy alone changes: the webhook admits it");
    patch_spec(
        &api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"partition": 0}}}),
    )
    .await
    .expect("partition 0");

    let failed = wait_status(&api, "web", "the FailedUpdate condition", ROLLOUT, |cs| {
        cloneset::condition_true(cs, keys::CLONESET_CONDITION_FAILED_UPDATE)
    })
    .await
    .expect("FailedUpdate condition");
    let refused_at = Instant::now();
    let cond = cloneset::condition(&failed, keys::CLONESET_CONDITION_FAILED_UPDATE)
        .cloned()
        .unwrap_or_default();
    let cond_msg = cond["message"].as_str().unwrap_or_default();
    assert!(
        cond_msg.contains("InPlaceOnly") && names.iter().any(|n| cond_msg.contains(n.as_str())),
        "the condition names the policy and the Pod: {cond}"
    );

    let events: Api<Event> = ns.api();
    let warned = wait_for(
        "a Warning FailedUpdate Event on the CloneSet",
        Duration::from_secs(30),
        || async {
            let list = events.list(&ListParams::default()).await?;
            Ok(list.items.into_iter().find(|e| {
                e.involved_object.kind.as_deref() == Some("CloneSet")
                    && e.involved_object.name.as_deref() == Some("web")
                    && e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some("FailedUpdate")
            }))
        },
    )
    .await
    .expect("event");
    let ev_msg = warned.message.clone().unwrap_or_default();
    assert!(
        ev_msg.contains("InPlaceOnly")
            && ev_msg.contains("cannot be updated in place")
            && names.iter().any(|n| ev_msg.contains(n.as_str())),
        "the Event says which Pod and why: {ev_msg}"
    );

    // Watch the refusals for a while: Pods untouched, and the retries are slow.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let window = refused_at.elapsed();
    let list = events.list(&ListParams::default()).await.expect("events");
    let counts = event_counts(&list.items, "FailedUpdate", &names);
    println!(
        "condition: {cond}; event: {ev_msg}; refusals per Pod in {:.0}s: {counts:?}",
        window.as_secs_f64()
    );
    let most = counts.values().copied().max().unwrap_or(0);
    assert!(most >= 1, "refusals were recorded: {counts:?}");
    // The retry of an error only a spec change can fix is slow (30 s): the first refusal, and
    // at most the re-check its own status write triggers, and one retry fit in this window. A
    // loop, however short, refuses more.
    assert!(
        most <= 3,
        "at most 3 refusals per Pod in {window:?} (slow retry), saw {counts:?}"
    );
    let after_pods = cloneset::pods(&pods, "web").await.expect("pods");
    let after = snapshot(&after_pods);
    assert_eq!(after, before, "no Pod was recreated or restarted");
    let cs = api.get("web").await.expect("get");
    for p in &after_pods {
        assert_ne!(
            pod_revision(p),
            status_str(&cs, "updateRevision"),
            "{} stays on the old revision",
            p.name_any()
        );
    }
    assert_eq!(status_i64(&cs, "updatedReplicas"), 0);
    ns.delete().await.expect("delete ns");
}

/// Scenario 6: nothing updates while paused; resuming completes the rollout.
#[tokio::test]
async fn paused_rollout_waits_for_resume() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-paused")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let cs = cloneset::new(
        "web",
        2,
        "v1",
        in_place(json!({"paused": true, "maxUnavailable": "100%"})),
    )
    .expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));

    set_image(&api, "web", "v2").await.expect("set image");
    let paused = wait_status(
        &api,
        "web",
        "the new revision to be observed",
        ROLLOUT,
        |cs| status_i64(cs, "updatedReplicas") == 0,
    )
    .await
    .expect("observed");
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        snapshot(&cloneset::pods(&pods, "web").await.expect("pods")),
        before,
        "paused: nothing changed"
    );
    assert_eq!(status_i64(&paused, "updatedReplicas"), 0);

    patch_spec(
        &api,
        "web",
        json!({"updateStrategy": {"rollingUpdate": {"paused": false}}}),
    )
    .await
    .expect("resume");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rollout after resume");
    let after = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    for (name, b) in &before {
        let a = &after[name];
        assert_eq!(
            (a.uid.as_str(), a.restarts),
            (b.uid.as_str(), 1),
            "{name} updated in place"
        );
    }
    ns.delete().await.expect("delete ns");
}

/// Scenario 7: scale 3 → 5 → 2 with podsToDelete naming one Pod: that Pod is among the removed.
#[tokio::test]
async fn scale_down_removes_the_named_pod() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-scale")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 3, "v1", in_place(json!({}))).expect("cs"),
    )
    .await
    .expect("create");
    wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("3 replicas");
    patch_spec(&api, "web", json!({"replicas": 5}))
        .await
        .expect("scale to 5");
    wait_rolled_out(&api, "web", 5, ROLLOUT)
        .await
        .expect("5 replicas");
    let five = cloneset::pods(&pods, "web").await.expect("pods");
    assert_eq!(five.len(), 5);
    for p in &five {
        assert!(
            p.labels().contains_key(keys::CLONESET_INSTANCE_ID_LABEL),
            "{} has an instance id",
            p.name_any()
        );
        assert!(p.name_any().starts_with("web-"));
    }
    let victim = five[2].name_any();
    patch_spec(
        &api,
        "web",
        json!({"replicas": 2, "scaleStrategy": {"podsToDelete": [victim]}}),
    )
    .await
    .expect("scale to 2");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("2 replicas");
    let left = wait_for("2 Pods left", ROLLOUT, || async {
        let list = cloneset::pods(&pods, "web").await?;
        Ok((list.len() == 2).then_some(list))
    })
    .await
    .expect("scaled down");
    assert!(
        left.iter().all(|p| p.name_any() != victim),
        "{victim} was removed"
    );
    assert!(
        pods.get_opt(&victim)
            .await
            .expect("get")
            .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    );
    ns.delete().await.expect("delete ns");
}

/// Scenario 5 (without a restart): with gracePeriodSeconds 10 the image is patched only after the
/// grace period, which is kept in the Pod's inplace-update-grace annotation meanwhile.
#[tokio::test]
async fn grace_period_delays_the_patch() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-grace")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let cs = cloneset::new(
        "web",
        1,
        "v1",
        in_place(
            json!({"maxUnavailable": "100%", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}}),
        ),
    )
    .expect("cs");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    wait_rolled_out(&api, "web", 1, ROLLOUT)
        .await
        .expect("initial rollout");
    let pod_name = cloneset::pods(&pods, "web").await.expect("pods")[0].name_any();

    let started = Instant::now();
    set_image(&api, "web", "v2").await.expect("set image");
    let graced = wait_for("the grace annotation", Duration::from_secs(30), || async {
        let p = pods.get(&pod_name).await?;
        Ok(p.annotations()
            .contains_key(keys::INPLACE_UPDATE_GRACE_ANNOTATION)
            .then_some(p))
    })
    .await
    .expect("grace annotation");
    let spec_image = |p: &Pod| {
        p.spec
            .as_ref()
            .map(|s| s.containers[0].image.clone().unwrap_or_default())
            .unwrap_or_default()
    };
    assert_eq!(
        spec_image(&graced),
        image("testapp", "v1"),
        "not patched during the grace period"
    );
    let patched = wait_for("the image patch", Duration::from_secs(60), || async {
        let p = pods.get(&pod_name).await?;
        Ok((spec_image(&p) == image("testapp", "v2")).then_some(started.elapsed()))
    })
    .await
    .expect("patched");
    assert!(
        patched >= Duration::from_secs(9),
        "patched after {patched:?}, before the 10 s grace period"
    );
    wait_rolled_out(&api, "web", 1, ROLLOUT)
        .await
        .expect("rollout");
    ns.delete().await.expect("delete ns");
}

/// Scenario 8: a two-container Pod with launch priorities is updated in two batches, the
/// higher priority first, and both batches are recorded in containerBatchesRecord in that order.
#[tokio::test]
async fn launch_priority_updates_containers_in_batches() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-batches")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let mut cs =
        cloneset::new("web", 2, "v1", in_place(json!({"maxUnavailable": "100%"}))).expect("cs");
    let containers = &mut cs.data["spec"]["template"]["spec"]["containers"];
    containers[0]["env"] = json!([{"name": "KRUISE_CONTAINER_PRIORITY", "value": "10"}]);
    containers.as_array_mut().expect("containers").push(json!({
        "name": "sidecar",
        "image": image("sidecar", "v1"),
        "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "1"}]
    }));
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    let first = wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = cloneset::pods(&pods, "web").await.expect("pods");

    cloneset::json_patch(
        &api,
        "web",
        json!([
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image("testapp", "v2")},
            {"op": "replace", "path": "/spec/template/spec/containers/1/image", "value": image("sidecar", "v2")}
        ]),
    )
    .await
    .expect("set both images");
    // Pods count as updated as soon as their in-place update starts: wait for the revision.
    wait_status(&api, "web", "a new update revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("update seen");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rollout");

    for b in before {
        let p = pods.get(&b.name_any()).await.expect("pod");
        assert_eq!(p.uid(), b.uid(), "{} updated in place", b.name_any());
        let state = kruise_e2e::inplace_state(&p);
        let batches = kruise_e2e::inplace_batches(&state);
        assert_eq!(
            batches,
            vec![vec!["app".to_string()], vec!["sidecar".to_string()]],
            "{}",
            p.name_any()
        );
        assert!(
            state.container_batches_record[0].timestamp.0
                <= state.container_batches_record[1].timestamp.0
        );
        for c in ["app", "sidecar"] {
            assert_eq!(
                container_status(&p, c).map(|s| s.restart_count),
                Some(1),
                "{} {c}",
                p.name_any()
            );
        }
    }
    ns.delete().await.expect("delete ns");
}

/// The Pod's lifecycle state label (empty when absent).
fn lifecycle_state(p: &Pod) -> String {
    p.labels()
        .get(keys::LIFECYCLE_STATE_LABEL)
        .cloned()
        .unwrap_or_default()
}

fn spec_image(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

/// Waits until the Pod's lifecycle state is Normal (a new Pod starts in PreparingNormal).
async fn wait_normal(pods: &Api<Pod>, name: &str) -> Pod {
    kruise_e2e::wait_pod(
        pods,
        name,
        "lifecycle Normal",
        Duration::from_secs(60),
        |p| lifecycle_state(p) == "Normal",
    )
    .await
    .expect("Normal")
}

/// Merge-patches a Pod's metadata, as the owner of a lifecycle hook would.
async fn patch_pod_meta(pods: &Api<Pod>, name: &str, meta: serde_json::Value) {
    pods.patch(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({ "metadata": meta })),
    )
    .await
    .unwrap_or_else(|e| panic!("patch {name}: {e}"));
}

/// Removes `finalizer` from every Pod that has it (best effort: this is cleanup).
async fn release_finalizers(pods: &Api<Pod>, finalizer: &str) {
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return;
    };
    for p in list.items {
        if p.finalizers().iter().any(|f| f == finalizer) {
            let keep: Vec<&String> = p.finalizers().iter().filter(|f| *f != finalizer).collect();
            let _ = pods
                .patch(
                    &p.name_any(),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&json!({"metadata": {"finalizers": keep}})),
                )
                .await;
        }
    }
}

/// Lifecycle preDelete (upstream `lifecycle.preDelete.finalizersHandler`): a Pod chosen for
/// scale-down that carries the hook's finalizer goes to PreparingDelete and stays until the
/// hook's owner removes the finalizer; then the CloneSet deletes it. The other Pod is untouched.
#[tokio::test]
async fn pre_delete_hook_holds_scale_down_until_released() {
    const HOLD: &str = "e2e.kruise.io/pre-delete-hold";
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-predelete")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let test = async {
        let mut cs = cloneset::new("web", 2, "v1", in_place(json!({}))).expect("cs");
        cs.data["spec"]["lifecycle"] = json!({"preDelete": {"finalizersHandler": [HOLD]}});
        api.create(&PostParams::default(), &cs)
            .await
            .expect("create");
        wait_rolled_out(&api, "web", 2, ROLLOUT)
            .await
            .expect("initial rollout");
        let two = cloneset::pods(&pods, "web").await.expect("pods");
        let (victim, keeper) = (two[0].name_any(), two[1].name_any());
        for p in &two {
            wait_normal(&pods, &p.name_any()).await;
            // The hook's owner puts its finalizer on every Pod it wants a say in.
            patch_pod_meta(&pods, &p.name_any(), json!({"finalizers": [HOLD]})).await;
        }

        patch_spec(
            &api,
            "web",
            json!({"replicas": 1, "scaleStrategy": {"podsToDelete": [victim]}}),
        )
        .await
        .expect("scale to 1");
        let preparing = kruise_e2e::wait_pod(
            &pods,
            &victim,
            "lifecycle PreparingDelete",
            Duration::from_secs(60),
            |p| lifecycle_state(p) == "PreparingDelete",
        )
        .await
        .expect("PreparingDelete");
        assert!(
            preparing.metadata.deletion_timestamp.is_none(),
            "held, not deleted"
        );
        // It waits there while the hook holds.
        tokio::time::sleep(Duration::from_secs(8)).await;
        let still = pods.get(&victim).await.expect("victim still exists");
        assert_eq!(still.uid(), preparing.uid());
        assert_eq!(lifecycle_state(&still), "PreparingDelete");
        assert!(
            still.metadata.deletion_timestamp.is_none(),
            "not deleted while the hook holds"
        );
        let kept = pods.get(&keeper).await.expect("keeper");
        assert_eq!(
            lifecycle_state(&kept),
            "Normal",
            "the other Pod is untouched"
        );

        // The hook's owner is done: the CloneSet deletes the Pod.
        patch_pod_meta(&pods, &victim, json!({"finalizers": null})).await;
        wait_for(
            "the held Pod to be deleted",
            Duration::from_secs(60),
            || async {
                Ok(pods
                    .get_opt(&victim)
                    .await?
                    .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
                    .then_some(()))
            },
        )
        .await
        .expect("deleted after release");
        let done = wait_status(&api, "web", "1 replica", ROLLOUT, |cs| {
            status_i64(cs, "replicas") == 1
        })
        .await
        .expect("scaled down");
        assert_eq!(status_i64(&done, "replicas"), 1);
        let left = cloneset::pods(&pods, "web").await.expect("pods");
        assert_eq!(
            left.iter().map(|p| p.name_any()).collect::<Vec<_>>(),
            vec![keeper.clone()]
        );
    };
    let res = std::panic::AssertUnwindSafe(test).catch_unwind().await;
    // Pass or fail, take the finalizer off every Pod, or the namespace could never go away.
    release_finalizers(&pods, HOLD).await;
    if let Err(panic) = res {
        std::panic::resume_unwind(panic);
    }
    ns.delete().await.expect("delete ns");
}

/// Lifecycle inPlaceUpdate (upstream `lifecycle.inPlaceUpdate.labelsHandler`): a Pod carrying the
/// hook's label waits in PreparingUpdate, its spec untouched, until the hook's owner removes the
/// label; then it is updated in place and ends in Updated (the hook is not held again), and goes
/// Normal once the owner puts the label back.
#[tokio::test]
async fn in_place_update_hook_holds_the_update_until_released() {
    const HOLD: &str = "e2e.kruise.io/update-hold";
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-updatehook")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let mut cs =
        cloneset::new("web", 1, "v1", in_place(json!({"maxUnavailable": "100%"}))).expect("cs");
    cs.data["spec"]["template"]["metadata"]["labels"][HOLD] = json!("true");
    cs.data["spec"]["lifecycle"] = json!({"inPlaceUpdate": {"labelsHandler": {HOLD: "true"}}});
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    let first = wait_rolled_out(&api, "web", 1, ROLLOUT)
        .await
        .expect("initial rollout");
    let pod0 = cloneset::pods(&pods, "web").await.expect("pods")[0].clone();
    let name = pod0.name_any();
    let pod0 = wait_normal(&pods, &name).await;
    let before = snapshot(std::slice::from_ref(&pod0));

    set_image(&api, "web", "v2").await.expect("set image");
    wait_status(&api, "web", "a new update revision", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
    })
    .await
    .expect("new revision");
    let preparing = kruise_e2e::wait_pod(
        &pods,
        &name,
        "lifecycle PreparingUpdate",
        Duration::from_secs(60),
        |p| lifecycle_state(p) == "PreparingUpdate",
    )
    .await
    .expect("PreparingUpdate");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let held = pods.get(&name).await.expect("pod");
    assert_eq!(
        lifecycle_state(&held),
        "PreparingUpdate",
        "waits for the hook"
    );
    assert_eq!(
        spec_image(&held),
        image("testapp", "v1"),
        "not patched while held"
    );
    assert_eq!(
        snapshot(std::slice::from_ref(&held)),
        before,
        "not restarted"
    );
    assert_eq!(held.uid(), preparing.uid());

    // The hook's owner lets the update go.
    patch_pod_meta(&pods, &name, json!({"labels": {HOLD: null}})).await;
    let updated = kruise_e2e::wait_pod(
        &pods,
        &name,
        "updated in place and in lifecycle Updated",
        ROLLOUT,
        |p| {
            lifecycle_state(p) == "Updated"
                && container_status(p, "app").is_some_and(|c| c.image == image("testapp", "v2"))
        },
    )
    .await
    .expect("Updated");
    assert_eq!(updated.uid(), pod0.uid(), "updated in place");
    assert_eq!(
        container_status(&updated, "app").map(|c| c.restart_count),
        Some(1),
        "restarted once"
    );
    // Updated stays Updated while the hook is not held again.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        lifecycle_state(&pods.get(&name).await.expect("pod")),
        "Updated"
    );

    // The owner holds the hook again: the Pod is Normal.
    patch_pod_meta(&pods, &name, json!({"labels": {HOLD: "true"}})).await;
    wait_normal(&pods, &name).await;
    wait_rolled_out(&api, "web", 1, ROLLOUT)
        .await
        .expect("rollout complete");
    ns.delete().await.expect("delete ns");
}

/// A validating webhook on Pod creation in one namespace, served by the test itself, so the test
/// sees every create the controller attempts: when it arrived, and whether it was admitted. Each
/// request is held `GATE_HOLD` before the answer, so the creates of one batch (sent together)
/// arrive together and the next batch only after. The first `admit` creates are admitted, the rest
/// denied. The API server reaches it at [`kruise_e2e::host_address`] (127.0.0.1 on the local
/// cluster).
struct CreateGate {
    state: std::sync::Arc<GateState>,
    config: String,
    client: kube::Client,
    server: tokio::task::JoinHandle<()>,
}

const GATE_HOLD: Duration = Duration::from_millis(400);

#[derive(Default)]
struct GateState {
    admit: usize,
    arrivals: std::sync::Mutex<Vec<Instant>>,
    /// Dry-run creates: the probe that shows the API server calls us.
    probes: std::sync::atomic::AtomicUsize,
}

type Review = kube::core::admission::AdmissionReview<kube::api::DynamicObject>;

async fn gate_review(
    axum::extract::State(st): axum::extract::State<std::sync::Arc<GateState>>,
    axum::Json(review): axum::Json<Review>,
) -> axum::Json<Review> {
    use kube::core::admission::{AdmissionRequest, AdmissionResponse};
    let req: AdmissionRequest<kube::api::DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => return axum::Json(AdmissionResponse::invalid(e.to_string()).into_review()),
    };
    let resp = AdmissionResponse::from(&req);
    if req.dry_run {
        st.probes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        return axum::Json(resp.deny("e2e create gate: probe").into_review());
    }
    let seq = match st.arrivals.lock() {
        Ok(mut a) => {
            a.push(Instant::now());
            a.len()
        }
        Err(_) => usize::MAX,
    };
    tokio::time::sleep(GATE_HOLD).await;
    let resp = if seq <= st.admit {
        resp
    } else {
        resp.deny("e2e create gate: no more Pods")
    };
    axum::Json(resp.into_review())
}

impl CreateGate {
    async fn start(client: &kube::Client, ns: &str, selector: &str, admit: usize) -> Self {
        use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let host = kruise_e2e::host_address();
        let bundle = kruise_webhook::certs::generate_bundle(
            std::slice::from_ref(&host),
            std::time::SystemTime::now(),
            &kruise_webhook::certs::CertPolicy::default(),
        )
        .expect("certificates");
        let listener = std::net::TcpListener::bind((host.as_str(), 0)).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let tls = axum_server::tls_rustls::RustlsConfig::from_pem(
            bundle.cert.clone().into_bytes(),
            bundle.key.clone().into_bytes(),
        )
        .await
        .expect("tls config");
        let state = std::sync::Arc::new(GateState {
            admit,
            ..Default::default()
        });
        let app = axum::Router::new()
            .route("/validate", axum::routing::post(gate_review))
            .with_state(state.clone());
        let server = axum_server::from_tcp_rustls(listener, tls)
            .expect("server")
            .serve(app.into_make_service());
        let server = tokio::spawn(async move {
            if let Err(e) = server.await {
                eprintln!("create gate stopped: {e}");
            }
        });

        let (key, value) = selector.split_once('=').expect("selector k=v");
        let config = format!("e2e-create-gate-{ns}");
        let mut cfg: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": config, "labels": {kruise_e2e::E2E_LABEL: "create-gate"}},
            "webhooks": [{
                "name": "create-gate.e2e.kruise.io",
                "clientConfig": {"url": format!("https://{host}:{port}/validate")},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                "objectSelector": {"matchLabels": {key: value}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                // Left behind by a failed test, it must not block anyone: its namespace is gone.
                "failurePolicy": "Ignore",
                "timeoutSeconds": 10
            }]
        }))
        .expect("webhook configuration");
        cfg.webhooks.as_mut().expect("webhooks")[0]
            .client_config
            .ca_bundle = Some(k8s_openapi::ByteString(bundle.ca_cert.into_bytes()));
        let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        api.create(&PostParams::default(), &cfg)
            .await
            .expect("register the create gate");
        let gate = Self {
            state,
            config,
            client: client.clone(),
            server,
        };
        // The API server picks the configuration up a moment later: probe with dry-run creates.
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let probe: Pod = serde_json::from_value(json!({
            "metadata": {"generateName": "gate-probe-", "labels": {key: value}},
            "spec": {"containers": [{"name": "p", "image": image("testapp", "v1")}]}
        }))
        .expect("probe pod");
        let dry = PostParams {
            dry_run: true,
            ..Default::default()
        };
        wait_for(
            "the API server to call the create gate",
            Duration::from_secs(30),
            || async {
                let _ = pods.create(&dry, &probe).await;
                Ok((gate.state.probes.load(std::sync::atomic::Ordering::SeqCst) > 0).then_some(()))
            },
        )
        .await
        .expect("gate active");
        gate
    }

    /// Sizes of the batches of creates seen so far: arrivals closer together than half the hold
    /// time belong to one batch (a batch's creates are sent together, the next only after the
    /// answers).
    fn batches(&self) -> Vec<usize> {
        let arrivals = self
            .state
            .arrivals
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default();
        let mut out: Vec<usize> = Vec::new();
        let mut last: Option<Instant> = None;
        for t in arrivals {
            match last {
                Some(l) if t.duration_since(l) < GATE_HOLD / 2 => {
                    if let Some(n) = out.last_mut() {
                        *n += 1;
                    }
                }
                _ => out.push(1),
            }
            last = Some(t);
        }
        out
    }

    async fn stop(self) {
        use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
        let api: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        api.delete(&self.config, &Default::default())
            .await
            .expect("remove the create gate");
        self.server.abort();
    }
}

/// Slow start (upstream `slowStartBatch` in the CloneSet's scale): Pods are created in batches of
/// 1, 2, 4, ... and a batch with a failure ends the round, so a quota or webhook refusal costs
/// one batch, not one call per missing Pod. Here admission allows 3 Pods of 10: the controller
/// sends 1 (admitted), 2 (admitted), 4 (all refused) and stops; each later retry sends 1. When
/// admission allows again, the CloneSet reaches its 10 replicas.
#[tokio::test]
async fn scale_up_creates_pods_in_slow_start_batches() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-slowstart")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let gate = CreateGate::start(&client, &ns.name, "app=web", 3).await;

    let test = async {
        api.create(
            &PostParams::default(),
            &cloneset::new("web", 10, "v1", in_place(json!({}))).expect("cs"),
        )
        .await
        .expect("create");
        // The first round and at least one retry.
        let seen = wait_for(
            "the first round of creates and a retry",
            Duration::from_secs(60),
            || async {
                let b = gate.batches();
                Ok((b.len() >= 4).then_some(b))
            },
        )
        .await
        .expect("creates");
        let failed = wait_status(&api, "web", "the FailedScale condition", ROLLOUT, |cs| {
            cloneset::condition_true(cs, keys::CLONESET_CONDITION_FAILED_SCALE)
        })
        .await
        .expect("FailedScale");
        let batches = gate.batches();
        println!(
            "create batches seen: {batches:?}; FailedScale: {}",
            failed.data["status"]["conditions"]
        );
        assert_eq!(
            &seen[..3],
            &[1, 2, 4],
            "batches of 1, 2, 4, stopping at the refused one: {batches:?}"
        );
        assert!(
            batches[3..].iter().all(|&n| n == 1),
            "each retry starts again with a batch of 1 and stops at its refusal: {batches:?}"
        );
        let existing = cloneset::pods(&pods, "web").await.expect("pods");
        assert_eq!(existing.len(), 3, "only the admitted Pods exist");
    };
    let res = std::panic::AssertUnwindSafe(test).catch_unwind().await;
    // Pass or fail, the webhook configuration goes (it is cluster-scoped).
    gate.stop().await;
    if let Err(panic) = res {
        std::panic::resume_unwind(panic);
    }
    wait_rolled_out(&api, "web", 10, ROLLOUT)
        .await
        .expect("10 replicas once creates are admitted");
    ns.delete().await.expect("delete ns");
}

/// The CloneSet's claims, name → (UID, requested storage).
async fn claims(client: &kube::Client, ns: &str) -> BTreeMap<String, (String, String)> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    api.list(&ListParams::default().labels("app=web"))
        .await
        .expect("list claims")
        .items
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| {
            let size = c
                .spec
                .as_ref()
                .and_then(|s| s.resources.as_ref())
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .map(|q| q.0.clone())
                .unwrap_or_default();
            (c.name_any(), (c.uid().unwrap_or_default(), size))
        })
        .collect()
}

/// Upstream's `testUpdateVolumeClaimTemplates`, in the cluster: with
/// `RecreatePodWhenChangeVCTInCloneSetGate` on (off by default, as upstream: a gated-phase test),
/// an InPlaceIfPossible CloneSet whose
/// image and claim size change together recreates its Pods with new claims of the new size; an
/// image change alone stays in place; a claim change alone changes nothing until the next image
/// change, which then recreates.
#[tokio::test]
async fn gated_claim_template_change_recreates_pods_and_claims_with_the_gate() {
    let client = client().await.expect("cluster");
    manager::require_gates(&client, &[Gate::RecreatePodWhenChangeVCTInCloneSetGate])
        .await
        .expect("the gated phase's manager");
    let ns = TestNamespace::create(&client, "e2e-cs-vct")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let mut cs =
        cloneset::new("web", 2, "v1", in_place(json!({"maxUnavailable": "100%"}))).expect("cs");
    cs.data["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "data", "mountPath": "/data"}]);
    let claim = |size: &str| {
        json!([{"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}])
    };
    cs.data["spec"]["volumeClaimTemplates"] = claim("16Mi");
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("initial rollout");
    let revisions: Api<k8s_openapi::api::apps::v1::ControllerRevision> = ns.api();
    let hashes = || async {
        revisions
            .list(&ListParams::default())
            .await
            .expect("revisions")
            .items
            .iter()
            .map(|r| {
                r.annotations()
                    .get(keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH_ANNOTATION)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
    };
    // Upstream's hash of the claim as stored (defaulted with volumeMode Filesystem), computed
    // with upstream's code.
    assert_eq!(
        hashes().await,
        ["169449971"],
        "the revision records upstream's hash of the claims"
    );
    let roll = |tag: &'static str, size: &'static str| {
        let (api, claim) = (api.clone(), claim(size));
        async move {
            wait_rolled_out(&api, "web", 2, ROLLOUT)
                .await
                .expect("rolled out");
            patch_spec(
                &api,
                "web",
                json!({"volumeClaimTemplates": claim,
                       "template": {"spec": {"containers": [{"name": "app", "image": image("testapp", tag)}]}}}),
            )
            .await
            .expect("patch");
            wait_status(&api, "web", "observed", ROLLOUT, |cs| {
                cs.metadata.generation == Some(status_i64(cs, "observedGeneration"))
            })
            .await
            .expect("observed");
            wait_rolled_out(&api, "web", 2, ROLLOUT)
                .await
                .expect("rolled out");
        }
    };

    // Image and claim size together: recreated, with new claims of the new size.
    let pods0 = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    let claims0 = claims(&client, &ns.name).await;
    assert_eq!(claims0.len(), 2, "{claims0:?}");
    roll("v2", "32Mi").await;
    let pods1 = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    let claims1 = wait_for("the old claims gone", ROLLOUT, || async {
        let c = claims(&client, &ns.name).await;
        Ok((c.len() == 2).then_some(c))
    })
    .await
    .expect("two claims");
    for s in pods1.values() {
        assert!(
            pods0.values().all(|old| old.uid != s.uid),
            "every Pod recreated: {pods0:?} {pods1:?}"
        );
    }
    for (name, (uid, size)) in &claims1 {
        assert!(
            claims0.values().all(|(old, _)| old != uid),
            "{name} is a new claim"
        );
        assert_eq!(size, "32Mi", "{name} asks for the new size");
    }

    // Image alone: in place, the same Pods and claims.
    roll("v3", "32Mi").await;
    let pods2 = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    for (name, s) in &pods2 {
        let old = pods1.get(name).expect("same Pod names");
        assert_eq!(s.uid, old.uid, "{name} kept");
        assert_eq!(s.restarts, old.restarts + 1, "{name} restarted in place");
    }
    assert_eq!(claims(&client, &ns.name).await, claims1, "claims kept");

    // Claim size alone: nothing happens (no new revision, Pods untouched).
    let generation_before = api.get("web").await.expect("cs").metadata.generation;
    patch_spec(&api, "web", json!({"volumeClaimTemplates": claim("48Mi")}))
        .await
        .expect("patch claims");
    wait_status(&api, "web", "observed", ROLLOUT, |cs| {
        cs.metadata.generation > generation_before
            && cs.metadata.generation == Some(status_i64(cs, "observedGeneration"))
    })
    .await
    .expect("observed");
    let pods3 = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    assert_eq!(pods3, pods2, "nothing changed");

    // The next image change: the claims differ from its revision's, so recreate.
    roll("v1", "48Mi").await;
    let pods4 = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    for s in pods4.values() {
        assert!(
            pods3.values().all(|old| old.uid != s.uid),
            "every Pod recreated: {pods3:?} {pods4:?}"
        );
    }
    ns.delete().await.expect("delete ns");
}
