//! The floor: a minimal client sending the two patches per Pod the in-place engine sends, to
//! bare Pods, through the manager's rate limiter.

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::bench::rfc3339_now;
use kruise_e2e::{Error, Result, wait_for};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::pods::{SETUP_CONCURRENCY, create_ns, delete_pods, pod_spec};
use crate::watch::ImageWatch;
use crate::{IMAGE_V1, IMAGE_V2, other, timeout_for};

/// The two writes the in-place engine makes per Pod, with the same guards: the status patch
/// that sets InPlaceUpdateReady False, then the JSON patch, guarded by the resourceVersion the
/// status patch returned, of the revision label, the in-place state annotation and the image.
/// A conflict re-reads the Pod and tries again, as the engine does.
pub(crate) async fn floor_patch(pods: &Api<Pod>, pod: &Pod) -> Result<()> {
    let name = pod.name_any();
    let mut current = pod.clone();
    for _ in 0..5 {
        let now = rfc3339_now();
        let rv = current.resource_version().unwrap_or_default();
        let status: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/status/conditions/-", "value": {
                "type": keys::INPLACE_UPDATE_READY, "status": "False",
                "reason": keys::REASON_START_INPLACE_UPDATE, "lastTransitionTime": now}}
        ]))?;
        let after = match pods
            .patch_status(&name, &PatchParams::default(), &Patch::Json::<()>(status))
            .await
        {
            Ok(p) => p,
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                current = pods.get(&name).await?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let state = json!({
            "revision": "floor-v2",
            "updateTimestamp": now,
            "lastContainerStatuses": {"app": {"imageID": format!("kwok://{IMAGE_V1}")}},
            "updateImages": true,
            "containerBatchesRecord": [{"timestamp": now, "containers": ["app"]}]
        })
        .to_string();
        let spec: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/metadata/resourceVersion", "value": after.resource_version().unwrap_or_default()},
            {"op": "add", "path": pointer("/metadata/labels", keys::CONTROLLER_REVISION_HASH_LABEL), "value": "floor-v2"},
            {"op": "add", "path": pointer("/metadata/annotations", keys::INPLACE_UPDATE_STATE_ANNOTATION), "value": state},
            {"op": "replace", "path": "/spec/containers/0/image", "value": IMAGE_V2}
        ]))?;
        match pods
            .patch(&name, &PatchParams::default(), &Patch::Json::<()>(spec))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                current = pods.get(&name).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(other(format!(
        "pod {name}: still conflicting after 5 attempts"
    )))
}

/// `key` under the JSON pointer `parent`, escaped as RFC 6901 wants (`~` and `/`).
pub(crate) fn pointer(parent: &str, key: &str) -> String {
    format!("{parent}/{}", key.replace('~', "~0").replace('/', "~1"))
}

pub(crate) async fn floor_run(
    client: &Client,
    limited: &Client,
    n: usize,
    run: usize,
    concurrency: usize,
) -> Result<Duration> {
    let ns = format!("scale-floor-{n}-{run}");
    let pods = create_ns(client, &ns).await?;
    let selector = "app=floor";
    stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {
                        "name": format!("floor-{i}"),
                        "labels": {"app": "floor"},
                        "annotations": {"kruise-rs.bench/floor": "true"}
                    },
                    "spec": pod_spec(IMAGE_V1)
                }))?;
                pods.create(&PostParams::default(), &pod).await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    let running = wait_for(
        &format!("{n} floor pods running"),
        timeout_for(n),
        || async {
            let list = pods.list(&ListParams::default().labels(selector)).await?;
            let running = list
                .items
                .iter()
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .is_some_and(|ph| ph == "Running")
                })
                .count();
            Ok((running == n).then_some(list.items))
        },
    )
    .await?;
    let watch = ImageWatch::start(pods.clone(), selector, IMAGE_V2, n).await?;
    let limited_pods: Api<Pod> = Api::namespaced(limited.clone(), &ns);

    let start = Instant::now();
    stream::iter(running.iter())
        .map(|p| floor_patch(&limited_pods, p))
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let patched = watch.wait_done(timeout_for(n)).await? - start;
    drop(watch);
    delete_pods(&pods, selector, n).await?;
    Ok(patched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_pointers_escape_keys() {
        let cases = [
            (
                "/metadata/labels",
                "controller-revision-hash",
                "/metadata/labels/controller-revision-hash",
            ),
            (
                "/metadata/annotations",
                "apps.kruise.io/inplace-update-state",
                "/metadata/annotations/apps.kruise.io~1inplace-update-state",
            ),
            ("/a", "x~y/z", "/a/x~0y~1z"),
        ];
        for (parent, key, want) in cases {
            assert_eq!(pointer(parent, key), want);
        }
    }
}
