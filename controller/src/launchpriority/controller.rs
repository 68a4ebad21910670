//! Wiring of the launch-priority controller on the shared runner: the Pod cache's store, woken
//! by each Pod whose containers still wait for their barrier.

use std::sync::Arc;

use kube::runtime::reflector::ObjectRef;

use super::context::{Context, METRIC_NAME};
use super::plan;
use super::reconcile::reconcile;
use crate::registry::{self, Shared};
use crate::runner::Controller;

/// Pods handled at once (upstream's worker count).
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
    let wanted = pods.live_targets(|p| plan::wants_reconcile(p).then(|| ObjectRef::from_obj(&**p)));
    let ctx = Arc::new(Context {
        client: shared.client,
    });
    // The runner dedupes requests per pod, so one pod is never handled twice at once.
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
