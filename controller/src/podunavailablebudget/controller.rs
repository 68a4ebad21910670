//! Wiring of the PodUnavailableBudget controller on the shared [`runner`](crate::runner): the
//! budget watch; the Pod events that concern a budget (the one a Pod names, those whose
//! selector matches it, and those targeting its controller); and the workloads a budget counts
//! (Deployment, StatefulSet, CloneSet, Advanced StatefulSet), whose creation, deletion or
//! change of replicas moves the expected count before any of their Pods change: without it, a
//! deleted Deployment's Pods stay protected and the garbage collector's deletes are refused.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::{self, BoxStream};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{CloneSet, StatefulSet as AdvancedStatefulSet};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::{PodUnavailableBudget, TargetReference};
use kruise_api::selector;
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use tokio_util::sync::CancellationToken;

use super::context::{Context, METRIC_NAME};
use super::plan::{WorkloadChange, replicas_changed, workload_budgets};
use super::reconcile::reconcile;
use crate::podcache::PodEvent;
use crate::registry;
use crate::runner::{self, Controller};
use kruise_api::features::Gate;

/// Reconciles of different budgets at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;

/// The registry's entry (started when its feature gate allows).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: "podunavailablebudget",
    enabled: |gates| {
        // Either gate starts it, as upstream.
        gates.enabled(Gate::PodUnavailableBudgetDeleteGate)
            || gates.enabled(Gate::PodUnavailableBudgetUpdateGate)
    },
    start: |shared| Box::pin(run(Arc::new(Context::new(shared)), shared.shutdown.clone())),
};

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let api: Api<PodUnavailableBudget> = ctx.watched();
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let store = ctl.store();
    ctx.metrics.workloads.budgets.set(store.clone());
    let workloads = [
        ApiResource::erase::<Deployment>(&()),
        ApiResource::erase::<StatefulSet>(&()),
        // At the storage version: no conversion webhook call per CloneSet event.
        crate::stored::of::<CloneSet>().resource().clone(),
        ApiResource::erase::<AdvancedStatefulSet>(&()),
    ]
    .map(|ar| workload_events(&ctx, ar, store.clone()));
    let pod_store = store.clone();
    ctl.trigger_refs(
        ctx.pods
            .targets(move |ev| pod_event_targets(&pod_store, ev.clone())),
    )
    .trigger_refs(stream::select_all(workloads))
    .run(reconcile, ctx)
    .await;
}

/// The budgets to wake for the events of one workload kind: a workload created, deleted, or
/// whose `spec.replicas` changed (upstream's predicates). The first list only records the
/// replicas: every budget is reconciled at start anyway.
fn workload_events(
    ctx: &Context,
    ar: ApiResource,
    store: reflector::Store<PodUnavailableBudget>,
) -> BoxStream<'static, ObjectRef<PodUnavailableBudget>> {
    let api: Api<DynamicObject> = match &ctx.watch_namespace {
        Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
        None => Api::all_with(ctx.client.clone(), &ar),
    };
    // UID → the replicas last seen, for the replicas predicate.
    let mut seen: HashMap<String, Option<i64>> = HashMap::new();
    let mut listed = false;
    watcher(api, watcher::Config::default())
        .default_backoff()
        .flat_map(move |ev| {
            let changed = match ev {
                Ok(watcher::Event::Apply(o)) => {
                    let replicas = o.data["spec"]["replicas"].as_i64();
                    let before = seen.insert(o.metadata.uid.clone().unwrap_or_default(), replicas);
                    replicas_changed(before, replicas).then_some(o)
                }
                // A relist after a broken watch: only what changed meanwhile.
                Ok(watcher::Event::InitApply(o)) => {
                    let replicas = o.data["spec"]["replicas"].as_i64();
                    let before = seen.insert(o.metadata.uid.clone().unwrap_or_default(), replicas);
                    (listed && replicas_changed(before, replicas)).then_some(o)
                }
                Ok(watcher::Event::Delete(o)) => {
                    seen.remove(o.metadata.uid.as_deref().unwrap_or_default());
                    Some(o)
                }
                Ok(watcher::Event::InitDone) => {
                    listed = true;
                    None
                }
                Ok(watcher::Event::Init) => None,
                Err(e) => {
                    tracing::debug!(error = %e, kind = %ar.kind, "workload watch failed, retrying");
                    None
                }
            };
            let refs = changed.map_or_else(Vec::new, |o| {
                let change = change_of(&ar, &o);
                let budgets = store.state();
                workload_budgets(budgets.iter().map(AsRef::as_ref), &change)
                    .into_iter()
                    .map(ObjectRef::from_obj)
                    .collect()
            });
            stream::iter(refs)
        })
        .boxed()
}

/// What a budget matches a workload by: its namespace, reference and Pod template labels.
fn change_of(ar: &ApiResource, o: &DynamicObject) -> WorkloadChange {
    let template_labels =
        serde_json::from_value(o.data["spec"]["template"]["metadata"]["labels"].clone())
            .unwrap_or_default();
    WorkloadChange {
        namespace: o.metadata.namespace.clone().unwrap_or_default(),
        target: TargetReference {
            api_version: ar.api_version.clone(),
            kind: ar.kind.clone(),
            name: o.metadata.name.clone().unwrap_or_default(),
        },
        template_labels,
    }
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
