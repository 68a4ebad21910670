//! Shared state of the EphemeralJob controller (client, Pod cache, expectations, Events).

use k8s_openapi::api::core::v1::ObjectReference;
use kruise_api::apps::v1alpha1::EphemeralJob;
use kube::Resource;

use crate::expectations::ScaleExpectations;
use crate::registry::{Base, Shared, event_type};

/// Name in Events, logs and the field manager (upstream's).
pub const CONTROLLER_NAME: &str = "ephemeraljob-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "ephemeraljob";

/// Shared state of the controller.
pub struct Context {
    base: Base,
    /// Pods injected into and not yet seen with the containers in the cache, by Pod name.
    pub injections: ScaleExpectations,
}

crate::deref_base!(Context);

impl Context {
    pub fn new(shared: &Shared) -> Self {
        Self {
            base: shared.base(CONTROLLER_NAME),
            injections: ScaleExpectations::new(),
        }
    }

    /// Publish an Event on the job (`related`: the Pod concerned); a refused Event is only
    /// Publish an Event on the job (`related`: the Pod concerned); a refused Event is only
    /// logged.
    pub(super) async fn event(
        &self,
        job: &EphemeralJob,
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
