//! Shared state of the BroadcastJob controller (client, Pod cache, Node store, expectations,
//! Events).

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kruise_api::apps::v1beta1::BroadcastJob;
use kube::Resource;
use kube::runtime::reflector::Store;

use crate::expectations::ScaleExpectations;
use crate::registry::{Base, Shared, event_type};

/// Name in Events, logs and the field manager (upstream's).
pub const CONTROLLER_NAME: &str = "broadcastjob-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "broadcastjob";

/// Shared state of the controller.
pub struct Context {
    base: Base,
    /// Every Node (filled by the controller's Node watch).
    pub nodes: Store<Node>,
    /// Pods created and deleted and not yet seen in the cache, by Pod name.
    pub scale_exp: ScaleExpectations,
}

crate::deref_base!(Context);

impl Context {
    pub fn new(shared: &Shared, nodes: Store<Node>) -> Self {
        Self {
            base: shared.base(CONTROLLER_NAME),
            nodes,
            scale_exp: ScaleExpectations::new(),
        }
    }

    /// Publish an Event on the job (`related`: the Pod concerned); a refused Event is only
    /// Publish an Event on the job (`related`: the Pod concerned); a refused Event is only
    /// logged.
    pub(super) async fn event(
        &self,
        job: &BroadcastJob,
        warning: bool,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let (about, type_) = (job.object_ref(&()), event_type(warning));
        self.base
            .event_related(&about, type_, reason, note, related)
            .await;
    }
}
