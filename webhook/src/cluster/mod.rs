//! The cluster behind the handlers: [`ApiCluster`] implements, with a Kubernetes client, the
//! lookups the kinds declare ([`crate::crr::mutation::PodLookup`],
//! [`crate::cloneset::template::PodDryRun`], [`crate::sidecarset::SidecarSetLookup`],
//! [`crate::deletionprotection::ProtectionLookup`]), one file
//! per lookup. The kinds stay pure and are tested with doubles; only this module calls the API
//! server.

mod budgets;
mod deletionprotection;
mod dry_run;
mod persistentpodstates;
mod podprobemarkers;
mod pods;
mod sidecarsets;
mod storageclasses;
mod workloadspreads;

use std::time::Duration;

use kruise_api::apps::v1alpha1::{PersistentPodState, PodProbeMarker, WorkloadSpread};
use kruise_api::policy::v1alpha1::PodUnavailableBudget;

use crate::configuration::scope::{PodMarks, ScopeLookup};
use crate::sidecarset::cache::SidecarSetCache;
use crate::watched::Watched;

/// The API server as the handlers read it: Pods (ContainerRecreateRequest admission), Pod
/// dry-runs ([`crate::cloneset::template`]), SidecarSets and namespaces (Pod injection). A
/// call gives up after `timeout`, shorter than the webhook's own, so the API server relays our
/// reason instead of a bare webhook timeout.
#[derive(Clone)]
pub struct ApiCluster {
    /// `None` when the server runs without a cluster (tests): every lookup fails.
    pub client: Option<kube::Client>,
    /// Bound on one call.
    pub timeout: Duration,
    /// Whether CloneSet templates are dry-run as Pods ([`crate::WebhookConfig::template_dry_run`]).
    pub template_dry_run: bool,
    /// Where SidecarSets are read once it has loaded (they are listed before that, and when
    /// `None`).
    pub sidecar_sets: Option<SidecarSetCache>,
    /// Where PodUnavailableBudgets are read once it has loaded (listed before that, and when
    /// `None`).
    pub budgets: Option<Watched<PodUnavailableBudget>>,
    /// Where PersistentPodStates are read once it has loaded (listed before that, and when
    /// `None`).
    pub persistent_pod_states: Option<Watched<PersistentPodState>>,
    /// Where WorkloadSpreads are read once it has loaded (listed before that, and when
    /// `None`).
    pub workload_spreads: Option<Watched<WorkloadSpread>>,
    /// Where PodProbeMarkers are read once it has loaded (listed before that, and when
    /// `None`); watched only while `EnablePodProbeMarkerOnServerless` is on.
    pub pod_probe_markers: Option<Watched<PodProbeMarker>>,
    /// Which Pods the Pod hook marks as admitted (`None`: none, no policy looks for the mark).
    pub pod_marks: Option<PodMarks>,
    /// Where refusals are counted.
    pub metrics: crate::metrics::ProtectionMetrics,
}

impl ScopeLookup for ApiCluster {
    fn must_mark(&self, namespace: &str, pod: &k8s_openapi::api::core::v1::Pod) -> bool {
        self.pod_marks
            .as_ref()
            .is_some_and(|m| m.must_mark(namespace, pod))
    }
}
