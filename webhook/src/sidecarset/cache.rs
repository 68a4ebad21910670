//! The SidecarSets the Pod webhook injects, kept by a watch (upstream reads them from its
//! informer cache). Listing them from the API server in every Pod admission put a round trip
//! inside every Pod create, and inside every CloneSet template dry-run, which creates a Pod.
//!
//! Until the first list has loaded (or while the CRD is missing, when the watch keeps
//! retrying) [`SidecarSetCache::snapshot`] answers `None` and the caller lists as before. It
//! also answers `None` for [`FRESH_AFTER_CHANGE`] after a SidecarSet create or update passed
//! this webhook (every one does: the validating hook), so that a Pod created right after a new
//! SidecarSet gets it even if the watch has not shown it yet.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kruise_api::apps::v1beta1::SidecarSet;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long after a SidecarSet admission the cache is not trusted (the watch normally shows
/// the change within milliseconds).
pub const FRESH_AFTER_CHANGE: Duration = Duration::from_secs(5);

/// See the module docs.
#[derive(Clone)]
pub struct SidecarSetCache {
    store: Store<SidecarSet>,
    synced: watch::Receiver<bool>,
    /// When a SidecarSet create or update was last admitted.
    changed: Arc<Mutex<Option<Instant>>>,
}

/// Stops the cache's watch when dropped.
pub struct WatchGuard(JoinHandle<()>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl SidecarSetCache {
    /// Starts watching every SidecarSet; the watch runs until the guard is dropped.
    pub fn start(client: Client) -> (Self, WatchGuard) {
        let (store, writer) = reflector::store::<SidecarSet>();
        let (synced_tx, synced) = watch::channel(false);
        let api: Api<SidecarSet> = Api::all(client);
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|s| s.metadata.managed_fields = None)
                .reflect(writer);
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(watcher::Event::InitDone) => {
                        let _ = synced_tx.send(true);
                    }
                    Ok(_) => {}
                    // Also while the CRD is not installed: snapshots stay `None` until it is.
                    Err(e) => tracing::debug!(error = %e, "SidecarSet watch failed, retrying"),
                }
            }
        });
        let cache = Self {
            store,
            synced,
            changed: Arc::default(),
        };
        (cache, WatchGuard(task))
    }

    /// A SidecarSet is being created or updated: list instead of trusting the cache for a while.
    pub fn changing(&self) {
        if let Ok(mut c) = self.changed.lock() {
            *c = Some(Instant::now());
        }
    }

    /// Every SidecarSet, or `None` before the first list has loaded or shortly after a change.
    pub fn snapshot(&self) -> Option<Vec<SidecarSet>> {
        if !*self.synced.borrow() {
            return None;
        }
        let recent = match self.changed.lock() {
            Ok(c) => c.is_some_and(|at| at.elapsed() < FRESH_AFTER_CHANGE),
            Err(_) => true,
        };
        if recent {
            return None;
        }
        Some(
            self.store
                .state()
                .iter()
                .map(|s| s.as_ref().clone())
                .collect(),
        )
    }
}
