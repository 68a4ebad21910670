//! AdvancedCronJobs as the wire sees them: built from JSON and read through `DynamicObject`,
//! with their runs (Jobs, BroadcastJobs, ImageListPullJobs) listed by owner.

use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

use crate::{Result, image};

pub fn resource(version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(keys::APPS_GROUP, version, keys::ADVANCEDCRONJOB_KIND),
        "advancedcronjobs",
    )
}

pub fn api(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(keys::VERSION_V1BETA1))
}

/// The Pod of a run: `script` in our busybox image, never restarted.
pub fn pod(script: &str) -> Value {
    json!({"spec": {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "job", "image": image("sidecar", "v1"),
            "command": ["/bin/sh", "-c", script]}]
    }})
}

/// A v1beta1 AdvancedCronJob on `schedule` whose runs are Jobs running `script`; `spec` is
/// merged over its spec.
pub fn with_job(name: &str, schedule: &str, script: &str, spec: Value) -> Result<DynamicObject> {
    new(
        name,
        schedule,
        json!({"jobTemplate": {"metadata": {"labels": {"run-of": name}},
            "spec": {"backoffLimit": 0, "template": pod(script)}}}),
        spec,
    )
}

/// A v1beta1 AdvancedCronJob with `template`; `spec` is merged over its spec.
pub fn new(name: &str, schedule: &str, template: Value, spec: Value) -> Result<DynamicObject> {
    let mut s = json!({"schedule": schedule, "template": template});
    if let (Some(base), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1BETA1,
        "kind": keys::ADVANCEDCRONJOB_KIND,
        "metadata": {"name": name},
        "spec": s,
    }))?)
}

/// The API of a kind of run.
pub fn runs_api(client: &Client, ns: &str, kind: &str) -> Api<DynamicObject> {
    let (group, version, plural) = match kind {
        "Job" => ("batch", "v1", "jobs"),
        "BroadcastJob" => (keys::APPS_GROUP, keys::VERSION_V1BETA1, "broadcastjobs"),
        _ => (keys::APPS_GROUP, keys::VERSION_V1BETA1, "imagelistpulljobs"),
    };
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// The runs of `kind` whose controller is the AdvancedCronJob `uid`, not being deleted, sorted
/// by name (so by schedule point).
pub async fn runs(client: &Client, ns: &str, kind: &str, uid: &str) -> Result<Vec<DynamicObject>> {
    let mut list: Vec<DynamicObject> = runs_api(client, ns, kind)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .filter(|o| {
            o.owner_references()
                .iter()
                .any(|r| r.controller == Some(true) && r.uid == uid)
        })
        .collect();
    list.sort_by_key(ResourceExt::name_any);
    Ok(list)
}

/// The schedule point a run carries (the unix seconds of its scheduled-at annotation).
pub fn scheduled_at(run: &DynamicObject) -> Option<i64> {
    let s = run
        .annotations()
        .get(keys::ADVANCEDCRONJOB_SCHEDULED_AT_ANNOTATION)?;
    s.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}
