//! One way to run a controller, in the manager and in the daemon: [`Controller`] wires a
//! reflector store, a trigger queue, a reconcile function, its error policy and a context onto
//! [`kube::runtime::applier`], the same loop kube-rs's `Controller::run` drives.
//!
//! What every controller gets without writing it:
//! - a `reconcile` span carrying the controller name and the object key (`namespace/name`), so
//!   every log line of a reconcile, its error policy included, names the object (inside the
//!   applier's own `reconciling object` span, which adds why the object was queued);
//! - the reconcile counter, error counter (by [`ReconcileError::metric_label`]) and duration
//!   histogram of [`ReconcileMetrics`](crate::metrics::ReconcileMetrics), through the binary's
//!   [`RecordReconcile`];
//! - per-object exponential backoff of failures ([`crate::backoff`], reset on success), never
//!   sooner than [`ReconcileError::retry_floor`];
//! - result logging: debug on success, debug for a conflict (a stale cache, retried within
//!   milliseconds), warn for anything else;
//! - shutdown: the queue ends when the token is cancelled, and the applier finishes the
//!   reconciles in flight;
//! - a tokio task of its own, so controllers joined together do not poll one another (a
//!   dropped `run` stops its task, a panic in it reaches the caller).
//!
//! The shape of the CloneSet controller (own watch with a hook that forgets deleted objects, Pod
//! events from the manager's shared Pod cache mapped to owners, three workers, a retry floor for
//! spec errors, the backoff shared with its context):
//!
//! ```ignore
//! let api: Api<CloneSet> = Api::all(ctx.client.clone());
//! let ctl = Controller::watching("cloneset", runner::watch(api), ctx.metrics.clone(), shutdown)
//!     .concurrency(3)
//!     .backoff(ctx.backoff.clone());
//! let (exp_ctx, store) = (ctx.clone(), ctl.store());
//! let ctl = ctl.inspect(move |ev| forget_deleted(&exp_ctx, &store, ev));
//! let (pod_ctx, store) = (ctx.clone(), ctl.store());
//! ctl.trigger_refs(ctx.pods.targets(move |ev| pod_event_targets(&pod_ctx, &store, ev.clone())))
//! .run(reconcile, ctx)
//! .await;
//! // with `impl ReconcileError for Error { fn retry_floor(&self) -> Duration { … } }`
//! ```
//!
//! The unit test `cloneset_shape` below runs exactly that shape on fake streams. The daemon's
//! controllers are the plain case: a [`watch_with`] of their node's objects, no limit on
//! concurrency, the default backoff.

pub mod finalizer;
mod kube_error;

use std::convert::Infallible;
use std::fmt::{Debug, Display};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt, future};
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::{Action, ReconcileRequest, trigger_self};
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher::{self, watcher};
use kube::runtime::{WatchStreamExt, applier};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument;

use crate::backoff::{self, Backoff, Policy};
use crate::metrics::RecordReconcile;
pub use kube_error::KubeError;

/// What the runner needs to know about a controller's error (controller-rs's `Error` with
/// `metric_label()`).
pub trait ReconcileError: std::error::Error + Send + Sync + 'static {
    /// The failed API call this error is, if it is one: whether it is a conflict follows from
    /// it (see [`KubeError`]).
    fn kube(&self) -> Option<&KubeError> {
        None
    }

    /// The `error` label of the reconcile error counter ([`KubeError::METRIC_LABEL`] for a
    /// failed API call).
    fn metric_label(&self) -> &'static str;

    /// The soonest retry: errors only a change of the object can fix (that change triggers a
    /// reconcile by itself) would otherwise repeat the same refusal at the backoff's 5 ms.
    fn retry_floor(&self) -> Duration {
        Duration::ZERO
    }

    /// A write lost to a concurrent writer: it only means the cache was stale, so it is logged
    /// at debug and retried by the same backoff curve. By default: a 409 from [`Self::kube`].
    fn is_conflict(&self) -> bool {
        self.kube().is_some_and(KubeError::is_conflict)
    }
}

/// The retry floor of errors only a change of the object's spec can fix (that change triggers a
/// reconcile by itself): the controllers' common choice.
pub const SPEC_ERROR_RETRY: Duration = Duration::from_secs(30);

/// Whether a kube error is a 409 Conflict.
pub fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 409)
}

/// A watch of every `K` the client may see, restarted with kube's default backoff.
pub fn watch<K>(
    api: Api<K>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watch_with(api, watcher::Config::default())
}

/// A watch of the `K` that `cfg` selects (the daemon's own node's objects), restarted with
/// kube's default backoff.
pub fn watch_with<K>(
    api: Api<K>,
    cfg: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, cfg).default_backoff()
}

/// The key of an object in logs and spans: `namespace/name`, or `name` when cluster scoped.
pub fn object_key<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;
type Inspect<K> = Box<dyn FnMut(&Result<watcher::Event<K>, watcher::Error>) + Send>;

/// A controller being wired; [`Controller::run`] runs it until shutdown.
pub struct Controller<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    name: &'static str,
    store: Store<K>,
    own: Option<(Events<K>, Writer<K>)>,
    inspect: Option<Inspect<K>>,
    triggers: Vec<BoxStream<'static, ReconcileRequest<K>>>,
    concurrency: u16,
    backoff: Arc<Backoff>,
    metrics: Arc<dyn RecordReconcile>,
    shutdown: CancellationToken,
}

impl<K> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Debug + Eq + Hash + Clone + Default + Unpin + Send + Sync,
{
    /// A controller of the objects `events` (usually [`watch`]) shows: they fill its store,
    /// and every applied object triggers its own reconcile.
    pub fn watching(
        name: &'static str,
        events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
        metrics: Arc<dyn RecordReconcile>,
        shutdown: CancellationToken,
    ) -> Self {
        let (store, writer) = reflector::store::<K>();
        let mut c = Self::on_store(name, store, metrics, shutdown);
        c.own = Some((events.boxed(), writer));
        c
    }

    /// A controller of the objects of a store someone else fills (the shared Pod cache); only
    /// the [`trigger`](Self::trigger) streams queue reconciles.
    pub fn on_store(
        name: &'static str,
        store: Store<K>,
        metrics: Arc<dyn RecordReconcile>,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            name,
            store,
            own: None,
            inspect: None,
            triggers: Vec::new(),
            concurrency: 1,
            backoff: Arc::new(Backoff::new(Policy::DEFAULT)),
            metrics,
            shutdown,
        }
    }

    /// The store the reconciles read from, for trigger mappers.
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    /// Sees every event of the own watch after the store has applied it (CloneSet forgets the
    /// expectations of deleted objects here).
    pub fn inspect(
        mut self,
        f: impl FnMut(&Result<watcher::Event<K>, watcher::Error>) + Send + 'static,
    ) -> Self {
        self.inspect = Some(Box::new(f));
        self
    }

    /// Adds a stream of reconcile requests (other objects' events mapped to ours). An error in
    /// it (a watch failing, to be retried by its backoff) is logged at debug and skipped.
    pub fn trigger<S, T, E>(mut self, stream: S) -> Self
    where
        S: Stream<Item = Result<T, E>> + Send + 'static,
        T: Into<ReconcileRequest<K>>,
        E: Display,
    {
        self.triggers.push(requests(self.name, stream));
        self
    }

    /// Adds a stream of objects to reconcile.
    pub fn trigger_refs(self, refs: impl Stream<Item = ObjectRef<K>> + Send + 'static) -> Self {
        self.trigger(refs.map(Ok::<_, Infallible>))
    }

    /// Objects reconciled at once (one object is never reconciled twice at once); 0 means no
    /// limit, as in kube's `Config::concurrency`.
    pub fn concurrency(mut self, n: u16) -> Self {
        self.concurrency = n;
        self
    }

    /// Shares a backoff with the context (the default is a private one on the default curve).
    pub fn backoff(mut self, backoff: Arc<Backoff>) -> Self {
        self.backoff = backoff;
        self
    }

    /// Runs until the shutdown token is cancelled and the reconciles in flight have finished.
    pub async fn run<C, E, F, Fut>(self, mut reconcile: F, ctx: Arc<C>)
    where
        C: Send + Sync + 'static,
        E: ReconcileError,
        F: FnMut(Arc<K>, Arc<C>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let Self {
            name,
            store,
            own,
            mut inspect,
            mut triggers,
            concurrency,
            backoff,
            metrics,
            shutdown,
        } = self;
        if let Some((events, writer)) = own {
            let applied = events
                .reflect(writer)
                .inspect(move |ev| {
                    if let Some(f) = inspect.as_mut() {
                        f(ev);
                    }
                })
                .applied_objects();
            triggers.push(requests(name, trigger_self(applied, Default::default())));
        }
        let queue = futures::stream::select_all(triggers)
            .map(Ok::<_, Infallible>)
            .take_until(shutdown.cancelled_owned());

        let timed = move |obj: Arc<K>, ctx: Arc<C>| {
            let span = tracing::info_span!("reconcile", controller = name, object = %object_key(obj.as_ref()));
            let metrics = metrics.clone();
            let fut = reconcile(obj, ctx);
            async move {
                let started = Instant::now();
                let res = fut.await;
                let took = started.elapsed();
                metrics.reconciled(name, took, res.as_ref().err().map(E::metric_label));
                if let Ok(action) = &res {
                    tracing::debug!(took_ms = millis(took), ?action, "reconciled");
                }
                res
            }
            .instrument(span)
        };
        let policy = backoff::requeue_with_backoff_at_least(
            backoff.clone(),
            |e: &E| e.retry_floor(),
            move |obj: &K, err: &E, retry_in: Duration| {
                let span =
                    tracing::info_span!("reconcile", controller = name, object = %object_key(obj));
                let _entered = span.entered();
                log_failure(err, retry_in);
            },
        );
        let cfg = kube::runtime::Config::default().concurrency(concurrency);
        let applied = applier(
            backoff::reset_on_success(backoff, timed),
            policy,
            ctx,
            store,
            queue,
            cfg,
        )
        .for_each(move |res| {
            // Reconcile errors were logged by the error policy, inside their span.
            if let Err(e) = res {
                tracing::debug!(controller = name, error = %e, "reconcile failed");
            }
            future::ready(())
        });
        // Its own task: a wake of this controller (a reply, a timer, a trigger) then polls this
        // controller alone, not every future the caller joined it with (`tokio::join!` polls
        // all of its futures on any wake). Dropping `run` still stops it.
        let task = AbortOnDropHandle::new(tokio::spawn(applied.in_current_span()));
        match task.await {
            Ok(()) => tracing::info!(controller = name, "controller stopped"),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => tracing::info!(controller = name, error = %e, "controller task cancelled"),
        }
    }
}

/// `stream` as reconcile requests, its errors logged and skipped.
fn requests<K, S, T, E>(name: &'static str, stream: S) -> BoxStream<'static, ReconcileRequest<K>>
where
    K: Resource + 'static,
    S: Stream<Item = Result<T, E>> + Send + 'static,
    T: Into<ReconcileRequest<K>>,
    E: Display,
{
    stream
        .filter_map(move |r| {
            future::ready(match r {
                Ok(r) => Some(r.into()),
                Err(e) => {
                    tracing::debug!(controller = name, error = %e, "trigger stream error");
                    None
                }
            })
        })
        .boxed()
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn log_failure<E: ReconcileError>(err: &E, retry_in: Duration) {
    if err.is_conflict() {
        tracing::debug!(retry_in_ms = millis(retry_in), "conflict, retrying");
    } else {
        tracing::warn!(error = %err, retry_in_ms = millis(retry_in), "reconcile failed");
    }
}

#[cfg(test)]
mod tests;
