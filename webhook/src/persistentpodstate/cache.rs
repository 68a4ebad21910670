//! The PersistentPodStates, kept by a watch (upstream reads them from its informer cache):
//! every Pod create of a StatefulSet looks for the one targeting it, and a Pod no
//! PersistentPodState concerns pays no more than this lookup. Until the first list has loaded
//! (or while the CRD is missing) [`PpsCache::snapshot`] answers `None` and the caller lists
//! instead.

use kruise_api::apps::v1alpha1::PersistentPodState;
use kube::{Client, ResourceExt};

use crate::watched::{WatchGuard, Watched};

/// See the module docs.
#[derive(Clone)]
pub struct PpsCache(Watched<PersistentPodState>);

impl PpsCache {
    /// Starts watching every PersistentPodState; the watch runs until the guard is dropped.
    pub fn start(client: Client) -> (Self, WatchGuard) {
        let (watched, guard) = Watched::start(client, "PersistentPodState");
        (Self(watched), guard)
    }

    /// The watch behind the cache.
    pub fn watched(&self) -> &Watched<PersistentPodState> {
        &self.0
    }

    /// The PersistentPodStates of `namespace`, or `None` before the first list has loaded.
    pub fn snapshot(&self, namespace: &str) -> Option<Vec<PersistentPodState>> {
        Some(
            self.0
                .all()?
                .iter()
                .filter(|p| p.namespace().as_deref() == Some(namespace))
                .map(|p| p.as_ref().clone())
                .collect(),
        )
    }
}
