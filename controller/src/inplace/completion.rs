//! Has the kubelet finished an in-place update? Decided from the pod alone: its status, the
//! recorded `InPlaceUpdateState`, and the daemon's `runtime-containers-meta` report.

use super::{hash, quantity};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kruise_api::appspub::{InPlaceUpdateState, RuntimeContainerMetaSet, UpdateSpec};
use std::collections::BTreeMap;
use thiserror::Error;

/// Why an in-place update is not complete yet.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum NotCompleted {
    #[error("still in the grace period of the in-place update")]
    GracePending,
    #[error("containers wait for the next in-place update batch")]
    NextBatchPending,
    #[error("cannot read the in-place update records: {0}")]
    Unreadable(String),
    #[error("waiting for the daemon to report runtime-containers-meta")]
    RuntimeMetaMissing,
    #[error("waiting for containers to restart with the env from new labels/annotations")]
    EnvFromMetadataPending,
    #[error("container {0} still runs the old image")]
    ImageNotChanged(String),
    #[error("no status yet for containers {0:?}")]
    StatusMissing(Vec<String>),
    #[error("some container statuses are not reported")]
    StatusesIncomplete,
    #[error("container {0} resources not resized yet")]
    ResourcesPending(String),
}

/// Which runtime hash to compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HashKind {
    Plain,
    EnvFromMetadata,
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
}

fn statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
}

/// Every spec container runs as the daemon reports it: same containerID in status and meta, and
/// the reported hash equals the one expected from the spec.
fn hashes_consistent(pod: &Pod, meta: &RuntimeContainerMetaSet, kind: HashKind) -> bool {
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    let annotations = pod.metadata.annotations.as_ref().unwrap_or(&empty);
    containers(pod).iter().all(|c| {
        let Some(status) = statuses(pod).iter().find(|s| s.name == c.name) else {
            tracing::debug!(container = %c.name, "no container status yet");
            return false;
        };
        let Some(runtime) = meta.container(&c.name) else {
            tracing::debug!(container = %c.name, "container missing from runtime-containers-meta");
            return false;
        };
        if status.container_id.as_deref().unwrap_or("") != runtime.container_id {
            return false;
        }
        match kind {
            HashKind::Plain => hash::kubelet_container_hash(c) == runtime.hashes.plain_hash,
            HashKind::EnvFromMetadata => {
                hash::env_from_metadata_hash(c, labels, annotations)
                    == runtime.hashes.extracted_env_from_metadata_hash
            }
        }
    })
}

/// Missing and empty lists mean the same; quantities compare by value.
fn same_list(
    a: Option<&BTreeMap<String, Quantity>>,
    b: Option<&BTreeMap<String, Quantity>>,
) -> bool {
    let empty = BTreeMap::new();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    a.len() == b.len()
        && a.iter()
            .all(|(k, q)| b.get(k).is_some_and(|other| quantity::equal(q, other)))
}

fn same_resources(
    spec: Option<&ResourceRequirements>,
    status: Option<&ResourceRequirements>,
) -> bool {
    same_list(
        spec.and_then(|r| r.limits.as_ref()),
        status.and_then(|r| r.limits.as_ref()),
    ) && same_list(
        spec.and_then(|r| r.requests.as_ref()),
        status.and_then(|r| r.requests.as_ref()),
    )
}

/// Every container's status reports the resources its spec asks for.
pub fn resources_applied(pod: &Pod) -> Result<(), NotCompleted> {
    let statuses = statuses(pod);
    if statuses.len() != containers(pod).len() {
        return Err(NotCompleted::StatusesIncomplete);
    }
    for status in statuses {
        let spec = containers(pod).iter().find(|c| c.name == status.name);
        let done = match (spec, status.resources.as_ref()) {
            (Some(c), Some(actual)) => same_resources(c.resources.as_ref(), Some(actual)),
            _ => false,
        };
        if !done {
            return Err(NotCompleted::ResourcesPending(status.name.clone()));
        }
    }
    Ok(())
}

/// Upstream appends `:latest` to an image without any tag before comparing with the status.
fn with_default_tag(image: &str) -> String {
    if image.contains(':') {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

/// The default completion check of the containers of this batch (upstream's
/// `CheckContainersUpdateCompleted`).
pub fn containers_update_completed(
    pod: &Pod,
    state: &InPlaceUpdateState,
) -> Result<(), NotCompleted> {
    let meta = RuntimeContainerMetaSet::from_annotations(pod.metadata.annotations.as_ref())
        .map_err(|e| NotCompleted::Unreadable(e.to_string()))?;

    if state.update_env_from_metadata {
        let meta = meta.as_ref().ok_or(NotCompleted::RuntimeMetaMissing)?;
        if !hashes_consistent(pod, meta, HashKind::EnvFromMetadata) {
            return Err(NotCompleted::EnvFromMetadataPending);
        }
    }
    if state.update_resources {
        resources_applied(pod)?;
    }
    // The daemon's report is authoritative when it agrees with the spec; when it does not (an
    // old daemon, or none at all) fall back to comparing image IDs.
    if let Some(meta) = meta.as_ref()
        && hashes_consistent(pod, meta, HashKind::Plain)
    {
        return Ok(());
    }

    let images: BTreeMap<&str, String> = containers(pod)
        .iter()
        .map(|c| {
            (
                c.name.as_str(),
                with_default_tag(c.image.as_deref().unwrap_or("")),
            )
        })
        .collect();
    let mut waiting: BTreeMap<&String, _> = state.last_container_statuses.iter().collect();
    for status in statuses(pod) {
        let Some(old) = waiting.remove(&status.name) else {
            continue;
        };
        // An unchanged imageID only means "not restarted" if the image should differ; a new
        // tag of the very same image keeps its ID.
        if old.image_id == status.image_id
            && images.get(status.name.as_str()).map(String::as_str) != Some(status.image.as_str())
        {
            return Err(NotCompleted::ImageNotChanged(status.name.clone()));
        }
    }
    if !waiting.is_empty() {
        return Err(NotCompleted::StatusMissing(
            waiting.keys().map(|k| (*k).clone()).collect(),
        ));
    }
    Ok(())
}

/// Whether the whole in-place update of the pod is over: no grace period pending, no batch
/// left, and the containers of the last batch done (upstream's `CheckPodUpdateCompleted`).
/// A pod without an update state has nothing in progress.
pub fn pod_update_completed(
    pod: &Pod,
    check_containers: impl Fn(&Pod, &InPlaceUpdateState) -> Result<(), NotCompleted>,
) -> Result<(), NotCompleted> {
    let annotations = pod.metadata.annotations.as_ref();
    if UpdateSpec::from_grace_annotation(annotations)
        .map_err(|e| NotCompleted::Unreadable(e.to_string()))?
        .is_some()
    {
        return Err(NotCompleted::GracePending);
    }
    let Some(state) = InPlaceUpdateState::from_annotations(annotations)
        .map_err(|e| NotCompleted::Unreadable(e.to_string()))?
    else {
        return Ok(());
    };
    if has_next_batch(&state) {
        return Err(NotCompleted::NextBatchPending);
    }
    check_containers(pod, &state)
}

/// Containers are still waiting for a later launch-priority batch.
pub fn has_next_batch(state: &InPlaceUpdateState) -> bool {
    !state.next_container_images.is_empty()
        || !state.next_container_ref_metadata.is_empty()
        || !state.next_container_resources.is_empty()
}
