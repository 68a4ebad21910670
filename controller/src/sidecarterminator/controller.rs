//! Wiring of the SidecarTerminator on the shared [`runner`](crate::runner): the Pod cache's
//! store, woken by each Pod that [`plan::is_interesting`] accepts (upstream's
//! `enqueueRequestForPod`, which enqueues only those on create and update).

use std::sync::Arc;

use kube::Client;
use kube::runtime::reflector::ObjectRef;
use tokio_util::sync::CancellationToken;

use super::context::{Context, METRIC_NAME};
use super::plan;
use super::reconcile::reconcile;
use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::runner::Controller;

/// Reconciles of different Pods at once (upstream's `--sidecarterminator-workers` default).
const CONCURRENCY: u16 = 3;

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let wanted =
        pods.live_targets(|p| plan::is_interesting(p).then(|| ObjectRef::from_obj(p.as_ref())));
    // The Events' reporting instance, as the SidecarSet and NodeImage controllers name it.
    let ctx = Arc::new(Context::new(client, std::env::var("POD_NAME").ok()));
    Controller::on_store(METRIC_NAME, pods.store().clone(), metrics, shutdown)
        .concurrency(CONCURRENCY)
        .trigger_refs(wanted)
        .run(reconcile, ctx)
        .await;
}
