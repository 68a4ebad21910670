//! In-place vertical scaling with launch priorities, end to end (upstream's
//! `test/e2e/apps/v1alpha1/inplace_vpa.go`, "in-place update two container image, resource and
//! env from metadata with priorities"): one update changes a low-priority container's image and
//! resources and the annotation a high-priority container reads into its env. The high-priority
//! container goes first and is restarted by the daemon for its stale env; the other follows
//! only after it has started, in a second batch, resized in place.
//!
//! Upstream expects redis to restart exactly once, and so does this test. The kubelet can be in
//! a sync that began with the Pod as it was before the update (nginx had just started), waiting
//! up to a second for a fresh runtime status; a stop landing in that window made that sync
//! recreate redis from the old Pod, with the old value, and the daemon then rightly restarted
//! it a second time (4 runs of 5). kruise-daemon now waits until a container has looked stale
//! for 2 s before it stops it, as upstream's gets a second's margin from its event queue.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::RuntimeContainerMetaSet;
use kruise_api::keys;
use kruise_e2e::cloneset::{self, status_i64, status_str, wait_status};
use kruise_e2e::{TestNamespace, client, container_status, image};
use kube::api::{DynamicObject, PostParams, WatchEvent, WatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const ROLLOUT: Duration = Duration::from_secs(150);

fn resources(cpu: (&str, &str), memory: (&str, &str)) -> Value {
    json!({"requests": {"cpu": cpu.0, "memory": memory.0},
           "limits": {"cpu": cpu.1, "memory": memory.1}})
}

/// Upstream's CloneSet: `nginx` (resources, the given resize policy) and `redis` (priority 10,
/// `CONFIG` from the `config` annotation, a 10 s postStart). The idler stands in for redis: like
/// redis it keeps running and exits at once on SIGTERM.
fn clone_set(resize_policy: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1ALPHA1, "kind": "CloneSet", "metadata": {"name": "vpa"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "vpa"}},
            "updateStrategy": {"type": "InPlaceIfPossible"},
            "template": {"metadata": {"labels": {"app": "vpa"}, "annotations": {"config": "foo"}},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": [
                    {"name": "nginx", "image": image("testapp", "v1"),
                     "env": [{"name": "test", "value": "foo"}],
                     "resources": resources(("200m", "1"), ("200Mi", "1Gi")),
                     "resizePolicy": resize_policy},
                    {"name": "redis", "image": image("sidecar", "v1"),
                     "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "10"},
                        {"name": "CONFIG", "valueFrom": {"fieldRef":
                            {"fieldPath": "metadata.annotations['config']"}}}],
                     "lifecycle": {"postStart": {"exec": {"command": ["sleep", "10"]}}}}]}}}
    }))
    .expect("CloneSet")
}

fn started_at(p: &Pod, c: &str) -> Option<jiff::Timestamp> {
    let s = container_status(p, c)?;
    Some(s.state.as_ref()?.running.as_ref()?.started_at.as_ref()?.0)
}

/// When nginx's old container stopped (upstream's check; its start time when the kubelet
/// resized it without a restart).
fn nginx_stopped_at(p: &Pod) -> Option<jiff::Timestamp> {
    let s = container_status(p, "nginx")?;
    match s.last_state.as_ref().and_then(|l| l.terminated.as_ref()) {
        Some(t) => Some(t.finished_at.as_ref()?.0),
        None => started_at(p, "nginx"),
    }
}

async fn update_two_containers_in_batches(prefix: &str, resize_policy: Value) {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, prefix).await.expect("ns");
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &ns.name,
        &cloneset::resource(keys::VERSION_V1ALPHA1),
    );
    let pods: Api<Pod> = ns.api();
    api.create(&PostParams::default(), &clone_set(resize_policy))
        .await
        .expect("create");
    let first = wait_status(&api, "vpa", "1 ready replica", ROLLOUT, |cs| {
        status_i64(cs, "readyReplicas") == 1
    })
    .await
    .expect("ready");
    let before = cloneset::pods(&pods, "vpa").await.expect("pods").remove(0);
    // The env hash redis has with the old annotation value, as the daemon computes it.
    let redis_spec = before
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == "redis"))
        .cloned()
        .expect("redis");
    let old_hash = kruise_api::hash::expected_hash(
        &redis_spec,
        &BTreeMap::new(),
        &BTreeMap::from([("config".to_owned(), "foo".to_owned())]),
    );
    let original_redis = container_status(&before, "redis")
        .and_then(|s| s.container_id.clone())
        .expect("redis container");
    // Every redis container the daemon reports, with the env hash it read in it.
    let wp = WatchParams::default()
        .fields(&format!("metadata.name={}", before.name_any()))
        .timeout(150);
    let events = pods
        .watch(&wp, &before.resource_version().unwrap_or_default())
        .await
        .expect("watch pod");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<String, u64>::new()));
    let record = seen.clone();
    let watcher = tokio::spawn(async move {
        let mut events = events.boxed();
        while let Ok(Some(ev)) = events.try_next().await {
            let WatchEvent::Modified(p) = ev else {
                continue;
            };
            let meta = RuntimeContainerMetaSet::from_annotations(p.metadata.annotations.as_ref());
            for c in meta.ok().flatten().into_iter().flat_map(|m| m.containers) {
                let h = c.hashes.extracted_env_from_metadata_hash;
                if c.name == "redis" && h > 0 {
                    record.lock().expect("hashes").insert(c.container_id, h);
                }
            }
        }
    });

    cloneset::json_patch(&api, "vpa", json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image("testapp", "v2")},
        {"op": "replace", "path": "/spec/template/metadata/annotations/config", "value": "bar"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/resources",
         "value": resources(("100m", "800m"), ("100Mi", "800Mi"))}
    ]))
    .await
    .expect("update nginx image and resources, config annotation");
    wait_status(&api, "vpa", "1 updated available replica", ROLLOUT, |cs| {
        status_str(cs, "updateRevision") != status_str(&first, "updateRevision")
            && cs.metadata.generation == cs.data["status"]["observedGeneration"].as_i64()
            && status_i64(cs, "updatedAvailableReplicas") == 1
            && status_i64(cs, "updatedReadyReplicas") == 1
    })
    .await
    .expect("rolled out");
    let pod = pods.get(&before.name_any()).await.expect("pod");
    assert_eq!(pod.uid(), before.uid(), "updated in place");
    // The daemon reports the last container's hash in the same write as its restart of the
    // one before; give the watch a moment past the rollout, then stop it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    watcher.abort();
    let hashes = seen.lock().expect("hashes").clone();
    let started_stale: Vec<&String> = hashes
        .iter()
        .filter(|(id, h)| **id != original_redis && **h == old_hash)
        .map(|(id, _)| id)
        .collect();
    let restarts = |c: &str| container_status(&pod, c).map(|s| s.restart_count);
    assert_eq!(
        restarts("redis"),
        Some(1),
        "redis restarts once, for its env from metadata; replacements the kubelet started with \
         the old value: {started_stale:?}; hashes seen {hashes:?}: {:?}",
        pod.status.as_ref().map(|s| &s.container_statuses)
    );
    // The redis that runs now has the new value.
    let running = container_status(&pod, "redis").and_then(|s| s.container_id.clone());
    let now_hash = RuntimeContainerMetaSet::from_annotations(pod.metadata.annotations.as_ref())
        .ok()
        .flatten()
        .and_then(|m| {
            m.containers
                .into_iter()
                .find(|c| Some(&c.container_id) == running.as_ref())
        })
        .map(|c| c.hashes.extracted_env_from_metadata_hash);
    assert_eq!(
        now_hash,
        Some(kruise_api::hash::expected_hash(
            &redis_spec,
            &BTreeMap::new(),
            &BTreeMap::from([("config".to_owned(), "bar".to_owned())]),
        )),
        "redis runs CONFIG=bar"
    );
    assert_eq!(
        container_status(&pod, "nginx").map(|s| s.image.clone()),
        Some(image("testapp", "v2"))
    );
    let redis_started = started_at(&pod, "redis").expect("redis running");
    let nginx_stopped = nginx_stopped_at(&pod).expect("nginx stopped or started");
    assert!(
        nginx_stopped > redis_started + Duration::from_secs(10),
        "nginx stopped at {nginx_stopped}, not after redis started ({redis_started}) + 10 s"
    );
    let batches = kruise_e2e::inplace_batches(&kruise_e2e::inplace_state(&pod));
    assert_eq!(batches, vec![vec!["redis"], vec!["nginx"]]);
    // nginx's new resources in its spec and (resized) in its status; redis untouched.
    let spec = |c: &str| {
        pod.spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|x| x.name == c))
            .and_then(|x| x.resources.clone())
    };
    let want: k8s_openapi::api::core::v1::ResourceRequirements =
        serde_json::from_value(resources(("100m", "800m"), ("100Mi", "800Mi"))).expect("res");
    assert_eq!(spec("nginx"), Some(want.clone()));
    assert_eq!(
        container_status(&pod, "nginx").and_then(|s| s.resources.clone()),
        Some(want)
    );
    assert_eq!(
        spec("redis").unwrap_or_default(),
        before
            .spec
            .as_ref()
            .and_then(|s| s.containers.iter().find(|x| x.name == "redis"))
            .and_then(|x| x.resources.clone())
            .unwrap_or_default(),
        "redis's resources unchanged"
    );
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn priority_batches_restart_the_env_container_once_then_nginx_restart_container() {
    update_two_containers_in_batches(
        "e2e-vpa-restart",
        json!([{"resourceName": "cpu", "restartPolicy": "RestartContainer"},
               {"resourceName": "memory", "restartPolicy": "RestartContainer"}]),
    )
    .await;
}

#[tokio::test]
async fn priority_batches_restart_the_env_container_once_then_nginx_not_required() {
    update_two_containers_in_batches(
        "e2e-vpa-notreq",
        json!([{"resourceName": "cpu", "restartPolicy": "NotRequired"},
               {"resourceName": "memory", "restartPolicy": "NotRequired"}]),
    )
    .await;
}
