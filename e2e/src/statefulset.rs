//! Advanced StatefulSets as the wire sees them: built from JSON, read through `DynamicObject`,
//! with the headless Service that gives their pods DNS names.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::{Result, wait_for};

pub fn resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, version, "StatefulSet"),
        "statefulsets",
    )
}

pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(keys::VERSION_V1BETA1))
}

/// A v1beta1 StatefulSet `name` of testapp pods labelled `app=<name>`, served by the headless
/// Service `name`; `spec` is merged over the defaults. With `volume`, a 16Mi claim `data` is
/// mounted at `/data`, and each container start appends the pod's hostname to `/data/hostname`.
pub fn new(
    name: &str,
    replicas: i32,
    tag: &str,
    volume: bool,
    spec: Value,
) -> Result<DynamicObject> {
    let mut container = json!({
        "name": "app",
        "image": crate::image("testapp", tag),
        "ports": [{"containerPort": 8080}],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}
    });
    let mut obj = json!({
        "apiVersion": keys::APPS_V1BETA1,
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"terminationGracePeriodSeconds": 5, "containers": []}
            }
        }
    });
    if volume {
        container["command"] = json!([
            "sh",
            "-c",
            "hostname >> /data/hostname; exec /usr/local/bin/testapp"
        ]);
        container["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
        obj["spec"]["volumeClaimTemplates"] = json!([{
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}}
        }]);
    }
    obj["spec"]["template"]["spec"]["containers"] = json!([container]);
    if let (Some(base), Some(extra)) = (obj["spec"].as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    Ok(serde_json::from_value(obj)?)
}

/// The headless Service `name` selecting `app=<name>`.
pub async fn create_headless_service(client: &Client, ns: &str, name: &str) -> Result<()> {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"clusterIP": "None", "selector": {"app": name},
                 "ports": [{"name": "http", "port": 8080}]}
    }))?;
    Api::<Service>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &svc)
        .await?;
    Ok(())
}

/// The set's live pods (not terminating), sorted by ordinal.
pub async fn pods(api: &Api<Pod>, name: &str) -> Result<Vec<Pod>> {
    let mut list = api
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?
        .items;
    list.retain(|p| p.metadata.deletion_timestamp.is_none());
    list.sort_by_key(|p| ordinal(name, &p.name_any()));
    Ok(list)
}

/// The ordinal in `{name}-{ordinal}`, or -1.
pub fn ordinal(name: &str, pod: &str) -> i64 {
    pod.strip_prefix(name)
        .and_then(|r| r.strip_prefix('-'))
        .and_then(|r| r.parse().ok())
        .unwrap_or(-1)
}

/// Waits until the set's status is observed for its generation and `check` holds.
pub async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Value) -> bool,
) -> Result<DynamicObject> {
    wait_for(what, timeout, || async {
        let s = api.get(name).await?;
        let observed = s.data["status"]["observedGeneration"].as_i64();
        Ok((observed == s.metadata.generation && check(&s.data["status"])).then_some(s))
    })
    .await
}

/// Waits until `replicas` pods are ready and all at the update revision.
pub async fn wait_rolled_out(
    api: &Api<DynamicObject>,
    name: &str,
    replicas: i64,
    timeout: Duration,
) -> Result<DynamicObject> {
    wait_status(
        api,
        name,
        &format!("StatefulSet {name}: {replicas} updated and ready"),
        timeout,
        |st| {
            st["replicas"] == replicas
                && st["readyReplicas"] == replicas
                && st["updatedReplicas"] == replicas
                && st["currentRevision"] == st["updateRevision"]
        },
    )
    .await
}
