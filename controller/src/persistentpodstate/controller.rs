//! Wiring of the PersistentPodState controller on the shared [`runner`](crate::runner): the
//! PersistentPodState watch; the Pod events of the workloads a PersistentPodState targets
//! (StatefulSets, and the kinds `PPS_Watch_Custom_Workload_WhiteList` lists); and
//! one metadata watch per StatefulSet kind (apps/v1 and Advanced), which both generates the
//! PersistentPodStates their annotations ask for and wakes the one targeting a changed
//! StatefulSet (its replicas decide which states are kept).

use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::apps::v1::StatefulSet as AppsStatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::PersistentPodState;
use kruise_api::apps::v1beta1::StatefulSet as AdvancedStatefulSet;
use kruise_api::policy::v1alpha1::TargetReference;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::context::{CONTROLLER_NAME, Context, GENERATOR_METRIC_NAME, METRIC_NAME};
use super::generate::{Generator, generate, target_of};
use super::reconcile::reconcile;
use crate::podcache::PodEvent;
use crate::registry;
use crate::runner::{self, Controller};

/// Reconciles of different PersistentPodStates at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;

/// A StatefulSet changed: its namespace and what a PersistentPodState targeting it names.
type Changed = (String, TargetReference);

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| {
        Box::pin(run(
            Arc::new(shared.base(CONTROLLER_NAME)),
            shared.shutdown.clone(),
        ))
    },
};

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let api: Api<PersistentPodState> = ctx.watched();
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shutdown.clone(),
    )
    .concurrency(CONCURRENCY);
    let store = ctl.store();
    let pod_store = store.clone();
    let (tx, rx) = mpsc::unbounded::<Changed>();
    let gen_ = Arc::new(Generator::new(ctx.clone(), store.clone()));
    let advanced = generator::<AdvancedStatefulSet>(gen_.clone(), tx.clone(), shutdown.clone());
    let apps = generator::<AppsStatefulSet>(gen_, tx, shutdown);
    let states = ctl
        .trigger_refs(
            ctx.pods
                .targets(move |ev| pod_event_targets(&pod_store, ev.clone())),
        )
        .trigger_refs(
            rx.flat_map(move |(ns, target)| futures::stream::iter(targeting(&store, &ns, &target))),
        )
        .run(reconcile, ctx);
    tokio::join!(states, advanced, apps);
}

/// The generation from StatefulSets of kind `K`; every change of one is also sent to `tx`.
async fn generator<K>(
    gen_: Arc<Generator>,
    tx: mpsc::UnboundedSender<Changed>,
    shutdown: CancellationToken,
) where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    // Metadata only: the annotations and the UID are all the generation reads.
    let meta: Api<PartialObjectMeta<K>> = gen_.ctx.watched();
    let events = watcher(meta, watcher::Config::default()).default_backoff();
    Controller::<PartialObjectMeta<K>>::watching(
        GENERATOR_METRIC_NAME,
        events,
        gen_.ctx.metrics.clone(),
        shutdown,
    )
    .inspect({
        let gen_ = gen_.clone();
        move |ev| {
            if let Ok(watcher::Event::Delete(o)) = ev {
                gen_.forget(o.metadata.uid.as_deref().unwrap_or_default());
            }
            if let Ok(watcher::Event::Apply(o) | watcher::Event::Delete(o)) = ev {
                let _ = tx.unbounded_send((
                    o.namespace().unwrap_or_default(),
                    target_of::<K>(&o.name_any()),
                ));
            }
        }
    })
    .run(generate::<K>, gen_)
    .await;
}

/// The PersistentPodStates of `ns` targeting `target` (one, as the webhook allows).
fn targeting(
    store: &reflector::Store<PersistentPodState>,
    ns: &str,
    target: &TargetReference,
) -> Vec<ObjectRef<PersistentPodState>> {
    store
        .state()
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns))
        .filter(|p| p.spec.target_reference.same_workload(target))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// Which PersistentPodStates a Pod event concerns: the one targeting the Pod's controller — a
/// StatefulSet, or a custom kind whose whitelisting the reconcile checks (upstream
/// `enqueueRequestForPod`).
fn pod_event_targets(
    store: &reflector::Store<PersistentPodState>,
    ev: PodEvent,
) -> Vec<ObjectRef<PersistentPodState>> {
    let pod: Arc<Pod> = match ev {
        PodEvent::Applied(p) | PodEvent::Deleted(p) => p,
        PodEvent::Resync => {
            return store
                .state()
                .iter()
                .map(|p| ObjectRef::from_obj(p.as_ref()))
                .collect();
        }
    };
    let Some(owner) = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    else {
        return Vec::new();
    };
    let target = TargetReference {
        api_version: owner.api_version.clone(),
        kind: owner.kind.clone(),
        name: owner.name.clone(),
    };
    targeting(
        store,
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        &target,
    )
}
