//! Wiring of the PodUnavailableBudget controller on the shared [`runner`](crate::runner): the
//! budget watch, and the Pod events that concern a budget (the one a Pod names, those whose
//! selector matches it, and those targeting its controller).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kruise_api::selector;
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef};
use tokio_util::sync::CancellationToken;

use super::context::{Context, METRIC_NAME};
use super::reconcile::reconcile;
use crate::podcache::PodEvent;
use crate::runner::{self, Controller};

/// Reconciles of different budgets at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let api: Api<PodUnavailableBudget> = match &ctx.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let store = ctl.store();
    ctl.trigger_refs(
        ctx.pods
            .targets(move |ev| pod_event_targets(&store, ev.clone())),
    )
    .run(reconcile, ctx)
    .await;
}

/// Which budgets a Pod event concerns (upstream `enqueueRequestForPod`, without its API
/// lookups: a targeted workload is recognised by the Pod's controller name, or a Deployment by
/// the name of the Pod's ReplicaSet).
fn pod_event_targets(
    store: &reflector::Store<PodUnavailableBudget>,
    ev: PodEvent,
) -> Vec<ObjectRef<PodUnavailableBudget>> {
    let pod = match ev {
        PodEvent::Applied(p) | PodEvent::Deleted(p) => p,
        PodEvent::Resync => {
            return store
                .state()
                .iter()
                .map(|b| ObjectRef::from_obj(b.as_ref()))
                .collect();
        }
    };
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    store
        .state()
        .iter()
        .filter(|b| b.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|b| concerns(b, &pod))
        .map(|b| ObjectRef::from_obj(b.as_ref()))
        .collect()
}

fn concerns(budget: &PodUnavailableBudget, pod: &Pod) -> bool {
    let named = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::PUB_RELATED_ANNOTATION));
    if named.is_some_and(|n| budget.metadata.name.as_ref() == Some(n)) {
        return true;
    }
    if let Some(sel) = &budget.spec.selector {
        let empty = Default::default();
        return selector::matches(sel, pod.metadata.labels.as_ref().unwrap_or(&empty));
    }
    let (Some(target), Some(owner)) = (
        &budget.spec.target_reference,
        pod.metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true)),
    ) else {
        return false;
    };
    owner.name == target.name
        || (target.kind == "Deployment"
            && owner.kind == "ReplicaSet"
            && owner
                .name
                .strip_prefix(&target.name)
                .is_some_and(|rest| rest.starts_with('-')))
}
