//! Wiring of the CloneSet controller: the CloneSet watch, the Pod events that trigger its
//! reconciles, and the error policy. [`reconcile`] (re-exported from `super::reconcile`),
//! [`error_policy`] and [`retry_floor`] are what a generic controller runner is handed; with
//! [`Context`] and [`run`] they are what the rest of the manager uses.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, future};
use kruise_api::apps::v1beta1::CloneSet;
use kruise_api::keys;
use kube::runtime::controller::{ReconcileRequest, trigger_self};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, applier};
use kube::{Api, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

pub use super::context::{CONTROLLER_NAME, Context};
pub use super::error::Error;
pub use super::reconcile::reconcile;
use super::{podutil, update};
use crate::backoff;
use crate::expectations::{Cached, ScaleAction};
use crate::podcache::PodEvent;

/// Reconciles of different CloneSets running at once (upstream's default worker count).
const CONCURRENCY: u16 = 3;

/// Run the CloneSet controller until `shutdown` is cancelled.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let (reader, writer) = reflector::store::<CloneSet>();
    let api: Api<CloneSet> = match &ctx.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let exp_ctx = ctx.clone();
    let cs_store = reader.clone();
    let cs_events = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .inspect(move |ev| forget_deleted(&exp_ctx, &cs_store, ev))
        .applied_objects();
    let self_triggers = trigger_self(cs_events, ());

    let pod_ctx = ctx.clone();
    let store = reader.clone();
    let pod_triggers = ctx.pods.events().flat_map(move |ev| {
        let refs = pod_event_targets(&pod_ctx, &store, ev);
        futures::stream::iter(
            refs.into_iter()
                .map(|r| Ok::<_, watcher::Error>(ReconcileRequest::from(r))),
        )
    });

    let queue =
        futures::stream::select(self_triggers, pod_triggers).take_until(shutdown.cancelled_owned());
    let cfg = kube::runtime::Config::default().concurrency(CONCURRENCY);
    let backoff = ctx.backoff.clone();
    applier(
        backoff::reset_on_success(backoff.clone(), reconcile),
        backoff::requeue_with_backoff_at_least(backoff, retry_floor, error_policy),
        ctx,
        reader,
        queue,
        cfg,
    )
    .for_each(|res| {
        match res {
            Ok((obj, _)) => tracing::debug!(cloneset = %obj, "reconciled"),
            Err(e) => tracing::debug!(error = %e, "reconcile failed"),
        }
        future::ready(())
    })
    .await;
    tracing::info!("cloneset controller stopped");
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
        }
        Ok(watcher::Event::InitDone) => {
            ctx.scale_exp.retain_keys(|key| {
                key.split_once('/').is_some_and(|(ns, name)| {
                    store
                        .get(&ObjectRef::<CloneSet>::new(name).within(ns))
                        .is_some()
                })
            });
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
            .filter(|cs| update::selector_matches(&cs.spec.selector, labels))
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
    let cached = match ctx.pods.store().get(&ObjectRef::from_obj(pod.as_ref())) {
        None => Cached::Absent,
        Some(p) if p.metadata.deletion_timestamp.is_some() => Cached::Terminating,
        Some(_) => Cached::Present,
    };
    for action in [ScaleAction::Create, ScaleAction::Delete] {
        // A delete event also proves the pod was created, even if we never saw it before.
        if cached.shows(action) || deleted {
            ctx.scale_exp.observe(&key, action, podutil::name(&pod));
        }
    }
    // A pod that is gone will not be seen again: forget what we expected of its version.
    if cached == Cached::Absent
        && let Some(uid) = pod.metadata.uid.as_deref()
    {
        ctx.rv_exp.delete(uid);
    }
    vec![ObjectRef::new(&owner.name).within(&ns)]
}

/// The soonest retry of errors that only a change of the CloneSet or its Pods can fix
/// (InPlaceOnly, a bad lifecycle state, a bad template): that change triggers a reconcile by
/// itself, so retrying sooner would only repeat the refusal and its Warning Event.
const SPEC_ERROR_RETRY: Duration = Duration::from_secs(30);

/// The least delay before retrying after `err` (see [`SPEC_ERROR_RETRY`]); zero for the rest.
pub fn retry_floor(err: &Error) -> Duration {
    match err {
        Error::InPlaceOnly { .. } | Error::BadLifecycle { .. } | Error::Template(_) => {
            SPEC_ERROR_RETRY
        }
        _ => Duration::ZERO,
    }
}

/// Logs a failed reconcile; the retry comes after the CloneSet's backoff delay
/// ([`backoff::requeue_with_backoff_at_least`]), and not before [`retry_floor`].
pub fn error_policy(cs: &CloneSet, err: &Error, retry_in: Duration) {
    tracing::warn!(
        cloneset = %cs.name_any(),
        namespace = cs.namespace().unwrap_or_default(),
        error = %err,
        retry_in_ms = u64::try_from(retry_in.as_millis()).unwrap_or(u64::MAX),
        "reconcile failed"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_spec_errors_have_a_retry_floor() {
        let rows = [
            (
                Error::BadLifecycle {
                    pod: "p".into(),
                    state: "PreparingDelete".into(),
                },
                SPEC_ERROR_RETRY,
            ),
            (
                Error::InPlaceOnly {
                    pod: "p".into(),
                    reason: crate::inplace::NotInPlace::NoOldRevision,
                },
                SPEC_ERROR_RETRY,
            ),
            (Error::Template("bad".into()), SPEC_ERROR_RETRY),
            (Error::Unnamed, Duration::ZERO),
        ];
        for (err, want) in rows {
            assert_eq!(retry_floor(&err), want, "{err}");
        }
    }
}
