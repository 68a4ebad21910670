//! PodProbeMarkers as the wire sees them (JSON through `DynamicObject`), the NodePodProbe of a
//! node, and the testapp Pods the probes run against.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::{Result, image, wait_pod};

pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1alpha1", "PodProbeMarker");
    Api::namespaced_with(client.clone(), ns, &ApiResource::from_gvk(&gvk))
}

/// The NodePodProbe of `node`, as JSON (None while it does not exist).
pub async fn node_pod_probe(client: &Client, node: &str) -> Result<Option<Value>> {
    let gvk = GroupVersionKind::gvk("apps.kruise.io", "v1alpha1", "NodePodProbe");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    Ok(api.get_opt(node).await?.map(|o| o.data))
}

/// The probe names the NodePodProbe lists for the Pod with `uid`.
pub fn listed_probes(npp: &Value, uid: &str) -> Vec<String> {
    npp["spec"]["podProbes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["uid"] == uid)
        .flat_map(|p| p["probes"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect()
}

/// A PodProbeMarker `name` selecting `app=<app>` with `probes`.
pub fn marker(name: &str, app: &str, probes: Value) -> Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "PodProbeMarker",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": app}}, "probes": probes},
    }))?)
}

/// A running testapp Pod (HTTP on :8080) labelled `app=<app>`, with `/tmp/ok` present.
pub async fn testapp_pod(pods: &Api<Pod>, name: &str, app: &str) -> Result<Pod> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": image("testapp", "v1"),
                "command": ["sh", "-c", "touch /tmp/ok; exec /usr/local/bin/testapp"]}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    wait_pod(pods, name, "running", Duration::from_secs(60), |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await
}
