//! What a reconcile of a WorkloadSpread needs: the client, the shared Pod cache, Events.

use std::sync::Arc;

use crate::events::Recorder;
use kruise_api::apps::v1alpha1::WorkloadSpread;
use kube::Client;
use kube::Resource;
use kube::runtime::events::{EventType, Reporter};

use crate::metrics::Metrics;
use crate::podcache::PodCache;

/// Name in Events and logs (upstream's).
pub const CONTROLLER_NAME: &str = "workloadspread-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "workloadspread";

/// Shared state of the WorkloadSpread controller.
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

    /// Records an Event on the WorkloadSpread; a failure to record is logged, never fatal.
    pub async fn event(&self, ws: &WorkloadSpread, type_: EventType, reason: &str, note: String) {
        let about = ws.object_ref(&());
        crate::events::publish(&self.recorder, &about, type_, reason, note).await;
    }
}
