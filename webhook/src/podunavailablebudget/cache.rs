//! The PodUnavailableBudgets, kept by a watch (upstream reads them from its informer cache):
//! every Pod create looks for the budget covering it, and a Pod under no budget must pay no
//! more than this lookup. Until the first list has loaded (or while the CRD is missing)
//! [`BudgetCache::snapshot`] answers `None` and the caller lists instead.

use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::{Client, ResourceExt};

use crate::watched::{WatchGuard, Watched};

/// See the module docs.
#[derive(Clone)]
pub struct BudgetCache(Watched<PodUnavailableBudget>);

impl BudgetCache {
    /// Starts watching every budget; the watch runs until the guard is dropped.
    pub fn start(client: Client) -> (Self, WatchGuard) {
        let (watched, guard) = Watched::start(client, "PodUnavailableBudget");
        (Self(watched), guard)
    }

    /// The watch behind the cache.
    pub fn watched(&self) -> &Watched<PodUnavailableBudget> {
        &self.0
    }

    /// The budgets of `namespace`, or `None` before the first list has loaded.
    pub fn snapshot(&self, namespace: &str) -> Option<Vec<PodUnavailableBudget>> {
        Some(
            self.0
                .all()?
                .iter()
                .filter(|b| b.namespace().as_deref() == Some(namespace))
                .map(|b| b.as_ref().clone())
                .collect(),
        )
    }
}
