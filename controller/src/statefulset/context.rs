//! Shared state of the Advanced StatefulSet controller: the client and Pod cache, Events, and
//! the scale and resource-version expectations its writes leave behind.

use k8s_openapi::api::core::v1::ObjectReference;
use kruise_api::apps::v1beta1::StatefulSet;
use kruise_api::features::FeatureGates;
use kube::Resource;
use kube::runtime::events::EventType;

use crate::expectations::{ResourceVersionExpectations, ScaleExpectations};
use crate::inplace::InPlaceControl;
use crate::pvccache::PvcCache;
use crate::registry::{Base, Shared};
use crate::revcache::RevisionCache;
use crate::workload::quiet::QuietPods;

/// Name in Events, logs and the field manager.
pub const CONTROLLER_NAME: &str = "statefulset-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "statefulset";

/// Shared state of the controller.
pub struct Context {
    base: Base,
    /// The sets' ControllerRevisions (the shared watch).
    pub revisions: RevisionCache,
    pub scale_exp: ScaleExpectations,
    /// Pods whose refresh had nothing to do, per workload (see [`QuietPods`]).
    pub quiet: QuietPods,
    pub rv_exp: ResourceVersionExpectations,
    pub inplace: InPlaceControl,
    /// The process's feature gates.
    pub gates: FeatureGates,
    /// The manager's PVC watch: the claims of the set's Pods, against its templates.
    pub pvcs: PvcCache,
}

crate::deref_base!(Context);

impl Context {
    pub fn new(shared: &Shared) -> Self {
        Self {
            base: shared.base(CONTROLLER_NAME),
            // The engine reports updates written and Pods marked ready to the metrics.
            inplace: InPlaceControl::new(shared.client.clone())
                .observed_by(shared.metrics.clone(), METRIC_NAME),
            revisions: shared.revisions.clone(),
            scale_exp: ScaleExpectations::new(),
            quiet: QuietPods::new(),
            rv_exp: ResourceVersionExpectations::new(),
            gates: shared.gates,
            pvcs: shared.pvcs.clone(),
        }
    }

    /// Observes the scale expectations of `key` that the Pod cache already shows.
    pub(super) fn observe_from_cache(&self, key: &str) -> usize {
        self.pods.observe(&self.scale_exp, key)
    }

    /// Publishes an Event on the StatefulSet, about `related` when given.
    pub(super) async fn event(
        &self,
        sts: &StatefulSet,
        type_: EventType,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let about = sts.object_ref(&());
        self.base
            .event_related(&about, type_, reason, note, related)
            .await;
    }

    /// Remembers the resource version one of our pod writes produced.
    pub(super) fn expect_version(&self, uid: Option<&str>, rv: Option<&str>) {
        if let (Some(uid), Some(rv)) = (uid, rv) {
            self.rv_exp.expect(uid, rv);
        }
    }
}
