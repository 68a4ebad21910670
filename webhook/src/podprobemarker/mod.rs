//! PodProbeMarker admission (v1alpha1 only), after upstream's `pkg/webhook/podprobemarker` and
//! the kind's defaulting (`SetDefaultsPodProbeMarker`: the Kubernetes probe defaults):
//! [`defaults`] fills the probe timing and httpGet's path and scheme, [`validation`] refuses
//! what upstream refuses, naming the field. Raw JSON, as for the other kinds. The gates
//! (`PodProbeMarkerGate`, `KruiseDaemon`) are checked by `gate_refusal` in the crate root.
//! The Pod side (a new Pod's probes written for a serverless node's agent, gate
//! `EnablePodProbeMarkerOnServerless`) is in [`crate::pod::probe_marker`].
//!
//! [`PpmLookup`] is what the Pod handler reads in the cluster; its default describes a cluster
//! without PodProbeMarkers, so test doubles of the other kinds need not implement it.

pub mod defaults;
pub mod validation;

use std::future::Future;

use kruise_api::apps::v1alpha1::PodProbeMarker;

/// PodProbeMarkers as the Pod webhook reads them.
pub trait PpmLookup: Sync {
    /// The PodProbeMarkers of a namespace (from the watch cache where there is one): read on
    /// every Pod create while `EnablePodProbeMarkerOnServerless` is on.
    fn pod_probe_markers(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<Vec<PodProbeMarker>, String>> + Send {
        std::future::ready(Ok(Vec::new()))
    }
}

#[cfg(test)]
mod tests;
