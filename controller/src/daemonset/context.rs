//! Shared state of the Advanced DaemonSet controller (client, Pod cache, Node store,
//! expectations, Events).

use std::sync::Arc;

use crate::events::Recorder;
use k8s_openapi::api::core::v1::Node;
use kruise_api::apps::v1beta1::DaemonSet;
use kruise_api::features::FeatureGates;
use kube::runtime::events::{EventType, Reporter};
use kube::runtime::reflector::Store;
use kube::{Client, Resource};

use crate::backoff::{Backoff, Policy};
use crate::expectations::{ResourceVersionExpectations, ScaleExpectations};
use crate::inplace::InPlaceControl;
use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::revcache::RevisionCache;
use crate::workload::quiet::QuietPods;

/// Name in Events, logs and the field manager.
pub const CONTROLLER_NAME: &str = "daemonset-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "daemonset";

/// Shared state of the controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    /// The DaemonSets' ControllerRevisions (the shared watch).
    pub revisions: RevisionCache,
    /// Every Node (filled by the controller's Node watch).
    pub nodes: Store<Node>,
    pub recorder: Recorder,
    pub scale_exp: ScaleExpectations,
    /// Pods whose refresh had nothing to do, per workload (see [`QuietPods`]).
    pub quiet: QuietPods,
    pub rv_exp: ResourceVersionExpectations,
    pub inplace: InPlaceControl,
    pub metrics: Arc<Metrics>,
    pub namespace: Option<String>,
    pub backoff: Arc<Backoff>,
    /// The process's feature gates (upstream's defaults until `with_gates`).
    pub gates: FeatureGates,
}

impl Context {
    pub fn new(
        client: Client,
        pods: PodCache,
        revisions: RevisionCache,
        nodes: Store<Node>,
        metrics: Arc<Metrics>,
        instance: Option<String>,
        namespace: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.to_string(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            // The engine reports updates written and Pods marked ready to the metrics.
            inplace: InPlaceControl::new(client.clone()).observed_by(metrics.clone(), METRIC_NAME),
            client,
            pods,
            revisions,
            nodes,
            scale_exp: ScaleExpectations::new(),
            quiet: QuietPods::new(),
            rv_exp: ResourceVersionExpectations::new(),
            metrics,
            namespace,
            backoff: Arc::new(Backoff::new(Policy::DEFAULT)),
            gates: FeatureGates::default(),
        }
    }

    #[must_use]
    pub fn with_gates(mut self, gates: FeatureGates) -> Self {
        self.gates = gates;
        self
    }

    /// Publish an Event on the DaemonSet; a refused Event is only logged.
    pub(super) async fn event(&self, ds: &DaemonSet, type_: EventType, reason: &str, note: String) {
        let ev = crate::events::event(type_, reason, note, None);
        crate::events::publish_event(&self.recorder, &ev, &ds.object_ref(&())).await;
    }
}
