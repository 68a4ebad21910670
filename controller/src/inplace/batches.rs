//! Launch-priority batches: a pod whose containers have launch priorities is updated in waves,
//! highest priority first, each wave waiting for the previous one to be ready.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::keys;
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// The launch priority of each container of the pod, in spec order (`None`: no priority).
///
/// The webhook turns priorities into a `KRUISE_CONTAINER_BARRIER` env whose configMapKeyRef key
/// is `p_<priority>`; that is what a running pod carries, so it wins. A pod the webhook did not
/// mutate still gets the priorities the webhook would have given it, from the Ordered annotation
/// or the `KRUISE_CONTAINER_PRIORITY` env.
pub fn container_priorities(pod: &Pod) -> Vec<(String, Option<i32>)> {
    let containers: &[Container] = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let from_barrier: Vec<Option<i32>> = containers.iter().map(barrier_priority).collect();
    let priorities = if from_barrier.iter().any(Option::is_some) {
        from_barrier
    } else {
        declared_priorities(pod, containers)
    };
    containers
        .iter()
        .zip(priorities)
        .map(|(c, p)| (c.name.clone(), p))
        .collect()
}

fn barrier_priority(c: &Container) -> Option<i32> {
    let env = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == keys::ENV_CONTAINER_BARRIER)?;
    let key = &env.value_from.as_ref()?.config_map_key_ref.as_ref()?.key;
    // A malformed key still marks the container as prioritised; the webhook never writes one.
    Some(key.get(2..).and_then(|p| p.parse().ok()).unwrap_or(0))
}

fn declared_priorities(pod: &Pod, containers: &[Container]) -> Vec<Option<i32>> {
    if containers.len() <= 1 {
        return vec![None; containers.len()];
    }
    let ordered = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION))
        .is_some_and(|v| v == keys::CONTAINER_LAUNCH_PRIORITY_ORDERED);
    if ordered {
        return (0..containers.len())
            .map(|i| Some(-(i32::try_from(i).unwrap_or(i32::MAX))))
            .collect();
    }
    let declared: Vec<i32> = containers
        .iter()
        .map(|c| {
            c.env
                .iter()
                .flatten()
                .find(|e| e.name == keys::ENV_CONTAINER_PRIORITY)
                .and_then(|e| e.value.as_deref())
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        })
        .collect();
    // Equal priorities everywhere mean no ordering at all.
    if declared.iter().all(|p| *p == declared[0]) {
        return vec![None; containers.len()];
    }
    declared.into_iter().map(Some).collect()
}

/// How the changed containers split into this batch and later ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Updated now: containers without priority plus those of the highest priority, plus any
    /// container sharing a changed label/annotation with them (they cannot be split).
    pub now: BTreeSet<String>,
    /// Left for the next batches.
    pub later: BTreeSet<String>,
}

/// Splits the containers that `changed` names (images, resources or env-from-metadata) into
/// this batch and the next ones.
pub fn plan(
    pod: &Pod,
    changed: &BTreeSet<String>,
    ref_metadata: &BTreeMap<String, ObjectMeta>,
) -> Batch {
    let mut now = BTreeSet::new();
    let mut highest: Option<i32> = None;
    let mut at_highest = Vec::new();
    for (name, priority) in container_priorities(pod) {
        if !changed.contains(&name) {
            continue;
        }
        match priority {
            None => {
                now.insert(name);
            }
            Some(p) if highest.is_none_or(|h| p > h) => {
                highest = Some(p);
                at_highest = vec![name];
            }
            Some(p) if Some(p) == highest => at_highest.push(name),
            Some(_) => {}
        }
    }
    now.extend(at_highest);
    add_metadata_sharing(&mut now, ref_metadata);
    // Changed names that are not containers of the pod cannot be ordered; keep them out.
    let known: BTreeSet<String> = container_priorities(pod).into_iter().map(|c| c.0).collect();
    let later = changed
        .iter()
        .filter(|n| known.contains(*n) && !now.contains(*n))
        .cloned()
        .collect();
    Batch { now, later }
}

/// A label or annotation is a single value in the pod, so every container reading one that this
/// batch changes must restart with this batch too, transitively.
fn add_metadata_sharing(now: &mut BTreeSet<String>, ref_metadata: &BTreeMap<String, ObjectMeta>) {
    loop {
        let mut labels = BTreeSet::new();
        let mut annotations = BTreeSet::new();
        for name in now.iter() {
            if let Some(meta) = ref_metadata.get(name) {
                labels.extend(meta.labels.iter().flatten().map(|(k, _)| k.as_str()));
                annotations.extend(meta.annotations.iter().flatten().map(|(k, _)| k.as_str()));
            }
        }
        let joining: Vec<String> = ref_metadata
            .iter()
            .filter(|(name, _)| !now.contains(*name))
            .filter(|(_, meta)| {
                meta.labels
                    .iter()
                    .flatten()
                    .any(|(k, _)| labels.contains(k.as_str()))
                    || meta
                        .annotations
                        .iter()
                        .flatten()
                        .any(|(k, _)| annotations.contains(k.as_str()))
            })
            .map(|(name, _)| name.clone())
            .collect();
        if joining.is_empty() {
            return;
        }
        for name in joining {
            tracing::info!(container = %name, "container joins this in-place batch: it shares changed metadata");
            now.insert(name);
        }
    }
}

/// Why the next batch may not start yet.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PreCheckPending {
    #[error("container {0} not found in pod status")]
    NotFound(String),
    #[error("waiting for container {0} to be ready")]
    NotReady(String),
}

/// The next batch starts only when every container of the previous one is ready.
pub fn pre_check_before_next(
    pod: &Pod,
    containers_required_ready: &[String],
) -> Result<(), PreCheckPending> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    for name in containers_required_ready {
        match statuses.iter().find(|s| &s.name == name) {
            None => return Err(PreCheckPending::NotFound(name.clone())),
            Some(s) if !s.ready => return Err(PreCheckPending::NotReady(name.clone())),
            Some(_) => {}
        }
    }
    Ok(())
}
