//! What a reconcile of a PersistentPodState needs: the client, the shared Pod cache, Events.

use std::sync::Arc;

use crate::events::Recorder;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{EventType, Reporter};

use crate::metrics::Metrics;
use crate::podcache::PodCache;

/// Name in Events and logs (upstream's).
pub const CONTROLLER_NAME: &str = "persistentpodstate-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "persistentpodstate";
/// Label value of the `controller` metric label of the generation from StatefulSets.
pub(super) const GENERATOR_METRIC_NAME: &str = "persistentpodstate-generator";

/// Shared state of the PersistentPodState controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Only objects in this namespace (all when `None`).
    pub namespace: Option<String>,
}

impl Context {
    pub fn new(
        client: Client,
        pods: PodCache,
        metrics: Arc<Metrics>,
        instance: Option<String>,
        namespace: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.to_owned(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            pods,
            metrics,
            namespace,
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
