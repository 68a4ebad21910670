//! A kind kept by a watch, for the lookups an admission makes on every Pod (upstream reads them
//! from its informer cache): the PodUnavailableBudgets, PersistentPodStates and WorkloadSpreads
//! of the Pod's namespace ([`Watched::snapshot`]), so that a Pod none of them concerns pays no
//! more than this lookup, and the SidecarSets ([`crate::sidecarset::cache`]). Until the first
//! list has loaded, or while the kind's CRD is missing (the watch keeps retrying), the lookups
//! answer `None` and the caller lists from the API server instead.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Every object of kind `K` in the cluster, as the watch last saw it.
pub struct Watched<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    synced: watch::Receiver<bool>,
    /// Bumped on every change the watch sees (and by [`Watched::bump`]).
    changes: Arc<watch::Sender<u64>>,
}

// Derived Clone would ask `K: Clone`; the store is shared, not copied.
impl<K: Resource<DynamicType = ()> + 'static> Clone for Watched<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            synced: self.synced.clone(),
            changes: self.changes.clone(),
        }
    }
}

/// Stops a watch when dropped.
pub struct WatchGuard(JoinHandle<()>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// Starts watching every `K`; the watch runs until the guard is dropped. `kind` names it
    /// in the log when the watch fails.
    pub fn start(client: Client, kind: &'static str) -> (Self, WatchGuard) {
        let (store, writer) = reflector::store::<K>();
        let (synced_tx, synced) = watch::channel(false);
        let changes = Arc::new(watch::channel(0u64).0);
        let bump = changes.clone();
        let api: Api<K> = Api::all(client);
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|o| o.meta_mut().managed_fields = None)
                .reflect(writer);
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(watcher::Event::InitDone) => {
                        let _ = synced_tx.send(true);
                        bump.send_modify(|n| *n += 1);
                    }
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
                        bump.send_modify(|n| *n += 1);
                    }
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, kind, "watch failed, retrying"),
                }
            }
        });
        (
            Self {
                store,
                synced,
                changes,
            },
            WatchGuard(task),
        )
    }

    /// Wakes on every change the watch sees (what the Pod hooks' scope is kept current by).
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// How many changes [`Watched::changes`] has announced: bumped after the store holds each.
    pub fn version(&self) -> u64 {
        *self.changes.borrow()
    }

    /// Wakes [`Watched::changes`] without a change seen (one is about to be).
    pub fn bump(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// The namespaces holding at least one object, or `None` before the first list has loaded.
    pub fn namespaces(&self) -> Option<std::collections::BTreeSet<String>> {
        Some(
            self.all()?
                .iter()
                .filter_map(|o| o.meta().namespace.clone())
                .collect(),
        )
    }

    /// Every object, or `None` before the first list has loaded.
    pub fn all(&self) -> Option<Vec<Arc<K>>> {
        (*self.synced.borrow()).then(|| self.store.state())
    }

    /// The objects of `namespace`, or `None` before the first list has loaded.
    pub fn snapshot(&self, namespace: &str) -> Option<Vec<K>> {
        Some(
            self.all()?
                .iter()
                .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
                .map(|o| o.as_ref().clone())
                .collect(),
        )
    }
}
