//! The PodUnavailableBudgets, kept by a watch (upstream reads them from its informer cache):
//! every Pod create looks for the budget covering it, and a Pod under no budget must pay no
//! more than this lookup. Until the first list has loaded (or while the CRD is missing)
//! [`BudgetCache::snapshot`] answers `None` and the caller lists instead.

use futures::StreamExt;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// See the module docs.
#[derive(Clone)]
pub struct BudgetCache {
    store: Store<PodUnavailableBudget>,
    synced: watch::Receiver<bool>,
}

/// Stops the cache's watch when dropped.
pub struct WatchGuard(JoinHandle<()>);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl BudgetCache {
    /// Starts watching every budget; the watch runs until the guard is dropped.
    pub fn start(client: Client) -> (Self, WatchGuard) {
        let (store, writer) = reflector::store::<PodUnavailableBudget>();
        let (synced_tx, synced) = watch::channel(false);
        let api: Api<PodUnavailableBudget> = Api::all(client);
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .modify(|b| b.metadata.managed_fields = None)
                .reflect(writer);
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                match item {
                    Ok(watcher::Event::InitDone) => {
                        let _ = synced_tx.send(true);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::debug!(error = %e, "PodUnavailableBudget watch failed, retrying")
                    }
                }
            }
        });
        (Self { store, synced }, WatchGuard(task))
    }

    /// The budgets of `namespace`, or `None` before the first list has loaded.
    pub fn snapshot(&self, namespace: &str) -> Option<Vec<PodUnavailableBudget>> {
        if !*self.synced.borrow() {
            return None;
        }
        Some(
            self.store
                .state()
                .iter()
                .filter(|b| b.namespace().as_deref() == Some(namespace))
                .map(|b| b.as_ref().clone())
                .collect(),
        )
    }
}
