//! Advanced DaemonSets as the wire sees them: built from JSON and read through
//! `DynamicObject`, so the suite checks upstream's field names.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::{Result, wait_for};

pub fn resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, version, "DaemonSet"),
        "daemonsets",
    )
}

pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(keys::VERSION_V1BETA1))
}

/// A v1beta1 Advanced DaemonSet of `image` labelled `app=<name>`; `update_strategy` becomes
/// `spec.updateStrategy`, `pod_spec` is merged into the template's spec.
pub fn new(
    name: &str,
    image: &str,
    update_strategy: Value,
    pod_spec: Value,
) -> Result<DynamicObject> {
    let mut spec = json!({
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "app", "image": image}]
    });
    if let (Some(base), Some(extra)) = (spec.as_object_mut(), pod_spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    let obj = json!({
        "apiVersion": keys::APPS_V1BETA1,
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
            "updateStrategy": update_strategy
        }
    });
    Ok(serde_json::from_value(obj)?)
}

/// Merge-patches the DaemonSet's spec.
pub async fn patch_spec(api: &Api<DynamicObject>, name: &str, spec: Value) -> Result<()> {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({ "spec": spec })),
    )
    .await?;
    Ok(())
}

/// Replaces the image of container 0.
pub async fn set_image(api: &Api<DynamicObject>, name: &str, image: &str) -> Result<()> {
    crate::cloneset::json_patch(
        api,
        name,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": image}]),
    )
    .await
}

pub fn status_i64(ds: &DynamicObject, field: &str) -> i64 {
    ds.data["status"][field].as_i64().unwrap_or(0)
}

pub fn status_str<'a>(ds: &'a DynamicObject, field: &str) -> &'a str {
    ds.data["status"][field].as_str().unwrap_or("")
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
        let ds = api.get(name).await?;
        let observed = ds.data["status"]["observedGeneration"].as_i64();
        Ok((observed == ds.metadata.generation && check(&ds)).then_some(ds))
    })
    .await
}

/// Waits until every desired node runs an updated, available Pod (`desired` when given).
pub async fn wait_rolled_out(
    api: &Api<DynamicObject>,
    name: &str,
    desired: Option<i64>,
    timeout: Duration,
) -> Result<DynamicObject> {
    wait_status(
        api,
        name,
        &format!("DaemonSet {name} rolled out"),
        timeout,
        |ds| {
            let d = status_i64(ds, "desiredNumberScheduled");
            desired.is_none_or(|want| want == d)
                && d > 0
                && status_i64(ds, "currentNumberScheduled") == d
                && status_i64(ds, "updatedNumberScheduled") == d
                && status_i64(ds, "numberAvailable") == d
                && status_i64(ds, "numberMisscheduled") == 0
        },
    )
    .await
}

/// The DaemonSet's live Pods (by its `app` label), sorted by name.
pub async fn pods(pods: &Api<Pod>, name: &str) -> Result<Vec<Pod>> {
    let mut list = pods
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await?
        .items;
    list.retain(|p| p.metadata.deletion_timestamp.is_none());
    list.sort_by_key(|p| p.name_any());
    Ok(list)
}

/// The node a Pod runs on (or is bound to by its node affinity before scheduling).
pub fn pod_node(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    if let Some(n) = spec.and_then(|s| s.node_name.clone()) {
        return n;
    }
    let v = serde_json::to_value(spec).unwrap_or_default();
    v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
        ["matchFields"][0]["values"][0]
        .as_str()
        .unwrap_or("")
        .to_owned()
}
