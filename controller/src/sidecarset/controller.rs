//! The SidecarSet controller's wiring on the shared runner: SidecarSets, woken by the Pods that
//! carry their hash annotation and by Namespace label changes (for `namespaceSelector`).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::{keys, sidecarset as wire};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

use super::context::{CONTROLLER_NAME, Context, METRIC_NAME};
use super::reconcile::reconcile;
use crate::expectations::ResourceVersionExpectations;
use crate::registry::{self, Shared};
use crate::runner::{Controller, watch};

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(shared.clone())),
};

/// Runs until `shutdown`. The SidecarSets' ControllerRevisions live in the manager's own
/// namespace.
pub async fn run(shared: Shared) {
    let recorder = shared.recorder(CONTROLLER_NAME);
    let Shared {
        client,
        pods,
        metrics,
        shutdown,
        ..
    } = shared;
    let api: Api<SidecarSet> = Api::all(client.clone());
    let (namespaces, ns_writer) = reflector::store::<Namespace>();
    let ns_events = reflector::reflector(
        ns_writer,
        watcher(
            Api::<Namespace>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .touched_objects();
    // A Pod event wakes every SidecarSet the Pod carries.
    let wake = pods.live_targets(|p| -> Vec<ObjectRef<SidecarSet>> {
        p.annotations()
            .get(keys::SIDECARSET_HASH_ANNOTATION)
            .and_then(|v| wire::parse_hash_annotation(keys::SIDECARSET_HASH_ANNOTATION, v).ok())
            .map(|m| m.into_keys().map(|n| ObjectRef::new(&n)).collect())
            .unwrap_or_default()
    });
    let ctx = Arc::new(Context {
        recorder,
        client,
        pods,
        namespaces,
        revision_namespace: keys::own_namespace(),
        written: ResourceVersionExpectations::new(),
    });
    let ctl = Controller::watching(METRIC_NAME, watch(api), metrics.clone(), shutdown);
    metrics.workloads.sidecarsets.set(ctl.store());
    // A namespace's labels changing can change which Pods a namespaceSelector matches.
    let store = ctl.store();
    let ns_wake = ns_events.flat_map(move |ev: Result<Namespace, watcher::Error>| {
        let refs: Vec<ObjectRef<SidecarSet>> = match ev {
            Ok(_) => store
                .state()
                .iter()
                .filter(|s| s.spec.namespace_selector.is_some())
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "namespace watch error");
                Vec::new()
            }
        };
        futures::stream::iter(refs)
    });
    ctl.trigger_refs(wake)
        .trigger_refs(ns_wake)
        .run(reconcile, ctx)
        .await;
}
