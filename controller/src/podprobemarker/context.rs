//! What the three loops share: client, caches, Event recorder.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::events::Recorder;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps::v1alpha1::{NodePodProbe, PodProbeMarker};
use kube::runtime::events::EventType;
use kube::runtime::reflector::Store;
use kube::{Client, Resource};

use crate::metrics::Metrics;
use crate::podcache::PodCache;

/// Name in Events and logs (upstream's controller name).
pub const CONTROLLER_NAME: &str = "podprobemarker-controller";

pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    pub markers: Store<PodProbeMarker>,
    pub probes: Store<NodePodProbe>,
    /// The Nodes: which are virtual-kubelet (serverless) nodes.
    pub nodes: Store<Node>,
    /// `EnablePodProbeMarkerOnServerless`: mark serverless Pods from their conditions.
    pub serverless: bool,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// (Pod UID, probe) pairs already reported missing their container: one Event each.
    pub reported: Mutex<HashSet<(String, String)>>,
}

impl Context {
    /// Records a Warning Event on `pod`; a refused Event is only logged.
    pub async fn warn(&self, pod: &Pod, reason: &str, note: String) {
        let ev = crate::events::event(EventType::Warning, reason, note, None);
        crate::events::publish_event(&self.recorder, &ev, &pod.object_ref(&())).await;
    }
}
