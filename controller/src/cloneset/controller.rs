//! Wiring of the CloneSet controller on the shared [`runner`](crate::runner): the CloneSet
//! watch (with a hook that forgets the expectations of deleted CloneSets), the Pod events that
//! trigger its reconciles, three workers, and the backoff shared with its [`Context`]. The
//! reconcile is [`reconcile`] (re-exported from `super::reconcile`); its error policy is the
//! runner's, with the retry floor of [`Error`]'s [`ReconcileError`] impl.

use std::collections::BTreeSet;
use std::sync::Arc;

use kruise_api::apps::v1beta1::CloneSet;
use kruise_api::{keys, selector};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::context::METRIC_NAME;
pub use super::context::{CONTROLLER_NAME, Context};
pub use super::error::Error;
pub use super::reconcile::reconcile;
use crate::expectations::Cached;
use crate::podcache::PodEvent;
use crate::registry;
use crate::runner::Controller;
use crate::workload::podutil;

/// Reconciles of different CloneSets running at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(Arc::new(Context::new(shared)), shared.shutdown.clone())),
};

/// Run the CloneSet controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    // Reconciles read revisions and claims from the caches: before their first lists every
    // CloneSet would look as if it had none.
    tokio::select! {
        _ = async { tokio::join!(ctx.revisions.wait_synced(), ctx.pvcs.wait_synced()) } => {}
        _ = shutdown.cancelled() => return,
    }
    // At the storage version: no conversion webhook call per watch event.
    let api = ctx
        .stored
        .api(ctx.client.clone(), ctx.watch_namespace.as_deref());
    let events = ctx.stored.watch(api, watcher::Config::default());
    let ctl = Controller::watching(METRIC_NAME, events, ctx.metrics.clone(), shutdown)
        .concurrency(CONCURRENCY)
        .backoff(ctx.backoff.clone());
    ctx.metrics.workloads.clonesets.set(ctl.store());
    let (exp_ctx, store) = (ctx.clone(), ctl.store());
    let ctl = ctl.inspect(move |ev| forget_deleted(&exp_ctx, &store, ev));
    let (pod_ctx, store) = (ctx.clone(), ctl.store());
    ctl.trigger_refs(
        ctx.pods
            .targets(move |ev| pod_event_targets(&pod_ctx, &store, ev.clone())),
    )
    .run(reconcile, ctx)
    .await;
}

/// A deleted CloneSet will never be reconciled again: drop what it expected. After a relist
/// (`InitDone`), CloneSets deleted during the watch gap are dropped too.
fn forget_deleted(
    ctx: &Context,
    store: &reflector::Store<CloneSet>,
    ev: &Result<watcher::Event<CloneSet>, watcher::Error>,
) {
    match ev {
        Ok(watcher::Event::Delete(cs)) => {
            let key = format!("{}/{}", cs.namespace().unwrap_or_default(), cs.name_any());
            ctx.scale_exp.delete(&key);
            ctx.create_backoff.reset(&key);
            ctx.quiet.forget(&key);
            ctx.active.forget(&cs.uid().unwrap_or_default());
        }
        Ok(watcher::Event::InitDone) => {
            let exists = |key: &str| {
                key.split_once('/').is_some_and(|(ns, name)| {
                    store
                        .get(&ObjectRef::<CloneSet>::new(name).within(ns))
                        .is_some()
                })
            };
            ctx.scale_exp.retain_keys(exists);
            ctx.quiet.retain(exists);
            let uids: std::collections::HashSet<String> =
                store.state().iter().filter_map(|cs| cs.uid()).collect();
            ctx.active.retain(|uid| uids.contains(uid));
        }
        _ => {}
    }
}

/// Which CloneSets a pod event concerns; observes scale expectations on the way.
fn pod_event_targets(
    ctx: &Context,
    store: &reflector::Store<CloneSet>,
    ev: PodEvent,
) -> Vec<ObjectRef<CloneSet>> {
    let (pod, deleted) = match ev {
        PodEvent::Applied(p) => (p, false),
        PodEvent::Deleted(p) => (p, true),
        PodEvent::Resync => {
            // The events we missed are lost, the store is not: settle every pending expectation
            // against it before the CloneSets reconcile.
            for key in ctx.scale_exp.keys() {
                let n = ctx.observe_from_cache(&key);
                if n > 0 {
                    tracing::debug!(cloneset = %key, observed = n, "scale expectations observed from the cache after a resync");
                }
            }
            let live: BTreeSet<String> = ctx
                .pods
                .store()
                .state()
                .iter()
                .filter_map(|p| p.metadata.uid.clone())
                .collect();
            ctx.rv_exp.retain(|uid| live.contains(uid));
            return store
                .state()
                .iter()
                .map(|cs| ObjectRef::from_obj(cs.as_ref()))
                .collect();
        }
    };
    let Some(owner) = pod
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|o| o.controller == Some(true)))
    else {
        // An orphan concerns every CloneSet of its namespace that selects it (adoption).
        let ns = pod.metadata.namespace.as_deref();
        let empty = Default::default();
        let labels = podutil::labels(&pod).unwrap_or(&empty);
        return store
            .state()
            .iter()
            .filter(|cs| cs.metadata.namespace.as_deref() == ns)
            .filter(|cs| selector::matches(&cs.spec.selector, labels))
            .map(|cs| ObjectRef::from_obj(cs.as_ref()))
            .collect();
    };
    if owner.kind != CloneSet::kind(&()) || !owner.api_version.starts_with(keys::APPS_GROUP) {
        return Vec::new();
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let key = format!("{ns}/{}", owner.name);
    // Whatever the event, the store (updated before it was sent) tells what became of the pod:
    // there (its create is seen), terminating (its create and its delete are seen) or gone.
    // A delete event also proves the pod was created, even if we never saw it before.
    let cached = ctx.pods.cached(&pod);
    ctx.scale_exp
        .observe_event(&key, podutil::name(&pod), cached, deleted);
    // A pod that is gone will not be seen again: forget what we expected of its version.
    if cached == Cached::Absent
        && let Some(uid) = pod.metadata.uid.as_deref()
    {
        ctx.rv_exp.delete(uid);
    }
    vec![ObjectRef::new(&owner.name).within(&ns)]
}
