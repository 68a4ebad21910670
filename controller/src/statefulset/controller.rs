//! Wiring of the Advanced StatefulSet controller on the shared [`runner`](crate::runner): its
//! own watch (forgetting the expectations of deleted sets), the shared Pod cache's events
//! mapped to owning sets, three workers.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::StatefulSet;
use kruise_api::{keys, selector};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::context::METRIC_NAME;
pub use super::context::{CONTROLLER_NAME, Context};
pub use super::error::Error;
use super::identity::ordinal_of;
pub use super::reconcile::reconcile;
use crate::expectations::Cached;
use crate::podcache::{PodEvent, controller_uid};
use crate::registry;
use crate::runner::{self, Controller};
use crate::workload::podutil;

const CONCURRENCY: u16 = 3;

/// The registry's entry (always on).
pub const CONTROLLER: registry::Controller = registry::Controller {
    name: METRIC_NAME,
    enabled: registry::always,
    start: |shared| Box::pin(run(Arc::new(Context::new(shared)), shared.shutdown.clone())),
};

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    // Reconciles read revisions from the cache: before its first list every set would look as
    // if it had none.
    tokio::select! {
        _ = ctx.revisions.wait_synced() => {}
        _ = shutdown.cancelled() => return,
    }
    let api: Api<StatefulSet> = ctx.watched();
    let ctl = Controller::watching(
        METRIC_NAME,
        runner::watch(api),
        ctx.metrics.clone(),
        shutdown,
    )
    .concurrency(CONCURRENCY)
    .backoff(ctx.backoff.clone());
    ctx.metrics.workloads.statefulsets.set(ctl.store());
    let exp_ctx = ctx.clone();
    let ctl = ctl.inspect(move |ev| {
        if let Ok(watcher::Event::Delete(sts)) = ev {
            let key = format!("{}/{}", sts.namespace().unwrap_or_default(), sts.name_any());
            exp_ctx.scale_exp.delete(&key);
            exp_ctx.quiet.forget(&key);
        }
    });
    let (pod_ctx, store) = (ctx.clone(), ctl.store());
    ctl.trigger_refs(ctx.pods.targets(move |ev| -> Vec<ObjectRef<StatefulSet>> {
        match ev {
            PodEvent::Resync => store
                .state()
                .iter()
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect(),
            PodEvent::Applied(p) if controller_uid(p).is_none() => adopters(&store.state(), p),
            PodEvent::Applied(p) => owner_of(&pod_ctx, p, false).into_iter().collect(),
            PodEvent::Deleted(p) => owner_of(&pod_ctx, p, true).into_iter().collect(),
        }
    }))
    .run(reconcile, ctx)
    .await;
}

/// The sets that would adopt the orphan `pod`: in its namespace, selecting it, and whose
/// `NAME-ORDINAL` its name is (upstream `getStatefulSetsForPod` with its claim filter).
fn adopters(sets: &[Arc<StatefulSet>], pod: &Pod) -> Vec<ObjectRef<StatefulSet>> {
    let empty = Default::default();
    let labels = podutil::labels(pod).unwrap_or(&empty);
    sets.iter()
        .filter(|s| s.metadata.namespace == pod.metadata.namespace)
        .filter(|s| selector::matches(&s.spec.selector, labels))
        .filter(|s| ordinal_of(&s.name_any(), podutil::name(pod)).is_some())
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// The set owning `pod`, observing its scale expectations on the way.
fn owner_of(
    ctx: &Context,
    pod: &k8s_openapi::api::core::v1::Pod,
    deleted: bool,
) -> Option<ObjectRef<StatefulSet>> {
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))?;
    if owner.kind != StatefulSet::kind(&()) || !owner.api_version.starts_with(keys::APPS_GROUP) {
        return None;
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let key = format!("{ns}/{}", owner.name);
    let cached = ctx.pods.cached(pod);
    ctx.scale_exp
        .observe_event(&key, podutil::name(pod), cached, deleted);
    if cached == Cached::Absent
        && let Some(uid) = pod.metadata.uid.as_deref()
    {
        ctx.rv_exp.delete(uid);
    }
    Some(ObjectRef::new(&owner.name).within(&ns))
}
