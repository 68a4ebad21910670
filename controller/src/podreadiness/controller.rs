//! Wiring of the pod-readiness controller on the shared runner: the Pod cache's store, woken by
//! each Pod that still needs the condition.

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;

use super::context::{Context, METRIC_NAME};
use super::plan::{Recent, needs_condition};
use super::reconcile::reconcile;
use crate::registry::{self, Shared};
use crate::runner::Controller;

/// Pods handled at once.
const CONCURRENCY: u16 = 4;

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(shared.clone())),
};

/// Runs until the shared shutdown token is cancelled.
pub async fn run(shared: Shared) {
    let pods = shared.pods;
    let wanted = pods.live_targets(|p| needs_condition(p).then(|| ObjectRef::from_obj(p.as_ref())));
    let ctx = Arc::new(Context {
        client: shared.client,
        recent: Recent::default(),
    });
    Controller::on_store(
        METRIC_NAME,
        pods.store().clone(),
        shared.metrics,
        shared.shutdown,
    )
    .concurrency(CONCURRENCY)
    .trigger_refs(wanted)
    .run(reconcile, ctx)
    .await;
}
