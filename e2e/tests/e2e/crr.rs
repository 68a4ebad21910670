//! ContainerRecreateRequest end to end: the webhook admits it, kruise-daemon stops the containers
//! through CRI, the kubelet starts new ones, and the manager keeps the snapshot, the not-ready
//! key and the TTL. Checked on CloneSet Pods, against the Pod status and CRI.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys;
use kruise_e2e::cloneset::{self, wait_rolled_out};
use kruise_e2e::{TestNamespace, client, container_status, image, pod_ready, wait_for, wait_pod};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

const ROLLOUT: Duration = Duration::from_secs(180);
const RECREATE: Duration = Duration::from_secs(120);

fn crrs(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            keys::APPS_GROUP,
            keys::VERSION_V1BETA1,
            "ContainerRecreateRequest",
        ),
        "containerrecreaterequests",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

fn crr(name: &str, pod: &str, containers: &[&str], extra: Value) -> DynamicObject {
    let mut spec = json!({
        "podName": pod,
        "containers": containers.iter().map(|c| json!({"name": c})).collect::<Vec<_>>(),
    });
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1BETA1, "kind": "ContainerRecreateRequest",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("crr json")
}

/// A ready one-Pod CloneSet `web` (testapp, plus the idler sidecar when `sidecar`); its Pod.
async fn one_pod(client: &Client, ns: &TestNamespace, sidecar: bool) -> Pod {
    let api = cloneset::api(client, &ns.name);
    let mut cs = cloneset::new("web", 1, "v1", json!({})).expect("cs");
    if sidecar {
        let containers = cs.data["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .expect("containers");
        containers.push(json!({"name": "sidecar", "image": image("sidecar", "v1")}));
    }
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");
    wait_rolled_out(&api, "web", 1, ROLLOUT)
        .await
        .expect("rollout");
    let pods = cloneset::pods(&ns.api(), "web").await.expect("pods");
    assert_eq!(pods.len(), 1);
    pods[0].clone()
}

fn id_and_restarts(p: &Pod, c: &str) -> (String, i32) {
    let s = container_status(p, c);
    (
        s.and_then(|s| s.container_id.clone()).unwrap_or_default(),
        s.map(|s| s.restart_count).unwrap_or(-1),
    )
}

fn started_at(p: &Pod, c: &str) -> i64 {
    container_status(p, c)
        .and_then(|s| s.state.as_ref()?.running.as_ref()?.started_at.clone())
        .map(|t: Time| t.0.as_second())
        .unwrap_or(0)
}

fn states(c: &DynamicObject) -> Vec<(String, String)> {
    c.data["status"]["containerRecreateStates"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|s| {
                    (
                        s["name"].as_str().unwrap_or("").to_string(),
                        s["phase"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Waits for phase Completed, keeping every distinct containerRecreateStates seen on the way.
async fn wait_completed(
    api: &Api<DynamicObject>,
    name: &str,
) -> (DynamicObject, Vec<Vec<(String, String)>>) {
    let mut history: Vec<Vec<(String, String)>> = Vec::new();
    let start = std::time::Instant::now();
    loop {
        let c = api.get(name).await.expect("get CRR");
        let s = states(&c);
        if history.last() != Some(&s) {
            history.push(s);
        }
        if c.data["status"]["phase"] == "Completed" {
            return (c, history);
        }
        assert!(
            start.elapsed() < RECREATE,
            "CRR {name} not Completed: {}",
            c.data["status"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// d: the container of a running CloneSet Pod is recreated: new containerID, restartCount + 1,
/// same Pod, CRR Completed with the container Succeeded.
#[tokio::test]
async fn recreates_container_in_place() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-crr").await.expect("ns");
    let pod = one_pod(&client, &ns, false).await;
    let (old_id, old_restarts) = id_and_restarts(&pod, "app");
    let api = crrs(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &crr("r", &pod.name_any(), &["app"], json!({})),
    )
    .await
    .expect("create CRR");
    let (c, _) = wait_completed(&api, "r").await;
    let st = &c.data["status"];
    assert_eq!(st["message"].as_str().unwrap_or(""), "", "{st}");
    assert!(!st["completionTime"].is_null(), "{st}");
    assert_eq!(
        states(&c),
        vec![("app".to_string(), "Succeeded".to_string())],
        "{st}"
    );
    // What the webhook recorded matches what the Pod had.
    assert_eq!(
        c.data["spec"]["containers"][0]["statusContext"]["containerID"].as_str(),
        Some(old_id.as_str())
    );

    let pods: Api<Pod> = ns.api();
    let now = wait_pod(&pods, &pod.name_any(), "ready again", RECREATE, pod_ready)
        .await
        .expect("pod");
    let (new_id, restarts) = id_and_restarts(&now, "app");
    assert_eq!(now.uid(), pod.uid(), "same Pod");
    assert_ne!(new_id, old_id, "a new container");
    assert_eq!(restarts, old_restarts + 1);
    ns.delete().await.expect("delete ns");
}

/// d: with orderedRecreate, the second container is stopped only once the first one is back:
/// the states go one at a time and the new containers started one after the other.
#[tokio::test]
async fn ordered_recreate_goes_one_by_one() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-crr-ordered")
        .await
        .expect("ns");
    let pod = one_pod(&client, &ns, true).await;
    let before_app = id_and_restarts(&pod, "app");
    let before_side = id_and_restarts(&pod, "sidecar");
    let api = crrs(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &crr(
            "r",
            &pod.name_any(),
            &["app", "sidecar"],
            json!({"strategy": {"orderedRecreate": true}}),
        ),
    )
    .await
    .expect("create CRR");
    let (c, history) = wait_completed(&api, "r").await;
    let done = states(&c);
    assert_eq!(
        done,
        vec![
            ("app".to_string(), "Succeeded".to_string()),
            ("sidecar".to_string(), "Succeeded".to_string())
        ],
        "{}",
        c.data["status"]
    );
    // The sidecar never left Pending before app had Succeeded.
    for s in &history {
        let phase = |n: &str| {
            s.iter()
                .find(|(name, _)| name == n)
                .map(|(_, p)| p.as_str())
                .unwrap_or("")
        };
        if !matches!(phase("sidecar"), "" | "Pending") {
            assert_eq!(phase("app"), "Succeeded", "states went {history:?}");
        }
    }
    let pods: Api<Pod> = ns.api();
    let now = wait_pod(&pods, &pod.name_any(), "ready again", RECREATE, pod_ready)
        .await
        .expect("pod");
    let after_app = id_and_restarts(&now, "app");
    let after_side = id_and_restarts(&now, "sidecar");
    assert_eq!(now.uid(), pod.uid(), "same Pod");
    assert_ne!(after_app.0, before_app.0);
    assert_ne!(after_side.0, before_side.0);
    assert_eq!(after_app.1, before_app.1 + 1);
    assert_eq!(after_side.1, before_side.1 + 1);
    let (app_at, side_at) = (started_at(&now, "app"), started_at(&now, "sidecar"));
    assert!(
        side_at > app_at,
        "sidecar restarted after app: app at {app_at}, sidecar at {side_at}"
    );
    ns.delete().await.expect("delete ns");
}

fn kruise_ready(p: &Pod) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == keys::KRUISE_POD_READY)
        .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
}

/// unreadyGracePeriodSeconds: the Pod is marked not ready (KruisePodReady False, with the CRR's
/// key) before the recreation and ready again after; the finalizer and the active label go; the
/// CRR is deleted ttlSecondsAfterFinished after it completes.
#[tokio::test]
async fn unready_grace_then_ttl() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-crr-grace")
        .await
        .expect("ns");
    let pod = one_pod(&client, &ns, false).await;
    let old_id = id_and_restarts(&pod, "app").0;
    let api = crrs(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &crr(
            "r",
            &pod.name_any(),
            &["app"],
            json!({"strategy": {"unreadyGracePeriodSeconds": 2}, "ttlSecondsAfterFinished": 5}),
        ),
    )
    .await
    .expect("create CRR");
    let pods: Api<Pod> = ns.api();
    let key = format!("{}/r", ns.name);
    let (mut saw_unready, mut saw_snapshot, mut saw_labels) = (false, false, false);
    let start = std::time::Instant::now();
    let done = loop {
        let c = api.get("r").await.expect("get CRR");
        saw_labels |= c.labels().get(keys::CRR_POD_UID_LABEL) == pod.uid().as_ref()
            && c.labels().contains_key(keys::CRR_NODE_NAME_LABEL);
        saw_snapshot |= c.data["status"]["containerStatusSnapshot"]
            .as_array()
            .is_some_and(|v| !v.is_empty());
        let p = pods.get(&pod.name_any()).await.expect("pod");
        saw_unready |= kruise_ready(&p).is_some_and(|(s, m)| s == "False" && m.contains(&key));
        let finished = !c.data["status"]["completionTime"].is_null();
        let released = !c.labels().contains_key(keys::CRR_ACTIVE_LABEL)
            && !c
                .finalizers()
                .iter()
                .any(|f| f == keys::CRR_UNREADY_ACQUIRED_FINALIZER);
        if finished && released {
            break c;
        }
        assert!(start.elapsed() < RECREATE, "CRR not done: {:?}", c.data);
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        saw_labels && saw_unready && saw_snapshot,
        "labels={saw_labels} unready={saw_unready} snapshot={saw_snapshot}"
    );
    assert_eq!(done.data["status"]["message"].as_str().unwrap_or(""), "");
    assert_eq!(
        states(&done),
        vec![("app".to_string(), "Succeeded".to_string())]
    );
    let p = wait_pod(
        &pods,
        &pod.name_any(),
        "KruisePodReady True",
        RECREATE,
        |p| kruise_ready(p).is_some_and(|(s, _)| s == "True"),
    )
    .await
    .expect("pod ready again");
    assert_ne!(id_and_restarts(&p, "app").0, old_id);
    wait_for(
        "the CRR deleted after its TTL",
        Duration::from_secs(60),
        || async { Ok(api.get_opt("r").await?.is_none().then_some(())) },
    )
    .await
    .expect("TTL");
    ns.delete().await.expect("delete ns");
}

/// The webhook, not the controller, admits a request: the object the create call returns already
/// carries the labels, the defaulted strategy and each container's statusContext taken from the
/// Pod (in both API versions). Requests it cannot admit are refused with what is wrong, and an
/// admitted request's spec can not change.
#[tokio::test]
async fn webhook_admits_at_create_and_refuses_what_it_cannot() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-crr-webhook")
        .await
        .expect("ns");
    let pod = one_pod(&client, &ns, false).await;
    let pod_name = pod.name_any();
    let (app_id, app_restarts) = id_and_restarts(&pod, "app");
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("scheduled");
    let grace = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .expect("grace");
    let assert_admitted = |c: &DynamicObject, what: &str| {
        let l = c.labels();
        assert_eq!(
            l.get(keys::CRR_ACTIVE_LABEL).map(String::as_str),
            Some("true"),
            "{what}: {l:?}"
        );
        assert_eq!(
            l.get(keys::CRR_POD_UID_LABEL),
            pod.metadata.uid.as_ref(),
            "{what}: {l:?}"
        );
        assert_eq!(
            l.get(keys::CRR_NODE_NAME_LABEL),
            Some(&node),
            "{what}: {l:?}"
        );
        let spec = &c.data["spec"];
        assert_eq!(spec["strategy"]["failurePolicy"], "Fail", "{what}: {spec}");
        assert_eq!(
            spec["strategy"]["terminationGracePeriodSeconds"], grace,
            "{what}: {spec}"
        );
        let ctx = &spec["containers"][0]["statusContext"];
        assert_eq!(
            ctx["containerID"].as_str(),
            Some(app_id.as_str()),
            "{what}: {spec}"
        );
        assert_eq!(ctx["restartCount"], app_restarts, "{what}: {spec}");
    };

    // v1alpha1, dry run: admission runs, nothing is stored.
    let alpha_api = {
        let ar = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(keys::APPS_GROUP, "v1alpha1", "ContainerRecreateRequest"),
            "containerrecreaterequests",
        );
        Api::<DynamicObject>::namespaced_with(client.clone(), &ns.name, &ar)
    };
    let mut alpha = crr("dry", &pod_name, &["app"], json!({}));
    alpha.types = Some(kube::api::TypeMeta {
        api_version: format!("{}/v1alpha1", keys::APPS_GROUP),
        kind: "ContainerRecreateRequest".into(),
    });
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let c = alpha_api
        .create(&dry, &alpha)
        .await
        .expect("v1alpha1 CRR admitted (dry run)");
    assert_admitted(&c, "v1alpha1");

    // v1beta1, stored: the create call's answer is already complete, before any controller ran.
    let api = crrs(&client, &ns.name);
    let c = api
        .create(
            &PostParams::default(),
            &crr("r", &pod_name, &["app"], json!({})),
        )
        .await
        .expect("create CRR");
    assert_admitted(&c, "v1beta1");
    assert!(
        c.data["status"].is_null(),
        "no controller has touched it yet: {}",
        c.data["status"]
    );

    // Its spec is frozen from now on (a patch: no resourceVersion to race the daemon with).
    let change = json!({"spec": {"activeDeadlineSeconds": 600}});
    match api
        .patch("r", &PatchParams::default(), &Patch::Merge(&change))
        .await
    {
        Ok(_) => panic!("spec change of an admitted CRR was accepted"),
        Err(kube::Error::Api(s)) => assert!(
            s.message.contains(
                "spec of ContainerRecreateRequest is immutable (changed: activeDeadlineSeconds)"
            ),
            "{}",
            s.message
        ),
        Err(e) => panic!("patch CRR: {e}"),
    }

    let mut forged = crr("forged", &pod_name, &["app"], json!({}));
    forged.data["spec"]["containers"][0]["statusContext"] =
        json!({"containerID": "containerd://forged", "restartCount": 0});
    let refused = [
        (
            crr("no-pod", "no-such-pod", &["app"], json!({})),
            format!("Pod \"no-such-pod\" not found in namespace \"{}\"", ns.name),
        ),
        (
            crr("no-container", &pod_name, &["nope"], json!({})),
            format!("container \"nope\" not found in Pod \"{pod_name}\" (its containers: app)"),
        ),
        (
            forged,
            "statusContext of container \"app\" are read-only".to_string(),
        ),
        (
            crr(
                "twice",
                &pod_name,
                &["app", "app"],
                json!({"activeDeadlineSeconds": 1}),
            ),
            "spec.activeDeadlineSeconds: Invalid value: 1".to_string(),
        ),
    ];
    for (obj, want) in refused {
        let name = obj.name_any();
        match api.create(&PostParams::default(), &obj).await {
            Ok(o) => panic!("CRR {name} admitted: {}", o.data["spec"]),
            Err(kube::Error::Api(s)) => {
                assert!(
                    s.message.contains(&want),
                    "CRR {name}: {:?} should say {want:?}",
                    s.message
                );
            }
            Err(e) => panic!("create CRR {name}: {e}"),
        }
    }
    // Every problem of a request is named, not only the first.
    match api
        .create(
            &PostParams::default(),
            &crr(
                "twice",
                &pod_name,
                &["app", "app"],
                json!({"activeDeadlineSeconds": 1}),
            ),
        )
        .await
    {
        Err(kube::Error::Api(s)) => assert!(
            s.message
                .contains("spec.containers[1].name: Duplicate value: \"app\""),
            "{}",
            s.message
        ),
        other => panic!("duplicate containers: {other:?}"),
    }
    ns.delete().await.expect("delete ns");
}

/// The daemon killed while a request waits on it, then brought back the way the mode allows (dev
/// mode: hack/dev-up.sh; in cluster: its Pod deleted): the request completes and the container is
/// recreated exactly once, neither lost nor doubled.
#[tokio::test]
async fn serial_daemon_killed_mid_request_recreates_exactly_once() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-crr-kill")
        .await
        .expect("ns");
    let pod = one_pod(&client, &ns, false).await;
    let (old_id, old_restarts) = id_and_restarts(&pod, "app");
    let api = crrs(&client, &ns.name);
    // The unready grace keeps the request open for a few seconds: the kill lands inside it.
    api.create(
        &PostParams::default(),
        &crr(
            "r",
            &pod.name_any(),
            &["app"],
            json!({"strategy": {"unreadyGracePeriodSeconds": 3}}),
        ),
    )
    .await
    .expect("create CRR");
    kruise_e2e::mode::crash_daemon(&client, async || {
        let c = api.get("r").await.expect("get CRR");
        assert_ne!(
            c.data["status"]["phase"], "Completed",
            "the daemon was killed before the request completed: {}",
            c.data["status"]
        );
    })
    .await
    .expect("the daemon is killed and comes back");

    let (c, _) = wait_completed(&api, "r").await;
    assert_eq!(
        states(&c),
        vec![("app".to_string(), "Succeeded".to_string())],
        "{}",
        c.data["status"]
    );
    let pods: Api<Pod> = ns.api();
    let now = wait_pod(&pods, &pod.name_any(), "ready again", RECREATE, pod_ready)
        .await
        .expect("pod");
    let (new_id, restarts) = id_and_restarts(&now, "app");
    assert_eq!(now.uid(), pod.uid(), "same Pod");
    assert_ne!(new_id, old_id, "a new container");
    assert_eq!(restarts, old_restarts + 1, "recreated exactly once");
    // Settled: no second recreation follows a while later.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let later = pods.get(&pod.name_any()).await.expect("pod");
    assert_eq!(id_and_restarts(&later, "app"), (new_id, restarts));
    ns.delete().await.expect("delete ns");
}
