//! What one SidecarSet reconcile works with: the client, the shared Pod cache, the Namespace
//! store, Events, and the expectations of our own Pod writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::events::Recorder;
use k8s_openapi::api::core::v1::{Namespace, ObjectReference, Pod};
use kruise_api::apps::v1beta1::SidecarSet;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource};

use crate::expectations::{EXPECTATION_TIMEOUT, ResourceVersionExpectations, VersionSatisfaction};
use crate::podcache::PodCache;

/// Name of the controller in the runner and its metrics.
pub(super) const METRIC_NAME: &str = "sidecarset";
/// Name in Events.
pub(super) const CONTROLLER_NAME: &str = "sidecarset-controller";
/// While Pods are upgrading, look again this often (the Pod events also wake us).
pub(super) const PROGRESS_RESYNC: Duration = Duration::from_secs(5);
/// While the cache lags behind our own Pod writes, look again this soon (upstream: 1s).
const CACHE_RECHECK: Duration = Duration::from_secs(1);

pub(super) struct Context {
    pub client: Client,
    pub pods: PodCache,
    /// Every Namespace, for `namespaceSelector` (the webhook reads the same labels).
    pub namespaces: Store<Namespace>,
    pub recorder: Recorder,
    /// The manager's namespace, where the SidecarSets' ControllerRevisions live.
    pub revision_namespace: String,
    /// The versions of our own Pod writes the cache has not shown yet: maxUnavailable counts
    /// only upgraded Pods, so a plan over a Pod whose upgrade the cache does not show yet
    /// would upgrade one Pod too many (upstream `UpdateExpectations` /
    /// `ResourceVersionExpectations`).
    pub written: ResourceVersionExpectations,
}

impl Context {
    /// Remembers the version one of our Pod writes produced.
    pub fn wrote(&self, pod: &Pod) {
        if let (Some(uid), Some(rv)) = (
            pod.metadata.uid.as_deref(),
            pod.metadata.resource_version.as_deref(),
        ) {
            self.written.expect(uid, rv);
        }
    }

    /// How long to wait before planning when the cache still shows an older version of one
    /// of `pods` than we wrote; an expectation older than [`EXPECTATION_TIMEOUT`] is dropped
    /// (the write may have been overtaken by a delete and re-create).
    pub fn cache_lags(&self, pods: &[Arc<Pod>], now: std::time::Instant) -> Option<Duration> {
        if self.written.is_empty() {
            return None;
        }
        for pod in pods {
            let (Some(uid), Some(rv)) = (
                pod.metadata.uid.as_deref(),
                pod.metadata.resource_version.as_deref(),
            ) else {
                continue;
            };
            if let VersionSatisfaction::Unsatisfied { since } = self.written.satisfied(uid, rv, now)
            {
                if since >= EXPECTATION_TIMEOUT {
                    self.written.delete(uid);
                    continue;
                }
                return Some(CACHE_RECHECK);
            }
        }
        None
    }
}

impl Context {
    /// The labels of a namespace as the store has them (empty when unknown).
    pub fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        self.namespaces
            .get(&ObjectRef::new(namespace))
            .and_then(|n| n.metadata.labels.clone())
            .unwrap_or_default()
    }

    /// Publishes an Event on the SidecarSet; a refused Event is only logged.
    pub async fn event(&self, set: &SidecarSet, type_: EventType, reason: &str, note: String) {
        self.event_about(set, None, type_, reason, note).await;
    }

    /// An Event on the SidecarSet about `secondary` (the object it concerns).
    pub async fn event_about(
        &self,
        set: &SidecarSet,
        secondary: Option<ObjectReference>,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let ev = crate::events::event(type_, reason, note, secondary);
        crate::events::publish_event(&self.recorder, &ev, &set.object_ref(&())).await;
    }
}
