//! Wiring of the ContainerRecreateRequest controller on the shared runner: the requests' watch,
//! and the Pod events of the shared cache mapped to the requests for that Pod.

use std::sync::Arc;

use kruise_api::apps::v1beta1::ContainerRecreateRequest;
use kruise_api::features::Gate;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::context::{Context, METRIC_NAME};
use super::reconcile::reconcile;
use crate::podcache::PodEvent;
use crate::registry::{self, Shared};
use crate::runner::Controller;
use crate::stored;

/// Requests handled at once.
const CONCURRENCY: u16 = 3;

/// The registry's entry (started when its feature gate allows).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    // The daemon does the recreating.
    enabled: |gates| gates.enabled(Gate::KruiseDaemon),
    start: |shared| Box::pin(run(shared.clone())),
};

/// Runs until the shared shutdown token is cancelled.
pub async fn run(shared: Shared) {
    let Shared {
        client,
        pods,
        metrics,
        shutdown,
        ..
    } = shared;
    // At the storage version: no conversion webhook call per watch event.
    let stored = stored::of::<ContainerRecreateRequest>();
    let events = stored.watch(stored.api(client.clone(), None), watcher::Config::default());
    let ctl = Controller::watching(METRIC_NAME, events, metrics, shutdown).concurrency(CONCURRENCY);
    // A pod change concerns the requests for that pod (snapshot, gone pod, readiness).
    let by_pod = ctl.store();
    let pod_events = pods.targets(move |ev| -> Vec<ObjectRef<ContainerRecreateRequest>> {
        let pod = match ev {
            PodEvent::Applied(p) | PodEvent::Deleted(p) => Some(p),
            PodEvent::Resync => None,
        };
        by_pod
            .state()
            .into_iter()
            .filter(|c| {
                pod.is_none_or(|p| {
                    p.metadata.namespace == c.metadata.namespace
                        && p.metadata.name.as_deref() == Some(c.spec.pod_name.as_str())
                })
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect()
    });
    let ctx = Arc::new(Context {
        client,
        pods,
        stored,
    });
    ctl.trigger_refs(pod_events).run(reconcile, ctx).await;
}
