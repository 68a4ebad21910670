//! PersistentPodState on Pods (upstream `pkg/webhook/pod/mutating/persistent_pod_state.go`),
//! the last `/mutate-pod` slot: a Pod of a StatefulSet (or of a kind the `kruise-configuration`
//! key `PPS_Watch_Custom_Workload_WhiteList` lists) that a PersistentPodState targets, and
//! whose name has a recorded state, is given the recorded topology — the required keys as
//! `spec.nodeSelector`, the preferred ones as preferred node affinity — and the
//! `kruise.io/injected-persistent-pod-state` annotation naming the PersistentPodState.
//!
//! A Pod pays a lookup in the watch cache of its namespace's PersistentPodStates; one of a
//! custom kind with a recorded state also a read of the whitelist.

use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, Pod};
use kruise_api::apps::v1alpha1::{Placement, node_affinity};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::TargetReference;

use crate::persistentpodstate::PpsLookup;
use crate::persistentpodstate::validation::is_statefulset;

/// What the slot injects: the PersistentPodState's name and the placement.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Injection {
    pub persistent_pod_state: String,
    pub placement: Placement,
}

/// The injection for a new Pod (upstream's lookup before `createNodeAffinity`), or `None`. A
/// failed lookup injects nothing: the Pod is created where the scheduler puts it, as upstream
/// does when its client cannot list.
pub async fn injection_for<C: PpsLookup>(
    pod: &Pod,
    namespace: &str,
    cluster: &C,
) -> Option<Injection> {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))?;
    let builtin = is_statefulset(&owner.api_version, &owner.kind);
    let name = pod.metadata.name.as_deref()?;
    let states = match cluster.persistent_pod_states(namespace).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, namespace, "cannot list PersistentPodStates; Pod not steered");
            return None;
        }
    };
    let target = TargetReference {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.name.clone(),
    };
    let pps = states.iter().find(|p| {
        p.metadata.deletion_timestamp.is_none() && p.spec.target_reference.same_workload(&target)
    })?;
    let state = pps.status.as_ref()?.pod_states.get(name)?;
    // Another kind only when `PPS_Watch_Custom_Workload_WhiteList` lists it; the ConfigMap is
    // read only for a Pod a PersistentPodState has a state for.
    if !builtin {
        match cluster.pps_whitelist().await {
            Ok(w) if w.allows(&owner.api_version, &owner.kind) => {}
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(error = %e, namespace, "cannot read the PersistentPodState whitelist; Pod not steered");
                return None;
            }
        }
    }
    let placement = node_affinity(&pps.spec, state);
    if placement.is_empty() {
        return None;
    }
    Some(Injection {
        persistent_pod_state: pps.metadata.name.clone().unwrap_or_default(),
        placement,
    })
}

/// Applies `injection` to the Pod; whether it changed anything.
pub fn inject(pod: &mut Pod, injection: Option<&Injection>) -> bool {
    let Some(inj) = injection else { return false };
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            keys::PPS_INJECTED_ANNOTATION.to_owned(),
            inj.persistent_pod_state.clone(),
        );
    let spec = pod.spec.get_or_insert_with(Default::default);
    if !inj.placement.node_selector.is_empty() {
        spec.node_selector
            .get_or_insert_with(Default::default)
            .extend(inj.placement.node_selector.clone());
    }
    if !inj.placement.preferred.is_empty() {
        spec.affinity
            .get_or_insert_with(Affinity::default)
            .node_affinity
            .get_or_insert_with(NodeAffinity::default)
            .preferred_during_scheduling_ignored_during_execution
            .get_or_insert_with(Vec::new)
            .extend(inj.placement.preferred.clone());
    }
    true
}
