//! Wiring of the three loops on the shared runner: markers (own watch; Pod events mapped to
//! the markers selecting the Pod), nodes (own watch; Pod events mapped to the Pod's node, any
//! marker change to every node), results (the NodePodProbe watch).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kruise_api::apps::v1alpha1::{NodePodProbe, PodProbeMarker};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::{plan, reconcile};
use crate::metrics::Metrics;
use crate::podcache::{PodCache, PodEvent};
use crate::runner::{self, Controller};

const CONCURRENCY: u16 = 3;

/// Runs the loops until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    instance: Option<String>,
    shutdown: CancellationToken,
) {
    let (changed, marker_changes) = futures::channel::mpsc::unbounded::<()>();
    let markers = Controller::watching(
        "podprobemarker",
        runner::watch(Api::<PodProbeMarker>::all(client.clone())),
        metrics.clone(),
        shutdown.clone(),
    )
    .concurrency(CONCURRENCY)
    .inspect(move |_| {
        let _ = changed.unbounded_send(());
    });
    let results = Controller::watching(
        "nodepodprobe",
        runner::watch(Api::<NodePodProbe>::all(client.clone())),
        metrics.clone(),
        shutdown.clone(),
    )
    .concurrency(CONCURRENCY);
    let nodes = Controller::watching(
        "nodepodprobe-nodes",
        runner::watch(Api::<Node>::all(client.clone())),
        metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let ctx = Arc::new(Context::new(
        client,
        pods.clone(),
        markers.store(),
        results.store(),
        metrics,
        instance,
    ));

    let marker_store = markers.store();
    let markers = markers.trigger_refs(
        pods.events()
            .flat_map(move |ev| futures::stream::iter(markers_of(&marker_store, ev))),
    );
    let node_store = nodes.store();
    let all_nodes = node_store.clone();
    let nodes = nodes
        .trigger_refs(
            pods.events()
                .flat_map(move |ev| futures::stream::iter(node_of(&node_store, ev))),
        )
        .trigger_refs(marker_changes.flat_map(move |()| futures::stream::iter(all(&all_nodes))));
    tokio::join!(
        markers.run(reconcile::marker, ctx.clone()),
        nodes.run(reconcile::node, ctx.clone()),
        results.run(reconcile::results, ctx),
    );
}

fn all<K: kube::Resource<DynamicType = ()> + Clone>(store: &Store<K>) -> Vec<ObjectRef<K>> {
    store
        .state()
        .iter()
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

fn markers_of(store: &Store<PodProbeMarker>, ev: PodEvent) -> Vec<ObjectRef<PodProbeMarker>> {
    match ev {
        PodEvent::Applied(p) | PodEvent::Deleted(p) => store
            .state()
            .iter()
            .filter(|m| plan::selects(m, &p))
            .map(|m| ObjectRef::from_obj(m.as_ref()))
            .collect(),
        PodEvent::Resync => all(store),
    }
}

fn node_of(store: &Store<Node>, ev: PodEvent) -> Vec<ObjectRef<Node>> {
    match ev {
        PodEvent::Applied(p) | PodEvent::Deleted(p) => p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
            .map(|n| ObjectRef::new(&n))
            .into_iter()
            .collect(),
        PodEvent::Resync => all(store),
    }
}
