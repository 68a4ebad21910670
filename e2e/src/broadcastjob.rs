//! BroadcastJobs as the wire sees them: built from JSON and read through `DynamicObject`, so
//! the suite checks upstream's field names.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::{Result, image, wait_for};

pub fn resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, version, "BroadcastJob"),
        "broadcastjobs",
    )
}

pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(keys::VERSION_V1BETA1))
}

/// A v1beta1 BroadcastJob whose Pod runs `script` in our busybox image with `restart_policy`;
/// `spec` is merged over the job's spec.
pub fn new(name: &str, script: &str, restart_policy: &str, spec: Value) -> Result<DynamicObject> {
    let mut s = json!({
        "template": {"spec": {
            "restartPolicy": restart_policy,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "job", "image": image("sidecar", "v1"),
                "command": ["/bin/sh", "-c", script]}]
        }}
    });
    if let (Some(base), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1BETA1,
        "kind": "BroadcastJob",
        "metadata": {"name": name},
        "spec": s,
    }))?)
}

pub fn status_i64(job: &DynamicObject, field: &str) -> i64 {
    job.data["status"][field].as_i64().unwrap_or(0)
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
        &format!("BroadcastJob {name} phase {want}"),
        timeout,
        || async {
            let job = api.get(name).await?;
            Ok((phase(&job) == want).then_some(job))
        },
    )
    .await
}

/// The job's Pods (by upstream's `broadcastjob-name` label), by name.
pub async fn pods(pods: &Api<Pod>, job: &str) -> Result<Vec<Pod>> {
    let lp = ListParams::default().labels(&format!("{}={job}", keys::BROADCASTJOB_NAME_LABEL));
    let mut list = pods.list(&lp).await?.items;
    list.sort_by_key(|p| p.name_any());
    Ok(list)
}

/// The notes of the Events with `reason` about BroadcastJob `name` in `ns`.
pub async fn event_notes(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> Result<Vec<String>> {
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some("BroadcastJob")
                && e.reason.as_deref() == Some(reason)
        })
        .filter_map(|e| e.message)
        .collect())
}

/// Waits for an Event with `reason` about the job; returns its notes.
pub async fn wait_event(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
    timeout: Duration,
) -> Result<Vec<String>> {
    wait_for(
        &format!("Event {reason} on BroadcastJob {name}"),
        timeout,
        || async {
            let notes = event_notes(client, ns, name, reason).await?;
            Ok((!notes.is_empty()).then_some(notes))
        },
    )
    .await
}

/// The nodes a Pod without tolerations may run on: Ready, not cordoned, without NoSchedule or
/// NoExecute taints.
pub async fn eligible_nodes(client: &Client) -> Result<Vec<String>> {
    let nodes: Api<Node> = Api::all(client.clone());
    Ok(nodes
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|n| {
            let spec = n.spec.clone().unwrap_or_default();
            !spec.unschedulable.unwrap_or(false)
                && !spec
                    .taints
                    .unwrap_or_default()
                    .iter()
                    .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        })
        .map(|n| n.name_any())
        .collect())
}
