//! Shared state of the Advanced StatefulSet controller: the client and Pod cache, Events, and
//! the scale and resource-version expectations its writes leave behind.

use std::sync::Arc;

use crate::events::Recorder;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kruise_api::apps::v1beta1::StatefulSet;
use kruise_api::features::FeatureGates;
use kube::runtime::events::{EventType, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, Resource};

use crate::backoff::{Backoff, Policy};
use crate::expectations::{Cached, ResourceVersionExpectations, ScaleExpectations};
use crate::inplace::InPlaceControl;
use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::revcache::RevisionCache;
use crate::workload::quiet::QuietPods;

/// Name in Events, logs and the field manager.
pub const CONTROLLER_NAME: &str = "statefulset-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "statefulset";

pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    /// The sets' ControllerRevisions (the shared watch).
    pub revisions: RevisionCache,
    pub recorder: Recorder,
    pub scale_exp: ScaleExpectations,
    /// Pods whose refresh had nothing to do, per workload (see [`QuietPods`]).
    pub quiet: QuietPods,
    pub rv_exp: ResourceVersionExpectations,
    pub inplace: InPlaceControl,
    pub metrics: Arc<Metrics>,
    /// Only StatefulSets in this namespace (all when `None`).
    pub namespace: Option<String>,
    pub backoff: Arc<Backoff>,
    /// The process's feature gates (upstream's defaults until `with_gates`).
    pub gates: FeatureGates,
}

impl Context {
    pub fn new(
        client: Client,
        pods: PodCache,
        revisions: RevisionCache,
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
            // The engine reports updates written and Pods marked ready to the metrics.
            inplace: InPlaceControl::new(client.clone()).observed_by(metrics.clone(), METRIC_NAME),
            client,
            pods,
            revisions,
            scale_exp: ScaleExpectations::new(),
            quiet: QuietPods::new(),
            rv_exp: ResourceVersionExpectations::new(),
            metrics,
            namespace,
            backoff: Arc::new(Backoff::new(Policy::DEFAULT)),
            gates: FeatureGates::default(),
        }
    }

    #[must_use]
    pub fn with_gates(mut self, gates: FeatureGates) -> Self {
        self.gates = gates;
        self
    }

    /// Observes the scale expectations of `key` that the Pod cache already shows.
    pub(super) fn observe_from_cache(&self, key: &str) -> usize {
        let Some((ns, _)) = key.split_once('/') else {
            return 0;
        };
        let store = self.pods.store();
        self.scale_exp.observe_cache(key, |name| {
            match store.get(&ObjectRef::<Pod>::new(name).within(ns)) {
                None => Cached::Absent,
                Some(p) if p.metadata.deletion_timestamp.is_some() => Cached::Terminating,
                Some(_) => Cached::Present,
            }
        })
    }

    /// Publishes an Event on the StatefulSet, about `related` when given.
    pub(super) async fn event(
        &self,
        sts: &StatefulSet,
        type_: EventType,
        reason: &str,
        note: String,
        related: Option<ObjectReference>,
    ) {
        let ev = crate::events::event(type_, reason, note, related);
        crate::events::publish_event(&self.recorder, &ev, &sts.object_ref(&())).await;
    }

    /// Remembers the resource version one of our pod writes produced.
    pub(super) fn expect_version(&self, uid: Option<&str>, rv: Option<&str>) {
        if let (Some(uid), Some(rv)) = (uid, rv) {
            self.rv_exp.expect(uid, rv);
        }
    }
}
