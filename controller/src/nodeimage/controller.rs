//! Wiring of the NodeImage controller: the NodeImage watch, a Node watch (a Node event concerns
//! the NodeImage of the same name, which a side loop creates when it is missing) and an
//! ImagePullJob watch (a deleted job concerns the NodeImages carrying its tags).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kruise_api::apps::v1beta1::{ImagePullJob, NodeImage};
use kruise_api::features::Gate;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::ReconcileRequest;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};

use super::context::{CONTROLLER_NAME, Context, METRIC_NAME};
use super::reconcile::{ensure_for_node, reconcile};
use crate::registry::{self, Shared};
use crate::runner::{self, Controller};

/// NodeImages (and missing ones) handled at once.
const CONCURRENCY: u16 = 3;

/// The registry's entry (started when its feature gate allows).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    // The daemon pulls the images.
    enabled: |gates| gates.enabled(Gate::KruiseDaemon),
    start: |shared| Box::pin(run(shared.clone())),
};

/// Runs until the shared shutdown token is cancelled.
pub async fn run(shared: Shared) {
    let recorder = shared.recorder(CONTROLLER_NAME);
    let Shared {
        client,
        metrics,
        shutdown,
        ..
    } = shared;
    let (nodes, node_writer) = reflector::store::<Node>();
    let node_events = runner::watch(Api::<Node>::all(client.clone()))
        .reflect(node_writer)
        .touched_objects();
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(Api::<NodeImage>::all(client.clone())),
        metrics,
        shutdown.clone(),
    )
    .concurrency(CONCURRENCY);
    // A Node event concerns the NodeImage of the same name, which may not exist yet: those are
    // handled by `ensure_for_node` below, outside the applier (it only sees cached objects).
    let (node_tx, node_rx) = futures::channel::mpsc::unbounded::<Arc<Node>>();
    let retry_tx = node_tx.clone();
    let node_triggers = node_events.filter_map(move |ev| {
        let tx = node_tx.clone();
        async move {
            match ev {
                Ok(n) => {
                    let name = n.name_any();
                    let _ = tx.unbounded_send(Arc::new(n));
                    Some(Ok(ReconcileRequest::from(ObjectRef::<NodeImage>::new(
                        &name,
                    ))))
                }
                Err(e) => Some(Err(e)),
            }
        }
    });
    // A deleted job concerns every NodeImage that carries one of its tags.
    let job_store = ctl.store();
    let job_events = runner::watch(Api::<ImagePullJob>::all(client.clone())).flat_map(move |ev| {
        let refs: Vec<ObjectRef<NodeImage>> = match &ev {
            Ok(watcher::Event::Delete(job)) => {
                let uid = job.metadata.uid.clone().unwrap_or_default();
                job_store
                    .state()
                    .iter()
                    .filter(|ni| owned_by(ni, &uid))
                    .map(|ni| ObjectRef::from_obj(ni.as_ref()))
                    .collect()
            }
            _ => Vec::new(),
        };
        futures::stream::iter(refs)
    });

    let ctx = Arc::new(Context {
        client: client.clone(),
        nodes: nodes.clone(),
        recorder,
    });

    let creator_ctx = ctx.clone();
    let creator_shutdown = shutdown.clone();
    let creator = async move {
        let nodes_synced = creator_ctx.nodes.wait_until_ready();
        let _ = nodes_synced.await;
        node_rx
            .take_until(creator_shutdown.cancelled_owned())
            .for_each_concurrent(usize::from(CONCURRENCY), |node| {
                let ctx = creator_ctx.clone();
                let retry_tx = retry_tx.clone();
                async move {
                    let wait = match ensure_for_node(&ctx, &node).await {
                        Ok(w) => w,
                        Err(e) => {
                            tracing::warn!(node = %node.name_any(), error = %e, "failed to ensure NodeImage");
                            Some(Duration::from_secs(5))
                        }
                    };
                    if let Some(wait) = wait {
                        // Look again later with the cached (freshest) copy of the node.
                        tokio::spawn(async move {
                            tokio::time::sleep(wait + Duration::from_millis(200)).await;
                            if let Some(n) = ctx.nodes.get(&ObjectRef::new(&node.name_any())) {
                                let _ = retry_tx.unbounded_send(n);
                            }
                        });
                    }
                }
            })
            .await;
    };

    let controller = ctl
        .trigger(node_triggers)
        .trigger_refs(job_events)
        .run(reconcile, ctx);
    tokio::join!(controller, creator);
}

fn owned_by(ni: &NodeImage, uid: &str) -> bool {
    ni.spec.images.values().any(|i| {
        i.tags.iter().any(|t| {
            t.owner_references
                .iter()
                .any(|r| r.uid.as_deref() == Some(uid))
        })
    })
}
