//! Wiring of the WorkloadSpread controller on the shared [`runner`](crate::runner): the
//! WorkloadSpread watch, and the Pod events of Pods a WorkloadSpread placed (upstream's
//! `podEventHandler`, which follows the same annotation).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{MatchedWorkloadSpread, WorkloadSpread};
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef};
use tokio_util::sync::CancellationToken;

use super::context::{CONTROLLER_NAME, Context, METRIC_NAME};
use super::reconcile::reconcile;
use crate::podcache::PodEvent;
use crate::registry;
use crate::runner::{self, Controller};
use kruise_api::features::Gate;

/// Reconciles of different WorkloadSpreads at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;

/// The registry's entry (started when its feature gate allows).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: "workloadspread",
    enabled: |gates| gates.enabled(Gate::WorkloadSpread),
    start: |shared| {
        Box::pin(run(
            Arc::new(shared.base(CONTROLLER_NAME)),
            shared.shutdown.clone(),
        ))
    },
};

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let api: Api<WorkloadSpread> = ctx.watched();
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let store = ctl.store();
    ctx.metrics.workloads.workloadspreads.set(store.clone());
    ctl.trigger_refs(
        ctx.pods
            .targets(move |ev| pod_event_targets(&store, ev.clone())),
    )
    .run(reconcile, ctx)
    .await;
}

/// The WorkloadSpread a Pod event concerns: the one its annotation names.
fn pod_event_targets(
    store: &reflector::Store<WorkloadSpread>,
    ev: PodEvent,
) -> Vec<ObjectRef<WorkloadSpread>> {
    let pod: Arc<Pod> = match ev {
        PodEvent::Applied(p) | PodEvent::Deleted(p) => p,
        PodEvent::Resync => {
            return store
                .state()
                .iter()
                .map(|w| ObjectRef::from_obj(w.as_ref()))
                .collect();
        }
    };
    let Some(m) = MatchedWorkloadSpread::of(pod.metadata.annotations.as_ref()) else {
        return Vec::new();
    };
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    vec![ObjectRef::new(&m.name).within(&ns)]
}
