//! Launch-priority batches: a pod whose containers have launch priorities is updated in waves,
//! highest priority first, each wave waiting for the previous one to be ready.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::appspub::launch_priority;
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// The launch priority of each container of the pod, in spec order (`None`: no priority).
///
/// The webhook turns priorities into a `KRUISE_CONTAINER_BARRIER` env whose configMapKeyRef key
/// is `p_<priority>`; that is what a running pod carries, so it wins (upstream reads only this).
/// A pod the webhook did not mutate still gets the priorities the webhook would have given it,
/// from the Ordered annotation or the `KRUISE_CONTAINER_PRIORITY` env; one the webhook would
/// have refused (a priority that is not an integer) is not ordered, as upstream would see it.
pub fn container_priorities(pod: &Pod) -> Vec<(String, Option<i64>)> {
    let containers: &[Container] = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let from_barrier: Vec<Option<i64>> = containers
        .iter()
        .map(launch_priority::barrier_priority)
        .collect();
    let priorities = if from_barrier.iter().any(Option::is_some) {
        from_barrier
    } else {
        match launch_priority::declared_priorities(pod) {
            Ok(Some(declared)) => declared.into_iter().map(Some).collect(),
            Ok(None) | Err(_) => vec![None; containers.len()],
        }
    };
    containers
        .iter()
        .zip(priorities)
        .map(|(c, p)| (c.name.clone(), p))
        .collect()
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
    let mut highest: Option<i64> = None;
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
