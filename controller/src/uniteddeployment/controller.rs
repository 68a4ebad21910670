//! Wiring of the UnitedDeployment controller on the shared [`runner`](crate::runner): the
//! UnitedDeployment watch, the subset workloads of the four kinds mapped to their controller
//! owner (upstream's `EnqueueRequestForOwner` watches), and the Pods of subsets mapped to the
//! UnitedDeployments whose selector matches them (their revision labels feed the status).

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{SubsetKind, UnitedDeployment};
use kruise_api::keys;
use kube::api::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef};
use kube::{Api, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::context::{Context, METRIC_NAME};
use super::reconcile::reconcile;
use crate::podcache::PodEvent;
use crate::registry;
use crate::runner::{self, Controller};

/// Reconciles of different UnitedDeployments at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(Arc::new(Context::new(shared)), shared.shutdown.clone())),
};

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let api: Api<UnitedDeployment> = ctx.watched();
    let mut ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY);
    for kind in SubsetKind::ALL {
        let children = runner::watch(ctx.subset_api(kind, ctx.watch_namespace.as_deref()))
            .touched_objects()
            .filter_map(|r| std::future::ready(r.ok()))
            .flat_map(|obj| futures::stream::iter(owner_of(&obj)));
        ctl = ctl.trigger_refs(children);
    }
    let store = ctl.store();
    ctx.metrics.workloads.uniteddeployments.set(store.clone());
    ctl.trigger_refs(
        ctx.pods
            .targets(move |ev| pod_event_targets(&store, ev.clone())),
    )
    .run(reconcile, ctx)
    .await;
}

/// The UnitedDeployment controlling a subset workload.
fn owner_of(obj: &DynamicObject) -> Option<ObjectRef<UnitedDeployment>> {
    let ns = obj.namespace()?;
    obj.owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "UnitedDeployment")
        .map(|o| ObjectRef::new(&o.name).within(&ns))
}

/// The UnitedDeployments a Pod event concerns: those of its namespace whose selector matches a
/// Pod of a subset.
fn pod_event_targets(
    store: &reflector::Store<UnitedDeployment>,
    ev: PodEvent,
) -> Vec<ObjectRef<UnitedDeployment>> {
    let pod: Arc<Pod> = match ev {
        PodEvent::Applied(p) | PodEvent::Deleted(p) => p,
        PodEvent::Resync => {
            return store
                .state()
                .iter()
                .map(|u| ObjectRef::from_obj(u.as_ref()))
                .collect();
        }
    };
    let Some(labels) = pod.metadata.labels.as_ref() else {
        return Vec::new();
    };
    if !labels.contains_key(keys::SUBSET_NAME_LABEL) {
        return Vec::new();
    }
    let ns = pod.metadata.namespace.as_deref();
    store
        .state()
        .iter()
        .filter(|u| u.metadata.namespace.as_deref() == ns)
        .filter(|u| {
            u.spec
                .selector
                .as_ref()
                .is_some_and(|s| kruise_api::selector::matches(s, labels))
        })
        .map(|u| ObjectRef::from_obj(u.as_ref()))
        .collect()
}
