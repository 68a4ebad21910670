//! CloneSets as the wire sees them: built from JSON and read through `DynamicObject`, so the suite
//! checks the upstream field names rather than our own Rust types.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::{Result, wait_for};

pub fn resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, version, "CloneSet"),
        "clonesets",
    )
}

pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(keys::VERSION_V1BETA1))
}

/// A v1beta1 CloneSet of `replicas` testapp Pods labelled `app=<name>`; `update_strategy` is
/// merged into `spec.updateStrategy`.
pub fn new(name: &str, replicas: i32, tag: &str, update_strategy: Value) -> Result<DynamicObject> {
    let obj = json!({
        "apiVersion": keys::APPS_V1BETA1,
        "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "app",
                        "image": crate::image("testapp", tag),
                        "ports": [{"containerPort": 8080}],
                        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1}
                    }]
                }
            },
            "updateStrategy": update_strategy
        }
    });
    Ok(serde_json::from_value(obj)?)
}

/// Merge-patches the CloneSet's spec.
pub async fn patch_spec(api: &Api<DynamicObject>, name: &str, spec: Value) -> Result<()> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "spec": spec })),
    )
    .await?;
    Ok(())
}

/// Applies a JSON patch (RFC 6902) to the CloneSet; unlike read-modify-replace it cannot conflict
/// with the controller's status writes.
pub async fn json_patch(api: &Api<DynamicObject>, name: &str, ops: Value) -> Result<()> {
    let patch: json_patch::Patch = serde_json::from_value(ops)?;
    api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await?;
    Ok(())
}

/// Sets the image of container `app` (the first) in the template.
pub async fn set_image(api: &Api<DynamicObject>, name: &str, tag: &str) -> Result<()> {
    json_patch(
        api,
        name,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": crate::image("testapp", tag)}]),
    )
    .await
}

pub fn status_i64(cs: &DynamicObject, field: &str) -> i64 {
    cs.data["status"][field].as_i64().unwrap_or(0)
}

pub fn status_str<'a>(cs: &'a DynamicObject, field: &str) -> &'a str {
    cs.data["status"][field].as_str().unwrap_or("")
}

/// The status condition of `type_`, if the CloneSet has one.
pub fn condition<'a>(cs: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    cs.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Whether the condition `type_` is there with status True.
pub fn condition_true(cs: &DynamicObject, type_: &str) -> bool {
    condition(cs, type_).is_some_and(|c| c["status"] == keys::k8s::CONDITION_TRUE)
}

/// Waits until status is observed for the current generation and `check` holds.
pub async fn wait_status(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&DynamicObject) -> bool,
) -> Result<DynamicObject> {
    wait_for(what, timeout, || async {
        let cs = api.get(name).await?;
        let observed = cs.data["status"]["observedGeneration"].as_i64();
        Ok((observed == cs.metadata.generation && check(&cs)).then_some(cs))
    })
    .await
}

/// Waits until all `replicas` Pods exist, are Ready and on the update revision.
pub async fn wait_rolled_out(
    api: &Api<DynamicObject>,
    name: &str,
    replicas: i64,
    timeout: Duration,
) -> Result<DynamicObject> {
    wait_status(
        api,
        name,
        &format!("CloneSet {name}: {replicas} replicas updated and ready"),
        timeout,
        |cs| {
            status_i64(cs, "replicas") == replicas
                && status_i64(cs, "readyReplicas") == replicas
                && status_i64(cs, "updatedReplicas") == replicas
                && status_i64(cs, "updatedReadyReplicas") == replicas
                && status_str(cs, "currentRevision") == status_str(cs, "updateRevision")
        },
    )
    .await
}

/// The CloneSet's Pods (by its `app` label), sorted by name.
pub async fn pods(pods: &Api<Pod>, name: &str) -> Result<Vec<Pod>> {
    let mut list = pods
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?
        .items;
    list.retain(|p| p.metadata.deletion_timestamp.is_none());
    list.sort_by_key(|p| p.name_any());
    Ok(list)
}

/// The revision a Pod is on (its controller-revision-hash label).
pub fn pod_revision(pod: &Pod) -> &str {
    pod.labels()
        .get(keys::CONTROLLER_REVISION_HASH_LABEL)
        .map(String::as_str)
        .unwrap_or("")
}
