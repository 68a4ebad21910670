//! The pure part of a reconcile: which Pods need their state (re)taken, what a Pod's state is,
//! and the next status. No API calls.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{
    PersistentPodState, PersistentPodStateSpec, PersistentPodStateStatus, PodState, in_replicas,
    ordinal_of,
};
use kruise_api::pod::is_ready;

/// The targeted StatefulSet, as far as the states need it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Workload {
    pub uid: String,
    pub replicas: i32,
    /// `spec.ordinals.start`.
    pub start: i32,
    /// `spec.reserveOrdinals`, expanded (Advanced StatefulSet only).
    pub reserved: Vec<i32>,
}

fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// The Ready Pods on a node whose recorded state is missing or stale — another node, or keys
/// other than the spec's (upstream's test before `getPodState`) — with their node.
pub fn pods_to_record<'a>(
    pps: &PersistentPodState,
    pods: &'a [Arc<Pod>],
) -> Vec<(&'a Pod, &'a str)> {
    let topology = pps.spec.topology_keys();
    let annotations = pps.spec.annotation_keys();
    let recorded = pps.status.as_ref().map(|s| &s.pod_states);
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && is_ready(p))
        .filter_map(|p| Some((p.as_ref(), node_of(p)?)))
        .filter(|(p, node)| {
            let name = p.metadata.name.as_deref().unwrap_or_default();
            let Some(state) = recorded.and_then(|r| r.get(name)) else {
                return true;
            };
            let wanted_annotations: Vec<&String> = p
                .metadata
                .annotations
                .iter()
                .flatten()
                .filter(|(k, _)| annotations.contains(*k))
                .map(|(k, _)| k)
                .collect();
            state.node_name != *node
                || !state.node_topology_labels.keys().eq(topology.iter())
                || !state.annotations.keys().eq(wanted_annotations)
        })
        .collect()
}

/// The state of `pod` on a node labelled `node_labels`.
pub fn state_of(
    spec: &PersistentPodStateSpec,
    pod: &Pod,
    node: &str,
    node_labels: &BTreeMap<String, String>,
) -> PodState {
    let pick = |keys: std::collections::BTreeSet<String>, from: &BTreeMap<String, String>| {
        keys.into_iter()
            .filter_map(|k| from.get(&k).map(|v| (k, v.clone())))
            .collect()
    };
    let empty = BTreeMap::new();
    PodState {
        node_name: node.to_owned(),
        node_topology_labels: pick(spec.topology_keys(), node_labels),
        annotations: pick(
            spec.annotation_keys(),
            pod.metadata.annotations.as_ref().unwrap_or(&empty),
        ),
    }
}

/// The next status (upstream `Reconcile` after its reads): no workload (gone or being
/// deleted) → no states; otherwise the current states with `fresh` ones put in, less those of
/// Pods scaled away and gone when the policy drops them.
pub fn next_status(
    pps: &PersistentPodState,
    workload: Option<&Workload>,
    pods: &[Arc<Pod>],
    fresh: BTreeMap<String, PodState>,
) -> PersistentPodStateStatus {
    let observed_generation = pps.metadata.generation.unwrap_or_default();
    let Some(w) = workload else {
        return PersistentPodStateStatus {
            observed_generation,
            pod_states: BTreeMap::new(),
        };
    };
    let mut states = pps
        .status
        .as_ref()
        .map(|s| s.pod_states.clone())
        .unwrap_or_default();
    states.extend(fresh);
    if pps.spec.drops_scaled_away() {
        let exists = |name: &str| {
            pods.iter()
                .any(|p| p.metadata.name.as_deref() == Some(name))
        };
        // A name without an ordinal is kept, as upstream (it cannot tell).
        states.retain(|name, _| match ordinal_of(name) {
            Some(i) => in_replicas(i, w.replicas, w.start, &w.reserved) || exists(name),
            None => true,
        });
    }
    PersistentPodStateStatus {
        observed_generation,
        pod_states: states,
    }
}

/// The StatefulSet annotations a generated PersistentPodState is made from, as last acted on.
pub type GenerationKeys = [Option<String>; 4];

/// The values of the annotations that shape a generated PersistentPodState: upstream's three
/// (auto-generate, required and preferred topology) and the Pod annotation keys, which also
/// become part of the spec.
pub fn generation_keys(annotations: &BTreeMap<String, String>) -> GenerationKeys {
    [
        kruise_api::keys::PPS_AUTO_GENERATE_ANNOTATION,
        kruise_api::keys::PPS_REQUIRED_TOPOLOGY_ANNOTATION,
        kruise_api::keys::PPS_PREFERRED_TOPOLOGY_ANNOTATION,
        kruise_api::keys::PPS_PERSISTENT_POD_ANNOTATIONS_ANNOTATION,
    ]
    .map(|k| annotations.get(k).cloned())
}

/// Whether an existing generated PersistentPodState's spec is rewritten from the annotations:
/// only when they changed since the generation last acted on this StatefulSet, or when it has
/// not acted on it since the manager started (upstream regenerates on the StatefulSet's
/// create event, which its informer also sends at start, and on a change of the annotations).
/// Otherwise the spec is the user's: an edited `persistentPodStateRetentionPolicy` stays.
pub fn regenerate(last: Option<&GenerationKeys>, now: &GenerationKeys) -> bool {
    last != Some(now)
}
