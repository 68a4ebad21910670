//! What a reconcile needs: the client, the Node store and the Event recorder.

use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::Client;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector;

use crate::events::Recorder;

/// The controller's name in metrics and logs.
pub(super) const METRIC_NAME: &str = "nodeimage";
/// Name in Events (upstream's).
pub(super) const CONTROLLER_NAME: &str = "nodeimage-controller";

/// Shared state of the controller.
pub struct Context {
    pub client: Client,
    pub nodes: reflector::Store<Node>,
    pub recorder: Recorder,
}

impl Context {
    /// Records a `PullImageFailed` Warning about `r`; a refused Event is only logged.
    pub(super) async fn pull_failed(&self, r: &ObjectReference, note: &str) {
        let ev = Event {
            type_: EventType::Warning,
            reason: "PullImageFailed".into(),
            note: Some(note.to_string()),
            action: "PullImage".into(),
            secondary: None,
        };
        crate::events::publish_event(&self.recorder, &ev, r).await;
    }
}
