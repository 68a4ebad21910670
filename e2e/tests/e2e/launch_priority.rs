//! Container launch priority, end to end: the pod webhook turns `KRUISE_CONTAINER_PRIORITY` into
//! a barrier env, and the launch-priority controller in kruise-manager releases the barrier keys
//! one priority at a time, so containers start in priority order rather than spec order.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kruise_api::keys;
use kruise_e2e::cloneset;
use kruise_e2e::{TestNamespace, client, container_status, image, pod_ready, wait_for, wait_pod};
use kube::api::DynamicObject;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;

const STARTUP: Duration = Duration::from_secs(180);
/// Long enough for the controller to create a barrier once the pod exists.
const BARRIER_APPEARS: Duration = Duration::from_secs(60);

/// The app container: ready 3 s after it starts, so that whatever starts after it does so in
/// a later second (container start times have one-second resolution).
fn app(env: serde_json::Value) -> serde_json::Value {
    json!({
        "name": "app",
        "image": image("testapp", "v1"),
        "env": env,
        "ports": [{"containerPort": 8080}],
        "readinessProbe": {
            "httpGet": {"path": "/", "port": 8080},
            "initialDelaySeconds": 3,
            "periodSeconds": 1
        }
    })
}

fn sidecar(env: serde_json::Value) -> serde_json::Value {
    json!({"name": "sidecar", "image": image("sidecar", "v1"), "env": env})
}

fn cloneset_of(
    name: &str,
    annotations: serde_json::Value,
    containers: serde_json::Value,
) -> DynamicObject {
    let obj = json!({
        "apiVersion": keys::APPS_V1BETA1,
        "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": annotations},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": containers}
            }
        }
    });
    serde_json::from_value(obj).expect("valid CloneSet")
}

/// The barrier key the webhook gave a container.
fn barrier_key(pod: &Pod, container: &str) -> Option<(String, String)> {
    let c = pod
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == container)?;
    let env = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == keys::ENV_CONTAINER_BARRIER)?;
    let r = env.value_from.as_ref()?.config_map_key_ref.as_ref()?;
    Some((r.name.clone(), r.key.clone()))
}

fn started_at(pod: &Pod, container: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    let running = container_status(pod, container)?
        .state
        .as_ref()?
        .running
        .as_ref()?;
    running.started_at.as_ref().map(|t| t.0)
}

/// Creates `cs` and checks that its Pod's containers start one after the other in `order`
/// (container, barrier priority), highest priority first.
async fn starts_in_order(prefix: &str, cs: DynamicObject, order: &[(&str, i64)]) {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, prefix).await.expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let cms: Api<ConfigMap> = ns.api();
    let cs_name = cs.name_any();
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create CloneSet");

    let pod = wait_for("the CloneSet's Pod", Duration::from_secs(60), || async {
        Ok(cloneset::pods(&pods, &cs_name).await?.into_iter().next())
    })
    .await
    .expect("pod created");
    let name = pod.name_any();
    let barrier = format!("{name}{}", keys::CONTAINER_LAUNCH_BARRIER_CONFIGMAP_SUFFIX);
    let key = |p: i64| format!("{}{p}", keys::CONTAINER_LAUNCH_BARRIER_KEY_PREFIX);

    // The webhook's part: each container waits on the key of its own priority.
    for (c, p) in order {
        assert_eq!(
            barrier_key(&pod, c),
            Some((barrier.clone(), key(*p))),
            "barrier env of {c}"
        );
    }

    // The controller's part. Without it the ConfigMap never appears and no container starts.
    let appeared = wait_for("the barrier ConfigMap", BARRIER_APPEARS, || async {
        Ok(cms.get_opt(&barrier).await?)
    })
    .await;
    let cm = match appeared {
        Ok(cm) => cm,
        Err(e) => panic!(
            "ConfigMap {barrier} did not appear ({e}). The container launch-priority controller \
             is not running: kruise-manager must start kruise_manager::launchpriority::controller::run \
             (see controller/src/launchpriority) and be rebuilt with hack/dev-up.sh"
        ),
    };
    let owner = cm
        .metadata
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .find(|o| o.kind == "Pod")
        .expect("barrier has a Pod owner reference");
    assert_eq!(
        (owner.name.as_str(), Some(owner.uid)),
        (name.as_str(), pod.uid()),
        "barrier owned by its pod"
    );

    let ready = wait_pod(&pods, &name, "Ready", STARTUP, pod_ready)
        .await
        .expect("pod Ready with both containers");
    let started: Vec<_> = order
        .iter()
        .map(|(c, _)| (*c, started_at(&ready, c).expect("container running")))
        .collect();
    for pair in started.windows(2) {
        assert!(
            pair[0].1 < pair[1].1,
            "{} must start before {} (higher priority first, whatever the spec order): {started:?}",
            pair[0].0,
            pair[1].0
        );
    }
    for (c, _) in order {
        assert_eq!(
            container_status(&ready, c).map(|s| s.restart_count),
            Some(0),
            "{c} started once"
        );
    }

    let cm = cms.get(&barrier).await.expect("barrier");
    let data = cm.data.unwrap_or_default();
    let released: BTreeSet<&String> = data.keys().collect();
    let wanted: Vec<String> = order.iter().map(|(_, p)| key(*p)).collect();
    assert_eq!(
        released,
        wanted.iter().collect::<BTreeSet<_>>(),
        "barrier keys: {data:?}"
    );
    assert!(
        data.values().all(|v| v == "true"),
        "barrier values: {data:?}"
    );

    let done = wait_pod(
        &pods,
        &name,
        "launch priority marked completed",
        Duration::from_secs(30),
        |p| {
            p.annotations()
                .get(keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED_ANNOTATION)
                .map(String::as_str)
                == Some("true")
        },
    )
    .await
    .expect("completed annotation");
    assert_eq!(done.uid(), pod.uid());
    ns.delete().await.expect("delete ns");
}

/// Priorities from `KRUISE_CONTAINER_PRIORITY`: app (10) before sidecar (1), although the
/// sidecar comes first in the spec.
#[tokio::test]
async fn containers_start_in_priority_order() {
    let env = |p: &str| json!([{"name": keys::ENV_CONTAINER_PRIORITY, "value": p}]);
    let cs = cloneset_of("lp", json!({}), json!([sidecar(env("1")), app(env("10"))]));
    starts_in_order("e2e-launch-priority", cs, &[("app", 10), ("sidecar", 1)]).await;
}

/// The Ordered annotation: containers start in spec order.
#[tokio::test]
async fn ordered_annotation_starts_containers_in_spec_order() {
    let annotations = json!({
        keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION: keys::CONTAINER_LAUNCH_PRIORITY_ORDERED
    });
    let cs = cloneset_of(
        "ordered",
        annotations,
        json!([app(json!([])), sidecar(json!([]))]),
    );
    starts_in_order("e2e-launch-ordered", cs, &[("app", 0), ("sidecar", -1)]).await;
}
