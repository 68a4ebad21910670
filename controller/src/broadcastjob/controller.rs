//! Wiring of the BroadcastJob controller on the shared [`runner`](crate::runner): the
//! BroadcastJob watch (forgetting the expectations of deleted jobs), a Node watch whose store
//! the reconcile reads, and the Pod events of the shared cache mapped to their job (upstream
//! `podEventHandler` and `enqueueBroadcastJobForNode`).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kruise_api::apps::v1beta1::BroadcastJob;
use kruise_api::keys;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};

use super::context::METRIC_NAME;
pub use super::context::{CONTROLLER_NAME, Context};
pub use super::error::Error;
use super::plan;
pub use super::reconcile::reconcile;
use crate::podcache::PodEvent;
use crate::registry::{self, Shared};
use crate::runner::{self, Controller};
use crate::workload::{nodes, podutil};

/// Reconciles of different BroadcastJobs running at once (upstream's `--broadcastjob-workers`
/// default).
const CONCURRENCY: u16 = 3;

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(shared.clone())),
};

/// Run the BroadcastJob controller until `shutdown` is cancelled.
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
    let api: Api<BroadcastJob> = ctx.watched();
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shared.shutdown,
    )
    .concurrency(CONCURRENCY)
    .backoff(ctx.backoff.clone());
    ctx.metrics.workloads.broadcastjobs.set(ctl.store());
    let exp_ctx = ctx.clone();
    let ctl = ctl.inspect(move |ev| {
        if let Ok(watcher::Event::Delete(job)) = ev {
            exp_ctx.scale_exp.delete(&format!(
                "{}/{}",
                job.namespace().unwrap_or_default(),
                job.name_any()
            ));
        }
    });
    let (node_ctx, job_store) = (ctx.clone(), ctl.store());
    let node_targets = node_events.flat_map(move |ev: Result<Node, watcher::Error>| {
        let refs = match ev {
            Ok(node) => node_event_targets(&node_ctx, &job_store, &node),
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

/// The running jobs a Node change concerns: those whose Pod may run there (it may get one) and
/// those with a Pod there (it may have to go).
fn node_event_targets(
    ctx: &Context,
    store: &reflector::Store<BroadcastJob>,
    node: &Node,
) -> Vec<ObjectRef<BroadcastJob>> {
    let name = node.name_any();
    let pods = ctx.pods.store().state();
    store
        .state()
        .iter()
        .filter(|job| !plan::is_finished(job))
        .filter(|job| {
            let template = job.spec.template.spec.clone().unwrap_or_default();
            let uid = job.uid();
            plan::fits(&template, node, false).is_ok()
                || pods.iter().any(|p| {
                    uid.is_some()
                        && crate::podcache::controller_uid(p) == uid.as_deref()
                        && nodes::target_node(p) == Some(name.as_str())
                })
        })
        .map(|job| ObjectRef::from_obj(job.as_ref()))
        .collect()
}

/// Which job a Pod event concerns; observes scale expectations on the way.
fn pod_event_targets(
    ctx: &Context,
    store: &reflector::Store<BroadcastJob>,
    ev: PodEvent,
) -> Vec<ObjectRef<BroadcastJob>> {
    let (pod, deleted) = match ev {
        PodEvent::Applied(p) => (p, false),
        PodEvent::Deleted(p) => (p, true),
        PodEvent::Resync => {
            return store
                .state()
                .iter()
                .map(|j| ObjectRef::from_obj(j.as_ref()))
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
    if owner.kind != BroadcastJob::kind(&()) || !owner.api_version.starts_with(keys::APPS_GROUP) {
        return Vec::new();
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let key = format!("{ns}/{}", owner.name);
    let cached = ctx.pods.cached(pod.as_ref());
    ctx.scale_exp
        .observe_event(&key, podutil::name(&pod), cached, deleted);
    vec![ObjectRef::new(&owner.name).within(&ns)]
}
