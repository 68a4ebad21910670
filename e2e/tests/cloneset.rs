//! CloneSet in-place update, end to end: a real kube-apiserver, kubelet and containerd, with
//! kruise-manager (and its webhook) and kruise-daemon running. Each test has its own namespace.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use kruise_api::keys;
use kruise_e2e::cloneset::{
    self, patch_spec, pod_revision, set_image, status_i64, status_str, wait_rolled_out, wait_status,
};
use kruise_e2e::recorder::PodRecorder;
use kruise_e2e::{TestNamespace, client, container_status, image, wait_for};
use kube::api::{ListParams, PostParams};
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

/// Scenario 4b: under InPlaceOnly the same change touches no Pod; an Event and the FailedUpdate
/// condition say why.
#[tokio::test]
async fn env_change_is_refused_under_in_place_only() {
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

    // The webhook may refuse the change outright (InPlaceOnly allows image changes only); if it
    // admits it, the controller must refuse to act.
    if let Err(e) = cloneset::json_patch(&api, "web", add_env()).await {
        let msg = e.to_string();
        assert!(
            msg.contains("InPlaceOnly") || msg.contains("in place") || msg.contains("in-place"),
            "rejection names the rule: {msg}"
        );
    } else {
        let failed = wait_status(&api, "web", "a FailedUpdate condition", ROLLOUT, |cs| {
            cs.data["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter().any(|c| {
                    c["type"] == keys::CLONESET_CONDITION_FAILED_UPDATE && c["status"] == "True"
                })
            })
        })
        .await
        .expect("FailedUpdate condition");
        let events: Api<Event> = ns.api();
        let warned = wait_for(
            "a Warning Event on the CloneSet",
            Duration::from_secs(30),
            || async {
                let list = events.list(&ListParams::default()).await?;
                Ok(list.items.into_iter().find(|e| {
                    e.involved_object.name.as_deref() == Some("web")
                        && e.type_.as_deref() == Some("Warning")
                }))
            },
        )
        .await
        .expect("event");
        println!(
            "condition: {}; event: {:?}",
            failed.data["status"]["conditions"], warned.message
        );
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = snapshot(&cloneset::pods(&pods, "web").await.expect("pods"));
    assert_eq!(after, before, "no Pod was touched");
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
        let state: kruise_api::appspub::InPlaceUpdateState = serde_json::from_str(
            p.annotations()
                .get(keys::INPLACE_UPDATE_STATE_ANNOTATION)
                .expect("inplace-update-state annotation"),
        )
        .expect("state JSON");
        let batches: Vec<Vec<String>> = state
            .container_batches_record
            .iter()
            .map(|b| b.containers.clone())
            .collect();
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
