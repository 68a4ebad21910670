//! Wiring of the EphemeralJob controller on the shared [`runner`](crate::runner): the
//! EphemeralJob watch (forgetting the expectations of deleted jobs), and the Pod events of the
//! shared cache mapped to the unfinished jobs whose selector picks the Pod (upstream
//! `podHandler`).

use std::sync::Arc;

use kruise_api::apps::v1alpha1::EphemeralJob;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use super::context::METRIC_NAME;
pub use super::context::{CONTROLLER_NAME, Context};
pub use super::error::Error;
use super::plan;
pub use super::reconcile::reconcile;
use crate::metrics::Metrics;
use crate::podcache::{PodCache, PodEvent};
use crate::runner::{self, Controller};

/// Reconciles of different EphemeralJobs at once.
const CONCURRENCY: u16 = 3;

/// [`run`] from the manager's shared handles (cloned here, so the wiring stays one line).
pub fn start(
    client: &Client,
    pods: &PodCache,
    metrics: &Arc<Metrics>,
    instance: &Option<String>,
    namespace: &Option<String>,
    shutdown: &CancellationToken,
) -> impl Future<Output = ()> + use<> {
    run(
        client.clone(),
        pods.clone(),
        metrics.clone(),
        instance.clone(),
        namespace.clone(),
        shutdown.clone(),
    )
}

/// Run the EphemeralJob controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    instance: Option<String>,
    namespace: Option<String>,
    shutdown: CancellationToken,
) {
    let ctx = Arc::new(Context::new(
        client.clone(),
        pods,
        metrics,
        instance,
        namespace,
    ));
    let api: Api<EphemeralJob> = match &ctx.namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY)
    .backoff(ctx.backoff.clone());
    let exp_ctx = ctx.clone();
    let ctl = ctl.inspect(move |ev| {
        if let Ok(watcher::Event::Delete(job)) = ev {
            exp_ctx.injections.delete(&runner::object_key(job));
        }
    });
    let store = ctl.store();
    let pod_targets = ctx
        .pods
        .targets(move |ev| pod_event_targets(&store, ev.clone()));
    ctl.trigger_refs(pod_targets).run(reconcile, ctx).await;
}

/// The unfinished jobs a Pod event concerns: those whose selector picks the Pod.
fn pod_event_targets(
    store: &reflector::Store<EphemeralJob>,
    ev: PodEvent,
) -> Vec<ObjectRef<EphemeralJob>> {
    let pod = match ev {
        PodEvent::Applied(p) | PodEvent::Deleted(p) => p,
        PodEvent::Resync => {
            return store
                .state()
                .iter()
                .map(|j| ObjectRef::from_obj(j.as_ref()))
                .collect();
        }
    };
    store
        .state()
        .iter()
        .filter(|j| !plan::is_finished(j) && plan::selects(j, &pod))
        .map(|j| ObjectRef::from_obj(j.as_ref()))
        .collect()
}
