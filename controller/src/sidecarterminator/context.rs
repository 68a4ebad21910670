//! What a reconcile needs: the client and the Event recorder.

use crate::events::Recorder;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::events::EventType;

use crate::registry::Shared;
use kube::{Client, Resource};

/// Name in Events and logs (upstream's controller name).
pub const CONTROLLER_NAME: &str = "sidecarterminator-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "sidecarterminator";

/// Shared state of the SidecarTerminator.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
}

impl Context {
    pub fn new(shared: &Shared) -> Self {
        Self {
            client: shared.client.clone(),
            recorder: shared.recorder(CONTROLLER_NAME),
        }
    }

    /// Records an Event on `pod`; a failure to record is logged, never fatal.
    pub async fn event(&self, pod: &Pod, type_: EventType, reason: &str, note: String) {
        let ev = crate::events::event(type_, reason, note, None);
        crate::events::publish_event(&self.recorder, &ev, &pod.object_ref(&())).await;
    }
}
