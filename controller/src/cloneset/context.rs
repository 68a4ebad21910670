//! Shared state of the CloneSet controller: the client and Pod cache, Events about the CloneSet,
//! and the scale and resource-version expectations its writes leave behind.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod};
use kruise_api::apps::v1beta1::CloneSet;
use kruise_api::features::FeatureGates;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;
use kube::{Api, Resource};
use tokio::sync::Semaphore;
use tracing::Instrument;

use super::active::ActiveMemo;
use super::error::Error;
use crate::backoff::{Backoff, Policy};
use crate::expectations::{ResourceVersionExpectations, ScaleExpectations};
use crate::inplace::InPlaceControl;
use crate::pvccache::PvcCache;
use crate::registry::{Base, Shared};
use crate::revcache::RevisionCache;
use crate::stored::{self, Stored};
use crate::workload::quiet::QuietPods;

/// Name in Events, logs and the field manager.
pub const CONTROLLER_NAME: &str = "cloneset-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "cloneset";
/// Pod creations of a CloneSet after a failed one: an event-triggered reconcile (every Pod
/// event of the CloneSet triggers one) would otherwise retry the creation each time, which in a
/// namespace being deleted meant about ten refused creates a second. A failed create is an API
/// write and a Warning Event; the first retry comes after 1 s, doubling up to the usual cap.
const CREATE_BACKOFF: Policy = Policy {
    base: Duration::from_secs(1),
    cap: Policy::DEFAULT.cap,
};

/// Events written in the background at once (see [`Context::event`]): client-go's broadcaster
/// queues up to 1000; a rollout of a few hundred Pods writes one or two per Pod.
const EVENTS_IN_FLIGHT: usize = 256;

/// Shared state of the CloneSet controller.
pub struct Context {
    base: Base,
    /// The CloneSets' ControllerRevisions (see [`RevisionCache`]).
    pub revisions: RevisionCache,
    /// The claims made from volumeClaimTemplates (see [`PvcCache`]).
    pub pvcs: PvcCache,
    pub scale_exp: ScaleExpectations,
    pub rv_exp: ResourceVersionExpectations,
    pub inplace: InPlaceControl,
    /// The process's feature gates.
    pub gates: FeatureGates,
    /// Failed Pod creations per CloneSet (see [`CREATE_BACKOFF`]).
    pub create_backoff: Backoff,
    /// Pods whose refresh had nothing to do, per CloneSet (see [`QuietPods`]).
    pub quiet: QuietPods,
    /// Each CloneSet's current and update revisions while nothing they depend on changes (see
    /// `cloneset::active::ActiveMemo`).
    pub active: ActiveMemo,
    /// Events being written in the background (see [`Context::event`]).
    event_slots: Arc<Semaphore>,
    /// CloneSets are watched and written at their storage version, converted here.
    pub stored: Stored<CloneSet>,
}

crate::deref_base!(Context);

impl Context {
    pub fn new(shared: &Shared) -> Self {
        Self {
            base: shared.base(CONTROLLER_NAME),
            // The engine reports updates written and Pods marked ready to the metrics.
            inplace: InPlaceControl::new(shared.client.clone())
                .observed_by(shared.metrics.clone(), METRIC_NAME),
            revisions: shared.revisions.clone(),
            pvcs: shared.pvcs.clone(),
            scale_exp: ScaleExpectations::new(),
            rv_exp: ResourceVersionExpectations::new(),
            gates: shared.gates,
            create_backoff: Backoff::new(CREATE_BACKOFF),
            quiet: QuietPods::new(),
            active: ActiveMemo::default(),
            event_slots: Arc::new(Semaphore::new(EVENTS_IN_FLIGHT)),
            stored: stored::of(),
        }
    }

    /// The CloneSets of namespace `ns` at their storage version, for writes whose JSON is the
    /// same in every version (status, `spec.scaleStrategy.podsToDelete`).
    pub(super) fn stored_api(&self, ns: &str) -> Api<DynamicObject> {
        self.stored.api(self.client.clone(), Some(ns))
    }

    /// Observes the scale expectations of `key` (`namespace/name`) that the Pod cache already
    /// shows, whether or not their events reached us.
    pub(super) fn observe_from_cache(&self, key: &str) -> usize {
        self.pods.observe(&self.scale_exp, key)
    }

    /// Publish an Event on the CloneSet. `related` (the pod, PVC or revision concerned) also keeps
    /// events about different objects from being folded into one series.
    ///
    /// The write runs in the background (client-go's recorder queues its events too): awaited,
    /// each Event was a round trip between a revision's creation and the first Pod patch, and
    /// after every Pod write before the reconcile could end and the next Pod event be handled.
    /// At most [`EVENTS_IN_FLIGHT`] run at once; beyond that the caller waits for its own, so a
    /// flood of Events slows the controller down rather than piling up tasks.
    pub(super) async fn event(
        &self,
        cs: &CloneSet,
        type_: EventType,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let ev = crate::events::event(type_, reason, note, related);
        let (recorder, reference) = (self.recorder.clone(), cs.object_ref(&()));
        let publish = async move { crate::events::publish_event(&recorder, &ev, &reference).await };
        match self.event_slots.clone().try_acquire_owned() {
            Ok(slot) => {
                tokio::spawn(
                    async move {
                        publish.await;
                        drop(slot);
                    }
                    .instrument(tracing::Span::current()),
                );
            }
            Err(_) => publish.await,
        }
    }

    /// [`Self::event`] about `obj`, a pod, PVC or revision of the CloneSet.
    pub(super) async fn event_about<K: Resource<DynamicType = ()>>(
        &self,
        cs: &CloneSet,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        self.event(cs, type_, reason, note, Some(obj.object_ref(&())))
            .await;
    }

    /// The outcome of a write to `pvc`: `Ok(true)` when done, `Ok(false)` when the PVC is
    /// already gone (nothing left to do); any other error is published as a Warning Event
    /// (`reason`, `note`) and returned.
    pub(super) async fn pvc_written<T>(
        &self,
        cs: &CloneSet,
        pvc: &PersistentVolumeClaim,
        res: Result<T, kube::Error>,
        reason: &str,
        note: impl FnOnce(&kube::Error) -> String,
    ) -> Result<bool, Error> {
        match res {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.is_not_found() => Ok(false),
            Err(e) => {
                self.event_about(cs, pvc, EventType::Warning, reason, note(&e))
                    .await;
                Err(e.into())
            }
        }
    }

    /// Remember the resource version one of our writes produced, so the next reconcile waits
    /// until the cache shows it.
    pub(super) fn expect_version(&self, uid: Option<&str>, rv: Option<&str>) {
        if let (Some(uid), Some(rv)) = (uid, rv) {
            self.rv_exp.expect(uid, rv);
        }
    }

    pub(super) fn expect_written(&self, written: &Pod) {
        self.expect_version(
            written.metadata.uid.as_deref(),
            written.metadata.resource_version.as_deref(),
        );
    }
}
