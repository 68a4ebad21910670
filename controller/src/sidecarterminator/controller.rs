//! Wiring of the SidecarTerminator on the shared [`runner`](crate::runner): the Pod cache's
//! store, woken by each Pod that [`plan::is_interesting`] accepts (upstream's
//! `enqueueRequestForPod`, which enqueues only those on create and update).

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;

use super::context::{Context, METRIC_NAME};
use super::plan;
use super::reconcile::reconcile;
use crate::registry::{self, Shared};
use crate::runner::Controller;
use kruise_api::features::Gate;

/// Reconciles of different Pods at once (upstream's `--sidecarterminator-workers` default).
const CONCURRENCY: u16 = 3;

/// The registry's entry (started when its feature gate allows).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: "sidecarterminator",
    enabled: |gates| {
        // It needs the daemon, which carries out its requests.
        gates.enabled(Gate::KruiseDaemon) && gates.enabled(Gate::SidecarTerminator)
    },
    start: |shared| Box::pin(run(shared.clone())),
};

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(shared: Shared) {
    let ctx = Arc::new(Context::new(&shared));
    let Shared {
        pods,
        metrics,
        shutdown,
        ..
    } = shared;
    let wanted =
        pods.live_targets(|p| plan::is_interesting(p).then(|| ObjectRef::from_obj(p.as_ref())));
    Controller::on_store(METRIC_NAME, pods.store().clone(), metrics, shutdown)
        .concurrency(CONCURRENCY)
        .trigger_refs(wanted)
        .run(reconcile, ctx)
        .await;
}
