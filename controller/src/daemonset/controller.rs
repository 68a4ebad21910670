//! Wiring of the Advanced DaemonSet controller on the shared [`runner`](crate::runner): the
//! DaemonSet watch, a Node watch whose store the reconcile reads (every Node change concerns
//! every DaemonSet: it may gain, keep or lose a Pod there), and the Pod events of the shared
//! cache mapped to their owner.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kruise_api::apps::v1beta1::DaemonSet;
use kruise_api::keys;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};

use super::context::METRIC_NAME;
pub use super::context::{CONTROLLER_NAME, Context};
pub use super::error::Error;
pub use super::reconcile::reconcile;
use crate::expectations::Cached;
use crate::podcache::PodEvent;
use crate::registry::{self, Shared};
use crate::runner::{self, Controller};
use crate::workload::podutil;

/// Reconciles of different DaemonSets running at once.
const CONCURRENCY: u16 = 3;

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(shared.clone())),
};

/// Run the Advanced DaemonSet controller until `shutdown` is cancelled.
pub async fn run(shared: Shared) {
    let (node_store, node_writer) = reflector::store::<Node>();
    let node_events = reflector::reflector(
        node_writer,
        watcher(
            Api::<Node>::all(shared.client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .touched_objects();
    let ctx = Arc::new(Context::new(&shared, node_store));
    let shutdown = shared.shutdown;
    // Reconciles read revisions from the cache: before its first list every DaemonSet would look as
    // if it had none.
    tokio::select! {
        _ = ctx.revisions.wait_synced() => {}
        _ = shutdown.cancelled() => return,
    }
    let api: Api<DaemonSet> = ctx.watched();
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY)
    .backoff(ctx.backoff.clone());
    let (exp_ctx, _) = (ctx.clone(), ());
    let ctl = ctl.inspect(move |ev| {
        if let Ok(watcher::Event::Delete(ds)) = ev {
            let key = format!("{}/{}", ds.namespace().unwrap_or_default(), ds.name_any());
            exp_ctx.scale_exp.delete(&key);
            exp_ctx.quiet.forget(&key);
        }
    });
    let ds_store = ctl.store();
    ctx.metrics.workloads.daemonsets.set(ds_store.clone());
    let node_targets = node_events.flat_map(move |ev: Result<Node, watcher::Error>| {
        let refs: Vec<ObjectRef<DaemonSet>> = match ev {
            Ok(_) => ds_store
                .state()
                .iter()
                .map(|d| ObjectRef::from_obj(d.as_ref()))
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "node watch error");
                Vec::new()
            }
        };
        futures::stream::iter(refs)
    });
    let (pod_ctx, store) = (ctx.clone(), ctl.store());
    let pod_targets = ctx
        .pods
        .targets(move |ev| pod_event_targets(&pod_ctx, &store, ev.clone()));
    ctl.trigger_refs(node_targets)
        .trigger_refs(pod_targets)
        .run(reconcile, ctx)
        .await;
}

/// Which DaemonSets a Pod event concerns; observes scale expectations on the way.
fn pod_event_targets(
    ctx: &Context,
    store: &reflector::Store<DaemonSet>,
    ev: PodEvent,
) -> Vec<ObjectRef<DaemonSet>> {
    let (pod, deleted) = match ev {
        PodEvent::Applied(p) => (p, false),
        PodEvent::Deleted(p) => (p, true),
        PodEvent::Resync => {
            return store
                .state()
                .iter()
                .map(|d| ObjectRef::from_obj(d.as_ref()))
                .collect();
        }
    };
    let Some(owner) = pod
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
    else {
        return Vec::new();
    };
    if owner.kind != DaemonSet::kind(&()) || !owner.api_version.starts_with(keys::APPS_GROUP) {
        return Vec::new();
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let key = format!("{ns}/{}", owner.name);
    let cached = ctx.pods.cached(pod.as_ref());
    ctx.scale_exp
        .observe_event(&key, podutil::name(&pod), cached, deleted);
    if cached == Cached::Absent
        && let Some(uid) = pod.metadata.uid.as_deref()
    {
        ctx.rv_exp.delete(uid);
    }
    vec![ObjectRef::new(&owner.name).within(&ns)]
}
