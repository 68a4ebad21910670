//! Wiring of the three loops on the shared runner: markers (own watch; Pod events mapped to
//! the markers selecting the Pod), nodes (own watch; Pod events mapped to the Pod's node, any
//! marker change to every node), results (the NodePodProbe watch).

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kruise_api::apps::v1alpha1::{NodePodProbe, PodProbeMarker};
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};

use super::context::{CONTROLLER_NAME, Context};
use super::{plan, reconcile};
use crate::podcache::PodEvent;
use crate::registry::{self, Shared};
use crate::runner::{self, Controller};
use kruise_api::features::Gate;

const CONCURRENCY: u16 = 3;

/// The registry's entry (started when its feature gate allows).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: "podprobemarker and nodepodprobe",
    enabled: |gates| {
        // It needs the daemon, which runs the probes.
        gates.enabled(Gate::KruiseDaemon) && gates.enabled(Gate::PodProbeMarkerGate)
    },
    start: |shared| Box::pin(run(shared.clone())),
};

/// Runs the loops until `shutdown` is cancelled.
pub async fn run(shared: Shared) {
    let recorder = shared.recorder(CONTROLLER_NAME);
    let Shared {
        client,
        pods,
        metrics,
        shutdown,
        gates,
        ..
    } = shared;
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
    let ctx = Arc::new(Context {
        client,
        pods: pods.clone(),
        markers: markers.store(),
        probes: results.store(),
        nodes: nodes.store(),
        serverless: gates.enabled(Gate::EnablePodProbeMarkerOnServerless),
        recorder,
        metrics,
        reported: Mutex::default(),
    });

    let marker_store = markers.store();
    let markers =
        markers.trigger_refs(pods.targets(move |ev| markers_of(&marker_store, ev.clone())));
    let node_store = nodes.store();
    let all_nodes = node_store.clone();
    let (node_markers, node_probes) = (ctx.markers.clone(), ctx.probes.clone());
    let nodes = nodes
        .trigger_refs(
            pods.targets(move |ev| node_of(&node_store, &node_markers, &node_probes, ev.clone())),
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

/// The node whose NodePodProbe a Pod event can change: the Pod's, when a marker selects the
/// Pod (its probes or IP may change) or the node's NodePodProbe lists it (it must go), or the
/// Pod is deleted (the list may not show our latest write yet). Other Pods' events, most of a
/// large cluster's, leave every NodePodProbe as it is, and the node's reconcile reads every Pod.
fn node_of(
    store: &Store<Node>,
    markers: &Store<PodProbeMarker>,
    probes: &Store<NodePodProbe>,
    ev: PodEvent,
) -> Vec<ObjectRef<Node>> {
    let (pod, deleted) = match ev {
        PodEvent::Applied(p) => (p, false),
        PodEvent::Deleted(p) => (p, true),
        PodEvent::Resync => return all(store),
    };
    let Some(node) = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
    else {
        return Vec::new();
    };
    let concerned = deleted
        || markers.state().iter().any(|m| plan::selects(m, &pod))
        || probes.get(&ObjectRef::new(node)).is_some_and(|npp| {
            let uid = pod.metadata.uid.as_deref().unwrap_or_default();
            npp.spec.pod_probes.iter().any(|p| p.uid == uid)
        });
    if concerned {
        vec![ObjectRef::new(node)]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Pod, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kruise_api::apps::v1alpha1::{NodePodProbeSpec, PodProbe, PodProbeMarkerSpec};
    use kube::runtime::reflector::store;
    use kube::runtime::watcher::Event;

    fn pod(name: &str, app: &str) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.name = Some(name.into());
        p.metadata.namespace = Some("ns".into());
        p.metadata.uid = Some(format!("uid-{name}"));
        p.metadata.labels = Some([("app".to_owned(), app.to_owned())].into());
        p.spec = Some(PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        });
        Arc::new(p)
    }

    fn stores(listed: &[&str]) -> (Store<Node>, Store<PodProbeMarker>, Store<NodePodProbe>) {
        let (nodes, mut w) = store::<Node>();
        w.apply_watcher_event(&Event::Apply(Node {
            metadata: kube::core::ObjectMeta {
                name: Some("n1".into()),
                ..Default::default()
            },
            ..Default::default()
        }));
        let (markers, mut w) = store::<PodProbeMarker>();
        let mut m = PodProbeMarker::new(
            "probe",
            PodProbeMarkerSpec {
                selector: LabelSelector {
                    match_labels: Some([("app".to_owned(), "probed".to_owned())].into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        m.metadata.namespace = Some("ns".into());
        w.apply_watcher_event(&Event::Apply(m));
        let (probes, mut w) = store::<NodePodProbe>();
        w.apply_watcher_event(&Event::Apply(NodePodProbe::new(
            "n1",
            NodePodProbeSpec {
                pod_probes: listed
                    .iter()
                    .map(|n| PodProbe {
                        name: (*n).into(),
                        namespace: "ns".into(),
                        uid: format!("uid-{n}"),
                        ..Default::default()
                    })
                    .collect(),
            },
        )));
        (nodes, markers, probes)
    }

    #[test]
    fn only_pod_events_that_can_change_a_node_probe_list_reach_the_node() {
        let (nodes, markers, probes) = stores(&["was-probed"]);
        let of = |ev| node_of(&nodes, &markers, &probes, ev);
        let n1 = vec![ObjectRef::<Node>::new("n1")];
        assert_eq!(of(PodEvent::Applied(pod("web", "probed"))), n1, "selected");
        assert_eq!(
            of(PodEvent::Applied(pod("was-probed", "other"))),
            n1,
            "listed, no longer selected: it must leave the list"
        );
        assert_eq!(of(PodEvent::Deleted(pod("other", "other"))), n1, "deleted");
        assert!(
            of(PodEvent::Applied(pod("other", "other"))).is_empty(),
            "neither selected nor listed"
        );
        let mut unbound = (*pod("web", "probed")).clone();
        unbound.spec = None;
        assert!(
            of(PodEvent::Applied(Arc::new(unbound))).is_empty(),
            "no node"
        );
        assert_eq!(of(PodEvent::Resync), n1, "a resync reaches every node");
    }
}
