//! PodProbeMarker admission (v1alpha1 only), after upstream's `pkg/webhook/podprobemarker` and
//! the kind's defaulting (`SetDefaultsPodProbeMarker`: the Kubernetes probe defaults):
//! [`defaults`] fills the probe timing and httpGet's path and scheme, [`validation`] refuses
//! what upstream refuses, naming the field. Raw JSON, as for the other kinds. The gates
//! (`PodProbeMarkerGate`, `KruiseDaemon`) are checked by `gate_refusal` in the crate root.

pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
