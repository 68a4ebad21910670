//! Shared state of the BroadcastJob controller (client, Pod cache, Node store, expectations,
//! Events).

use std::sync::Arc;

use crate::events::Recorder;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kruise_api::apps::v1beta1::BroadcastJob;
use kube::runtime::events::{EventType, Reporter};
use kube::runtime::reflector::Store;
use kube::{Client, Resource};

use crate::backoff::{Backoff, Policy};
use crate::expectations::ScaleExpectations;
use crate::metrics::Metrics;
use crate::podcache::PodCache;

/// Name in Events, logs and the field manager (upstream's).
pub const CONTROLLER_NAME: &str = "broadcastjob-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "broadcastjob";

/// Shared state of the controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    /// Every Node (filled by the controller's Node watch).
    pub nodes: Store<Node>,
    pub recorder: Recorder,
    /// Pods created and deleted and not yet seen in the cache, by Pod name.
    pub scale_exp: ScaleExpectations,
    pub metrics: Arc<Metrics>,
    pub namespace: Option<String>,
    pub backoff: Arc<Backoff>,
}

impl Context {
    pub fn new(
        client: Client,
        pods: PodCache,
        nodes: Store<Node>,
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
            nodes,
            scale_exp: ScaleExpectations::new(),
            metrics,
            namespace,
            backoff: Arc::new(Backoff::new(Policy::DEFAULT)),
        }
    }

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
