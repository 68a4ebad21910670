//! One Pod watch for the whole manager. A reflector keeps the store every controller reads from,
//! and each change is broadcast so that controllers can map it to the workloads they reconcile.
//! The store is updated before the event is broadcast, so a reconcile triggered by an event
//! always sees that event in the store.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

/// Capacity of the event fan-out; a controller that falls this far behind resyncs everything.
const BROADCAST_CAPACITY: usize = 4096;

/// Test knob, deliberately not a flag: when this environment variable is `1`, every subscriber
/// behaves as if it had lagged on every event (it receives `Resync` instead of each event), the
/// worst case of a slow subscriber. The e2e suite (`e2e/tests/scale.rs`) starts a manager with
/// it to prove that controllers converge from the store alone.
pub const ENV_DEBUG_POD_EVENT_LAG: &str = "KRUISE_DEBUG_POD_EVENT_LAG";

#[derive(Clone, Debug)]
pub enum PodEvent {
    Applied(Arc<Pod>),
    Deleted(Arc<Pod>),
    /// The watch relisted (start or reconnect) or a subscriber lagged: reconcile everything.
    Resync,
}

/// The shared Pod cache.
#[derive(Clone)]
pub struct PodCache {
    store: Store<Pod>,
    tx: broadcast::Sender<PodEvent>,
    synced: watch::Receiver<bool>,
    /// See [`ENV_DEBUG_POD_EVENT_LAG`].
    always_lag: bool,
}

impl PodCache {
    /// Starts the watch on `namespace` (all namespaces when `None`); it stops when `shutdown` is
    /// cancelled.
    pub fn start(client: Client, namespace: Option<&str>, shutdown: CancellationToken) -> Self {
        let (store, writer) = reflector::store::<Pod>();
        let (tx, _) = broadcast::channel(BROADCAST_CAPACITY);
        let (synced_tx, synced) = watch::channel(false);
        let api: Api<Pod> = match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        };
        let sender = tx.clone();
        tokio::spawn(async move {
            // managedFields are often the largest part of a Pod and no controller reads them;
            // dropping them before the store keeps the cache (and its copies) small.
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|p: &mut Pod| p.managed_fields_mut().clear())
                .reflect(writer);
            let mut stream = std::pin::pin!(stream);
            loop {
                let item = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    item = stream.next() => item,
                };
                let Some(item) = item else { break };
                match item {
                    Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                        let _ = sender.send(PodEvent::Applied(Arc::new(p)));
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        let _ = sender.send(PodEvent::Deleted(Arc::new(p)));
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = synced_tx.send(true);
                        let _ = sender.send(PodEvent::Resync);
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => tracing::warn!(error = %e, "pod watch failed, retrying"),
                }
            }
            tracing::info!("pod cache stopped");
        });
        let always_lag = std::env::var(ENV_DEBUG_POD_EVENT_LAG).is_ok_and(|v| v == "1");
        if always_lag {
            tracing::warn!(
                env = ENV_DEBUG_POD_EVENT_LAG,
                "test mode: every pod event reaches subscribers as a lag (Resync)"
            );
        }
        Self {
            store,
            tx,
            synced,
            always_lag,
        }
    }

    pub fn store(&self) -> &Store<Pod> {
        &self.store
    }

    /// Waits until the first list has been loaded.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.clone();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Every change from now on, as a stream. Lagging turns into a `Resync`.
    pub fn events(&self) -> impl Stream<Item = PodEvent> + Send + 'static {
        let rx = self.tx.subscribe();
        let always_lag = self.always_lag;
        futures::stream::unfold(rx, move |mut rx| async move {
            match rx.recv().await {
                Ok(_) if always_lag => Some((PodEvent::Resync, rx)),
                Ok(ev) => Some((ev, rx)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(missed = n, "pod event subscriber lagged, resyncing");
                    Some((PodEvent::Resync, rx))
                }
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
    }

    /// Every cached pod once, then each pod that changes (all of them again after a lag), for
    /// controllers that look at pods one at a time. Deleted pods are not sent.
    pub fn live_pods(&self) -> impl Stream<Item = Arc<Pod>> + Send + 'static {
        let initial: Vec<PodEvent> = self
            .store
            .state()
            .into_iter()
            .map(PodEvent::Applied)
            .collect();
        let store = self.store.clone();
        futures::stream::iter(initial)
            .chain(self.events())
            .flat_map(move |ev| {
                let pods: Vec<Arc<Pod>> = match ev {
                    PodEvent::Applied(p) => vec![p],
                    PodEvent::Deleted(_) => Vec::new(),
                    PodEvent::Resync => store.state(),
                };
                futures::stream::iter(pods)
            })
    }

    /// Every pod in `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Pod>> {
        self.store
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .collect()
    }

    /// Pods in `namespace` whose controller owner has `owner_uid`.
    pub fn owned_by(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<Pod>> {
        self.store
            .state()
            .into_iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && controller_uid(p) == Some(owner_uid)
            })
            .collect()
    }
}

/// UID of the controller owner reference, if any.
pub fn controller_uid(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}
