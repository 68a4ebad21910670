//! The WorkloadSpreads, kept by a watch (upstream reads them from its informer cache): every
//! Pod create looks for the one targeting its workload. Until the first list has loaded (or
//! while the CRD is missing) [`WsCache::snapshot`] answers `None` and the caller lists instead.

use kruise_api::apps::v1alpha1::WorkloadSpread;
use kube::{Client, ResourceExt};

use crate::watched::{WatchGuard, Watched};

/// See the module docs.
#[derive(Clone)]
pub struct WsCache(Watched<WorkloadSpread>);

impl WsCache {
    /// Starts watching every WorkloadSpread; the watch runs until the guard is dropped.
    pub fn start(client: Client) -> (Self, WatchGuard) {
        let (watched, guard) = Watched::start(client, "WorkloadSpread");
        (Self(watched), guard)
    }

    /// The watch behind the cache.
    pub fn watched(&self) -> &Watched<WorkloadSpread> {
        &self.0
    }

    /// The WorkloadSpreads of `namespace`, or `None` before the first list has loaded.
    pub fn snapshot(&self, namespace: &str) -> Option<Vec<WorkloadSpread>> {
        Some(
            self.0
                .all()?
                .iter()
                .filter(|w| w.namespace().as_deref() == Some(namespace))
                .map(|w| w.as_ref().clone())
                .collect(),
        )
    }
}
