//! EphemeralJobs as the wire sees them: built from JSON and read through `DynamicObject`, so
//! the suite checks upstream's field names; and the plain Pods they inject into.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::{Result, image, wait_for, wait_pod};

pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, keys::VERSION_V1ALPHA1, "EphemeralJob"),
        "ephemeraljobs",
    )
}

pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource())
}

/// An EphemeralJob selecting `app=<app>` whose one container `dbg` runs `script` in our
/// busybox-based image; `spec` is merged over the job's spec. The container's pull and message
/// policies are left for the webhook to default.
pub fn new(name: &str, app: &str, script: &str, spec: Value) -> Result<DynamicObject> {
    let mut s = json!({
        "selector": {"matchLabels": {"app": app}},
        "template": {"ephemeralContainers": [{"name": "dbg", "image": image("sidecar", "v1"),
            "command": ["/bin/sh", "-c", script]}]},
    });
    if let (Some(base), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1ALPHA1,
        "kind": "EphemeralJob",
        "metadata": {"name": name},
        "spec": s,
    }))?)
}

/// Creates a plain Pod labelled `app=<app>` with one idling container `container` and waits
/// until it runs.
pub async fn running_pod(pods: &Api<Pod>, name: &str, app: &str, container: &str) -> Result<Pod> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": container, "image": image("sidecar", "v1")}]},
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    wait_pod(pods, name, "running", Duration::from_secs(60), |p| {
        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
    })
    .await
}

pub fn status_i64(job: &DynamicObject, field: &str) -> i64 {
    job.data["status"][field].as_i64().unwrap_or(-1)
}

pub fn phase(job: &DynamicObject) -> &str {
    job.data["status"]["phase"].as_str().unwrap_or("")
}

/// Waits until the job's `status.phase` is `want`; returns the job then.
pub async fn wait_phase(
    api: &Api<DynamicObject>,
    name: &str,
    want: &str,
    timeout: Duration,
) -> Result<DynamicObject> {
    wait_for(
        &format!("EphemeralJob {name} phase {want}"),
        timeout,
        || async {
            let job = api.get(name).await?;
            Ok((phase(&job) == want).then_some(job))
        },
    )
    .await
}

/// The Events with `reason` about EphemeralJob `name` in `ns`: (note, related object's name).
pub async fn events(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> Result<Vec<(String, String)>> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("EphemeralJob")
                && e.reason.as_deref() == Some(reason)
        })
        .map(|e| {
            let related = e.related.and_then(|r| r.name).unwrap_or_default();
            (e.message.unwrap_or_default(), related)
        })
        .collect())
}
