//! The `KruisePodReady` readiness gate, upstream `injectPodReadinessGate` (the first thing the
//! Pod webhook does).

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;

/// Whether the pod's controller owner belongs to `apps.kruise.io` (any version).
pub fn owned_by_kruise(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .is_some_and(|o| o.api_version.split('/').next() == Some(keys::APPS_GROUP))
}

/// Adds the `KruisePodReady` readiness gate (once) to Kruise-owned pods, or to every pod when
/// `for_all` (the `KruisePodReadinessGate` feature gate).
pub fn inject_readiness_gate(pod: &mut Pod, for_all: bool) -> bool {
    (for_all || owned_by_kruise(pod))
        && kruise_api::pod::add_readiness_gate(pod, keys::KRUISE_POD_READY)
}
