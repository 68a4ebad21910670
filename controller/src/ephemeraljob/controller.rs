//! Wiring of the EphemeralJob controller on the shared [`runner`](crate::runner): the
//! EphemeralJob watch (forgetting the expectations of deleted jobs), and the Pod events of the
//! shared cache mapped to the unfinished jobs whose selector picks the Pod (upstream
//! `podHandler`).

use std::sync::Arc;

use kruise_api::apps::v1alpha1::EphemeralJob;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;

use super::context::METRIC_NAME;
pub use super::context::{CONTROLLER_NAME, Context};
pub use super::error::Error;
use super::plan;
pub use super::reconcile::reconcile;
use crate::podcache::PodEvent;
use crate::registry::{self, Shared};
use crate::runner::{self, Controller};

/// Reconciles of different EphemeralJobs at once.
const CONCURRENCY: u16 = 3;

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(shared.clone())),
};

/// Run the EphemeralJob controller until `shutdown` is cancelled.
pub async fn run(shared: Shared) {
    let ctx = Arc::new(Context::new(&shared));
    let api: Api<EphemeralJob> = ctx.watched();
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shared.shutdown,
    )
    .concurrency(CONCURRENCY)
    .backoff(ctx.backoff.clone());
    ctx.metrics.workloads.ephemeraljobs.set(ctl.store());
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
