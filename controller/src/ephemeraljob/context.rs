//! Shared state of the EphemeralJob controller (client, Pod cache, expectations, Events).

use std::sync::Arc;

use crate::events::Recorder;
use k8s_openapi::api::core::v1::ObjectReference;
use kruise_api::apps::v1alpha1::EphemeralJob;
use kube::runtime::events::{EventType, Reporter};
use kube::{Client, Resource};

use crate::backoff::{Backoff, Policy};
use crate::expectations::ScaleExpectations;
use crate::metrics::Metrics;
use crate::podcache::PodCache;

/// Name in Events, logs and the field manager (upstream's).
pub const CONTROLLER_NAME: &str = "ephemeraljob-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "ephemeraljob";

/// Shared state of the controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    pub recorder: Recorder,
    /// Pods injected into and not yet seen with the containers in the cache, by Pod name.
    pub injections: ScaleExpectations,
    pub metrics: Arc<Metrics>,
    pub namespace: Option<String>,
    pub backoff: Arc<Backoff>,
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
            controller: CONTROLLER_NAME.to_string(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            pods,
            injections: ScaleExpectations::new(),
            metrics,
            namespace,
            backoff: Arc::new(Backoff::new(Policy::DEFAULT)),
        }
    }

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
        let ev = crate::events::event(
            if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason,
            note,
            related,
        );
        crate::events::publish_event(&self.recorder, &ev, &job.object_ref(&())).await;
    }
}
