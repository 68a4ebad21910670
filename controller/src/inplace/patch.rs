//! Writing an `UpdateSpec` into a pod (upstream's default `PatchSpecToPod`): this batch's images,
//! env-referenced metadata and resources, the metadata patch, and the `InPlaceUpdateState`
//! with later batches staged in `next*`; plus the `pods/resize` patch for resources. Pure: the
//! pod is edited in memory, `now` is given.

use super::batches;
use super::completion;
use super::quantity;
use super::spec::{self, UpdateOptions};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::appspub::{
    InPlaceUpdateContainerBatch, InPlaceUpdateContainerStatus, InPlaceUpdatePreCheckBeforeNext,
    InPlaceUpdateState, UpdateSpec,
};
use kruise_api::keys::{self, k8s};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// Resources to apply through `pods/resize`, by container name.
pub type ExpectedResources = BTreeMap<String, ResourceRequirements>;

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Annotation(#[from] kruise_api::Error),
    #[error("invalid metadata patch in the in-place update spec: {0}")]
    MetadataPatch(#[source] serde_json::Error),
    #[error("pod has {grace} but no {state}", grace = keys::INPLACE_UPDATE_GRACE_ANNOTATION, state = keys::INPLACE_UPDATE_STATE_ANNOTATION)]
    GraceWithoutState,
    #[error("pod has no spec")]
    NoPodSpec,
}

pub(super) fn annotations_mut(pod: &mut Pod) -> &mut BTreeMap<String, String> {
    pod.metadata.annotations.get_or_insert_with(BTreeMap::new)
}

pub(super) fn write_state(pod: &mut Pod, state: &InPlaceUpdateState) -> Result<(), EngineError> {
    let value = state.to_annotation_value()?;
    let annotations = annotations_mut(pod);
    annotations.insert(keys::INPLACE_UPDATE_STATE_ANNOTATION.to_string(), value);
    annotations.remove(keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD);
    Ok(())
}

pub(super) fn remove_grace(pod: &mut Pod) {
    if let Some(a) = pod.metadata.annotations.as_mut() {
        a.remove(keys::INPLACE_UPDATE_GRACE_ANNOTATION);
        a.remove(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD);
    }
}

/// Writes this batch of `spec` into `pod` (upstream's default `PatchSpecToPod`): images and
/// env-referenced metadata of the containers in this batch, the metadata patch, and the state
/// with the rest staged in `next*`. Resources are returned for `pods/resize`, or written into
/// the spec when the resize subresource is not used.
pub fn patch_spec_to_pod(
    pod: &mut Pod,
    spec: &UpdateSpec,
    state: &mut InPlaceUpdateState,
    opts: &UpdateOptions,
    now: Timestamp,
) -> Result<ExpectedResources, EngineError> {
    state.next_container_images.clear();
    state.next_container_ref_metadata.clear();
    state.next_container_resources.clear();

    if let Some(patch) = spec.meta_data_patch.as_ref() {
        spec::apply_metadata_patch(&mut pod.metadata, &patch.0)
            .map_err(EngineError::MetadataPatch)?;
    }

    let changed: BTreeSet<String> = spec
        .container_images
        .keys()
        .chain(spec.container_ref_metadata.keys())
        .chain(spec.container_resources.keys())
        .cloned()
        .collect();
    let batch = batches::plan(pod, &changed, &spec.container_ref_metadata);

    let pod_spec = pod.spec.as_mut().ok_or(EngineError::NoPodSpec)?;
    let mut image_changed = BTreeSet::new();
    let mut expected = ExpectedResources::new();
    for c in pod_spec.containers.iter_mut() {
        if let Some(image) = spec.container_images.get(&c.name) {
            if batch.now.contains(&c.name) {
                c.image = Some(image.clone());
                image_changed.insert(c.name.clone());
            } else {
                state
                    .next_container_images
                    .insert(c.name.clone(), image.clone());
            }
        }
        if let Some(resources) = spec.container_resources.get(&c.name) {
            if batch.now.contains(&c.name) {
                if opts.use_resize_subresource {
                    expected.insert(c.name.clone(), resources.clone());
                } else {
                    set_resizable(c.resources.get_or_insert_with(Default::default), resources);
                }
            } else {
                state
                    .next_container_resources
                    .insert(c.name.clone(), resources.clone());
            }
        }
    }

    // Baseline for completion: the image each restarted container ran before. A container
    // already recorded by an earlier batch keeps its first baseline.
    for status in pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
    {
        if image_changed.contains(&status.name) {
            state
                .last_container_statuses
                .entry(status.name.clone())
                .or_insert_with(|| InPlaceUpdateContainerStatus {
                    image_id: status.image_id.clone(),
                });
        }
    }

    for (name, meta) in &spec.container_ref_metadata {
        if batch.now.contains(name) {
            for (k, v) in meta.labels.iter().flatten() {
                pod.metadata
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(k.clone(), v.clone());
            }
            for (k, v) in meta.annotations.iter().flatten() {
                annotations_mut(pod).insert(k.clone(), v.clone());
            }
        } else {
            state
                .next_container_ref_metadata
                .insert(name.clone(), meta.clone());
        }
    }

    let this_batch: Vec<String> = batch.now.iter().cloned().collect();
    state.pre_check_before_next =
        completion::has_next_batch(state).then(|| InPlaceUpdatePreCheckBeforeNext {
            containers_required_ready: this_batch.clone(),
        });
    state
        .container_batches_record
        .push(InPlaceUpdateContainerBatch {
            timestamp: Time(now),
            containers: this_batch,
        });
    tracing::debug!(
        pod = pod.metadata.name.as_deref().unwrap_or(""),
        batch = ?batch.now,
        later = ?batch.later,
        "in-place update batch decided"
    );
    write_state(pod, state)?;
    Ok(expected)
}

fn resizable(name: &str) -> bool {
    name == k8s::RESOURCE_CPU || name == k8s::RESOURCE_MEMORY
}

fn set_resizable(target: &mut ResourceRequirements, wanted: &ResourceRequirements) {
    for (from, to) in [
        (&wanted.limits, &mut target.limits),
        (&wanted.requests, &mut target.requests),
    ] {
        for (k, q) in from.iter().flatten().filter(|(k, _)| resizable(k)) {
            to.get_or_insert_with(BTreeMap::new)
                .insert(k.clone(), q.clone());
        }
    }
}

/// The strategic merge patch for `pods/resize` carrying the quantities that differ from the
/// pod's spec; `None` when there is nothing to resize (already applied, e.g. on a retry).
pub fn resize_patch(pod: &Pod, expected: &ExpectedResources) -> Option<Value> {
    let containers = pod.spec.as_ref()?.containers.as_slice();
    let mut patches = Vec::new();
    for c in containers {
        let Some(wanted) = expected.get(&c.name) else {
            continue;
        };
        let current = c.resources.clone().unwrap_or_default();
        let mut body = Map::new();
        for (field, from, have) in [
            ("limits", &wanted.limits, &current.limits),
            ("requests", &wanted.requests, &current.requests),
        ] {
            let diff: Map<String, Value> = from
                .iter()
                .flatten()
                .filter(|(k, _)| resizable(k))
                .filter(|(k, q)| {
                    !have
                        .as_ref()
                        .and_then(|h| h.get(*k))
                        .is_some_and(|h: &Quantity| quantity::equal(h, q))
                })
                .map(|(k, q)| (k.clone(), Value::String(q.0.clone())))
                .collect();
            if !diff.is_empty() {
                body.insert(field.to_string(), Value::Object(diff));
            }
        }
        if !body.is_empty() {
            patches.push(json!({"name": c.name, "resources": body}));
        }
    }
    (!patches.is_empty()).then(|| json!({"spec": {"containers": patches}}))
}
