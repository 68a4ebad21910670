//! What a reconcile of a distribution needs: the client, the Namespace cache, Events.

use crate::events::Recorder;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference};
use kube::Client;
use kube::runtime::events::EventType;
use kube::runtime::reflector::Store;

use crate::registry::Shared;

/// Name in Events and logs (upstream's controller name).
pub const CONTROLLER_NAME: &str = "resourcedistribution-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "resourcedistribution";

/// Shared state of the ResourceDistribution controller.
pub struct Context {
    pub client: Client,
    /// Every Namespace (the targets are matched against it).
    pub namespaces: Store<Namespace>,
    pub recorder: Recorder,
}

impl Context {
    pub fn new(shared: &Shared, namespaces: Store<Namespace>) -> Self {
        Self {
            client: shared.client.clone(),
            namespaces,
            recorder: shared.recorder(CONTROLLER_NAME),
        }
    }

    /// Records an Event; a failure to record is logged, never fatal.
    pub async fn event(
        &self,
        about: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let ev = crate::events::event(type_, reason, note, None);
        crate::events::publish_event(&self.recorder, &ev, about).await;
    }
}
