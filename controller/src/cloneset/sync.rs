//! One sync pass of a CloneSet (upstream `syncCloneSet`'s scale-then-update): the [`Syncer`]
//! that both halves ([`super::sync_scale`], [`super::sync_update`]) are methods of, the failure
//! conditions it reports, and the requeue it collects.

use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps::v1beta1::{CloneSet, CloneSetStatus};
use kruise_api::keys;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};

use super::context::Context;
use super::diff::Settings;
use super::error::Error;
use super::status;
use crate::workload::podfacts::PodFacts;

/// One sync pass: scale, or (when nothing scaled) update.
pub(super) struct Syncer<'a> {
    pub(super) ctx: &'a Context,
    pub(super) cs: &'a CloneSet,
    pub(super) key: &'a str,
    pub(super) settings: Settings,
    pub(super) current: &'a ControllerRevision,
    pub(super) update: &'a ControllerRevision,
    pub(super) revisions: &'a [ControllerRevision],
    pub(super) pvcs: &'a [PersistentVolumeClaim],
    pub(super) now: Timestamp,
}

impl Syncer<'_> {
    pub(super) fn update_name(&self) -> String {
        self.update.metadata.name.clone().unwrap_or_default()
    }

    /// An Event on this CloneSet about one of its pods or PVCs.
    pub(super) async fn event_about<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        self.ctx
            .event_about(self.cs, obj, type_, reason, note)
            .await;
    }

    /// The API of pods or PVCs in the CloneSet's namespace.
    pub(super) fn api<K>(&self) -> Result<Api<K>, Error>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        let ns = self.cs.namespace().ok_or(Error::Unnamed)?;
        Ok(Api::namespaced(self.ctx.client.clone(), &ns))
    }

    /// Upstream `syncCloneSet`: scale first, and update only when scaling wrote nothing; each
    /// half's result sets or clears its failure condition (FailedScale, FailedUpdate).
    pub(super) async fn run(
        &self,
        pods: &[&Pod],
        facts: &[PodFacts<'_>],
        st: &mut CloneSetStatus,
        requeue: &mut Requeue,
    ) -> Result<(), Error> {
        if let Some(e) = self.settings.partition_error() {
            self.ctx
                .event(
                    self.cs,
                    EventType::Warning,
                    "InvalidPartition",
                    format!("partition is ignored: {e}"),
                    None,
                )
                .await;
        }
        let mut deferred = false;
        // The scale half's diffs, when they split the Pods as the update half does (by their
        // revision alone): the same Pods at the same instant, so the update half reuses them
        // rather than walking every Pod again.
        let mut by_revision = None;
        let (scaled, scale_err) = match self
            .scale(pods, facts, requeue, &mut deferred, &mut by_revision)
            .await
        {
            Ok(s) => (s, None),
            Err(e) => (false, Some(e)),
        };
        // A creation waiting out its backoff leaves the last FailedScale condition standing.
        if !deferred {
            report_failure(
                st,
                keys::CLONESET_CONDITION_FAILED_SCALE,
                scale_err.as_ref(),
                self.now,
            );
        }
        if scaled {
            return scale_err.map_or(Ok(()), Err);
        }
        let updated = self.update_pods(pods, facts, requeue, by_revision).await;
        report_failure(
            st,
            keys::CLONESET_CONDITION_FAILED_UPDATE,
            updated.as_ref().err(),
            self.now,
        );
        match (scale_err, updated) {
            (Some(e), _) | (None, Err(e)) => Err(e),
            (None, Ok(())) => Ok(()),
        }
    }
}

/// Set a failure condition (FailedScale, FailedUpdate) from the step's error, or clear it.
fn report_failure(st: &mut CloneSetStatus, type_: &str, err: Option<&Error>, now: Timestamp) {
    match err {
        Some(e) => status::set_condition(
            st,
            status::new_condition(type_, true, "", &e.condition_message(), now),
        ),
        None => status::remove_condition(st, type_),
    }
}

/// How many pods of one CloneSet are written to at once during an update (each write is a few
/// API calls; the client's rate limit, not this, bounds the load on the API server).
const POD_WRITE_CONCURRENCY: usize = 16;

/// Runs `make(0)`, `make(1)`, ... `make(n - 1)` at most [`POD_WRITE_CONCURRENCY`] at a time, each
/// slot refilled as soon as its future finishes, and returns the outputs in index order. The
/// order matters: the first error a condition reports is then always the same Pod's, so the
/// condition does not flip between Pods (each flip would be a status write that triggers the
/// next reconcile at once).
///
/// A future is made only when a slot is free: a Pod's refresh or update future is 10 to 20 KiB
/// before it first runs, so making one per Pod up front (a `Vec`) held 5,000 of them, about
/// 100 MiB, for the whole pass over a 5,000-Pod CloneSet. A plain loop rather than stream
/// adapters: a closure over the futures' (opaque) type in an adapter held across an await
/// makes the compiler unable to prove the reconcile future Send.
pub(super) async fn concurrently_in_order<T, F: Future<Output = T>>(
    n: usize,
    mut make: impl FnMut(usize) -> F,
) -> Vec<T> {
    let mut running = futures::stream::FuturesUnordered::new();
    let mut out: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
    let mut next = 0;
    loop {
        while running.len() < POD_WRITE_CONCURRENCY && next < n {
            let (i, fut) = (next, make(next));
            running.push(async move { (i, fut.await) });
            next += 1;
        }
        let Some((i, t)) = running.next().await else {
            break;
        };
        out[i] = Some(t);
    }
    out.into_iter().flatten().collect()
}

/// The shortest requeue anyone asked for during a reconcile.
#[derive(Default)]
pub(super) struct Requeue(pub(super) Option<Duration>);

impl Requeue {
    pub(super) fn push(&mut self, d: Option<Duration>) {
        if let Some(d) = d.filter(|d| !d.is_zero()) {
            self.0 = Some(self.0.map_or(d, |cur| cur.min(d)));
        }
    }
    pub(super) fn action(&self) -> Action {
        self.0.map_or_else(Action::await_change, Action::requeue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Outputs come back in input order however the futures finish, and a slow first future
    /// does not hold back the start of the others (no head-of-line blocking).
    #[tokio::test]
    async fn concurrently_in_order_keeps_order_without_head_of_line_blocking() {
        let started = Arc::new(std::sync::Mutex::new(Vec::new()));
        let n = POD_WRITE_CONCURRENCY + 4;
        let make = |i: usize| {
            let started = started.clone();
            async move {
                started
                    .lock()
                    .expect("lock")
                    .push((i, tokio::time::Instant::now()));
                // The first takes far longer than all the others together.
                let ms = if i == 0 { 2_000 } else { 10 };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                i
            }
        };
        let t0 = tokio::time::Instant::now();
        let out = concurrently_in_order(n, make).await;
        assert_eq!(out, (0..n).collect::<Vec<_>>());
        let started = started.lock().expect("lock").clone();
        let last_start = started
            .iter()
            .map(|(_, t)| t.duration_since(t0))
            .max()
            .unwrap_or_default();
        assert!(
            last_start < Duration::from_secs(1),
            "every future started while the first was still running: {last_start:?}"
        );
    }

    #[test]
    fn requeue_keeps_the_shortest() {
        let mut r = Requeue::default();
        r.push(None);
        r.push(Some(Duration::from_secs(10)));
        r.push(Some(Duration::from_secs(3)));
        r.push(Some(Duration::ZERO));
        assert_eq!(r.0, Some(Duration::from_secs(3)));
    }
}
