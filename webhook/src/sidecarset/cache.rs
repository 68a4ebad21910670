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

use kruise_api::apps::v1beta1::SidecarSet;
use kube::Client;

use crate::watched::{WatchGuard, Watched};

/// How long after a SidecarSet admission the cache is not trusted (the watch normally shows
/// the change within milliseconds).
pub const FRESH_AFTER_CHANGE: Duration = Duration::from_secs(5);

/// See the module docs.
#[derive(Clone)]
pub struct SidecarSetCache {
    sets: Watched<SidecarSet>,
    /// When a SidecarSet create or update was last admitted.
    changed: Arc<Mutex<Option<Instant>>>,
}

impl SidecarSetCache {
    /// Starts watching every SidecarSet; the watch runs until the guard is dropped.
    pub fn start(client: Client) -> (Self, WatchGuard) {
        let (sets, guard) = Watched::start(client, "SidecarSet");
        let cache = Self {
            sets,
            changed: Arc::default(),
        };
        (cache, guard)
    }

    /// A SidecarSet is being created or updated: list instead of trusting the cache for a while.
    pub fn changing(&self) {
        if let Ok(mut c) = self.changed.lock() {
            *c = Some(Instant::now());
        }
        // The scope (configuration::scope) is worked out again.
        self.sets.bump();
    }

    /// The watch behind the cache.
    pub fn watched(&self) -> &Watched<SidecarSet> {
        &self.sets
    }

    /// Every SidecarSet, or `None` before the first list has loaded or shortly after a change.
    pub fn snapshot(&self) -> Option<Vec<Arc<SidecarSet>>> {
        let sets = self.sets.all()?;
        let recent = match self.changed.lock() {
            Ok(c) => c.is_some_and(|at| at.elapsed() < FRESH_AFTER_CHANGE),
            Err(_) => true,
        };
        if recent {
            return None;
        }
        Some(sets)
    }
}
