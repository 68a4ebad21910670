//! Shared state of the Advanced DaemonSet controller (client, Pod cache, Node store,
//! expectations, Events).

use k8s_openapi::api::core::v1::Node;
use kruise_api::apps::v1beta1::DaemonSet;
use kruise_api::features::FeatureGates;
use kube::Resource;
use kube::runtime::events::EventType;
use kube::runtime::reflector::Store;

use crate::expectations::{ResourceVersionExpectations, ScaleExpectations};
use crate::inplace::InPlaceControl;
use crate::registry::{Base, Shared};
use crate::revcache::RevisionCache;
use crate::workload::quiet::QuietPods;

/// Name in Events, logs and the field manager.
pub const CONTROLLER_NAME: &str = "daemonset-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "daemonset";

/// Shared state of the controller.
pub struct Context {
    base: Base,
    /// The DaemonSets' ControllerRevisions (the shared watch).
    pub revisions: RevisionCache,
    /// Every Node (filled by the controller's Node watch).
    pub nodes: Store<Node>,
    pub scale_exp: ScaleExpectations,
    /// Pods whose refresh had nothing to do, per workload (see [`QuietPods`]).
    pub quiet: QuietPods,
    pub rv_exp: ResourceVersionExpectations,
    pub inplace: InPlaceControl,
    /// The process's feature gates.
    pub gates: FeatureGates,
}

crate::deref_base!(Context);

impl Context {
    pub fn new(shared: &Shared, nodes: Store<Node>) -> Self {
        Self {
            base: shared.base(CONTROLLER_NAME),
            // The engine reports updates written and Pods marked ready to the metrics.
            inplace: InPlaceControl::new(shared.client.clone())
                .observed_by(shared.metrics.clone(), METRIC_NAME),
            revisions: shared.revisions.clone(),
            nodes,
            scale_exp: ScaleExpectations::new(),
            quiet: QuietPods::new(),
            rv_exp: ResourceVersionExpectations::new(),
            gates: shared.gates,
        }
    }

    /// Publish an Event on the DaemonSet; a refused Event is only logged.
    pub(super) async fn event(&self, ds: &DaemonSet, type_: EventType, reason: &str, note: String) {
        self.base
            .event(&ds.object_ref(&()), type_, reason, note)
            .await;
    }
}
