//! Scale and resource-version expectations.
//!
//! The pod cache lags behind our own writes. Before acting again on a workload, a reconcile checks
//! that every pod it created or deleted, and every pod it patched, has been seen by the cache;
//! otherwise it would create the same pods twice or update a pod that it already updated.
//!
//! Both types are thread-safe and take the current time as an argument so that tests control the
//! clock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an expectation may stay unsatisfied before a reconcile stops waiting for it
/// (a lost watch event must not block a workload forever).
pub const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// What a controller did to an object it expects to see reflected in the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScaleAction {
    Create,
    Delete,
}

impl ScaleAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ScaleAction::Create => "create",
            ScaleAction::Delete => "delete",
        }
    }
}

/// What the cache shows of an object named in a scale expectation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cached {
    /// Not in the cache.
    Absent,
    /// In the cache, not being deleted.
    Present,
    /// In the cache with a `deletionTimestamp`: upstream counts this as the deletion.
    Terminating,
}

impl Cached {
    /// What a store shows of an object: `None` when it is not there.
    pub fn of(meta: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>) -> Self {
        match meta {
            None => Cached::Absent,
            Some(m) if m.deletion_timestamp.is_some() => Cached::Terminating,
            Some(_) => Cached::Present,
        }
    }

    /// Whether this view of the cache shows that `action` took effect. A create shows once the
    /// object is there (even if already being deleted); a delete shows once it is terminating
    /// or gone: we only delete what the cache showed us, so absence means it went.
    pub fn shows(self, action: ScaleAction) -> bool {
        match action {
            ScaleAction::Create => self != Cached::Absent,
            ScaleAction::Delete => self != Cached::Present,
        }
    }
}

/// The answer of [`ScaleExpectations::satisfied`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScaleSatisfaction {
    Satisfied,
    /// Still waiting for the cache; `dirty` names the objects not yet observed.
    Unsatisfied {
        since: Duration,
        dirty: BTreeMap<ScaleAction, Vec<String>>,
    },
}

#[derive(Default)]
struct ControllerScale {
    pending: BTreeMap<ScaleAction, BTreeSet<String>>,
    first_unsatisfied: Option<Instant>,
}

impl ControllerScale {
    fn is_empty(&self) -> bool {
        self.pending.values().all(BTreeSet::is_empty)
    }
}

/// Objects a controller created or deleted and has not seen in the cache yet, per workload key
/// (`namespace/name`).
#[derive(Default)]
pub struct ScaleExpectations {
    inner: Mutex<HashMap<String, ControllerScale>>,
}

impl ScaleExpectations {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ControllerScale>> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that matters
        // more than losing every expectation, so keep using the data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn expect(&self, key: &str, action: ScaleAction, name: &str) {
        self.lock()
            .entry(key.to_string())
            .or_default()
            .pending
            .entry(action)
            .or_default()
            .insert(name.to_string());
    }

    /// Observes what an event about the object `name` of `key` shows, given what the store
    /// (updated before the event was sent) holds of it now; a delete event shows the delete.
    pub fn observe_event(&self, key: &str, name: &str, cached: Cached, deleted: bool) {
        for action in [ScaleAction::Create, ScaleAction::Delete] {
            if cached.shows(action) || deleted {
                self.observe(key, action, name);
            }
        }
    }

    pub fn observe(&self, key: &str, action: ScaleAction, name: &str) {
        let mut map = self.lock();
        let Some(exp) = map.get_mut(key) else {
            return;
        };
        if let Some(set) = exp.pending.get_mut(&action) {
            set.remove(name);
        }
        if exp.is_empty() {
            map.remove(key);
        }
    }

    /// Observes every pending name of `key` that `lookup` (a view of the cache) shows done. Events
    /// are only a fast path: a subscriber that lagged, or a watch that relisted, loses events but
    /// not the store, so checking the store this way is what guarantees expectations clear.
    /// Returns how many names were observed.
    pub fn observe_cache(&self, key: &str, lookup: impl Fn(&str) -> Cached) -> usize {
        let mut map = self.lock();
        let Some(exp) = map.get_mut(key) else {
            return 0;
        };
        let mut observed = 0;
        for (action, names) in exp.pending.iter_mut() {
            let before = names.len();
            names.retain(|n| !lookup(n).shows(*action));
            observed += before - names.len();
        }
        if exp.is_empty() {
            map.remove(key);
        }
        observed
    }

    /// The workload keys that still expect something.
    pub fn keys(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Drops the expectations of every workload key for which `keep` is false (workloads that no
    /// longer exist).
    pub fn retain_keys(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|k, _| keep(k));
    }

    /// Whether the cache has caught up with every create and delete recorded for `key`.
    pub fn satisfied(&self, key: &str, now: Instant) -> ScaleSatisfaction {
        let mut map = self.lock();
        let Some(exp) = map.get_mut(key) else {
            return ScaleSatisfaction::Satisfied;
        };
        if exp.is_empty() {
            map.remove(key);
            return ScaleSatisfaction::Satisfied;
        }
        let first = *exp.first_unsatisfied.get_or_insert(now);
        let dirty = exp
            .pending
            .iter()
            .filter(|(_, s)| !s.is_empty())
            .map(|(a, s)| (*a, s.iter().cloned().collect()))
            .collect();
        ScaleSatisfaction::Unsatisfied {
            since: now.saturating_duration_since(first),
            dirty,
        }
    }

    pub fn delete(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Names still expected for `key` and `action` (for logs and tests).
    pub fn pending(&self, key: &str, action: ScaleAction) -> Vec<String> {
        self.lock()
            .get(key)
            .and_then(|e| e.pending.get(&action))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

struct VersionExpectation {
    version: String,
    first_unsatisfied: Option<Instant>,
}

/// The newest resourceVersion we wrote for an object, per object UID, until the cache shows it.
#[derive(Default)]
pub struct ResourceVersionExpectations {
    inner: Mutex<HashMap<String, VersionExpectation>>,
}

/// The answer of [`ResourceVersionExpectations::satisfied`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionSatisfaction {
    Satisfied,
    Unsatisfied { since: Duration },
}

impl ResourceVersionExpectations {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VersionExpectation>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Record that the object `uid` was written and now has `resource_version`.
    pub fn expect(&self, uid: &str, resource_version: &str) {
        let mut map = self.lock();
        let entry = map.entry(uid.to_string()).or_insert(VersionExpectation {
            version: String::new(),
            first_unsatisfied: None,
        });
        if is_version_newer_or_equal(&entry.version, resource_version) {
            entry.version = resource_version.to_string();
        }
    }

    /// Feed the version the cache currently holds for `uid`.
    pub fn observe(&self, uid: &str, cached_version: &str) {
        let mut map = self.lock();
        if let Some(e) = map.get(uid)
            && is_version_newer_or_equal(&e.version, cached_version)
        {
            map.remove(uid);
        }
    }

    /// Whether the cached version of `uid` has reached what we wrote; when it has, the
    /// expectation is forgotten, as [`Self::observe`] would (no need to call both).
    pub fn satisfied(&self, uid: &str, cached_version: &str, now: Instant) -> VersionSatisfaction {
        let mut map = self.lock();
        let Some(e) = map.get_mut(uid) else {
            return VersionSatisfaction::Satisfied;
        };
        if is_version_newer_or_equal(&e.version, cached_version) {
            map.remove(uid);
            return VersionSatisfaction::Satisfied;
        }
        let first = *e.first_unsatisfied.get_or_insert(now);
        VersionSatisfaction::Unsatisfied {
            since: now.saturating_duration_since(first),
        }
    }

    pub fn delete(&self, uid: &str) {
        self.lock().remove(uid);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the expectations of objects for which `keep` is false (objects that are gone).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|uid, _| keep(uid));
    }
}

/// Whether `new` is at least `old`. resourceVersions are opaque strings by contract, but every
/// apiserver backed by etcd hands out integers; like upstream, an unparsable expectation never
/// blocks, and an unparsable observation never satisfies.
fn is_version_newer_or_equal(old: &str, new: &str) -> bool {
    if old.is_empty() {
        return true;
    }
    let Ok(old) = old.parse::<u64>() else {
        return true;
    };
    match new.parse::<u64>() {
        Ok(new) => new >= old,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_empty_is_satisfied() {
        let e = ScaleExpectations::new();
        assert_eq!(
            e.satisfied("ns/a", Instant::now()),
            ScaleSatisfaction::Satisfied
        );
    }

    #[test]
    fn scale_create_then_observe() {
        let e = ScaleExpectations::new();
        let t0 = Instant::now();
        e.expect("ns/a", ScaleAction::Create, "a-1");
        e.expect("ns/a", ScaleAction::Create, "a-2");
        match e.satisfied("ns/a", t0) {
            ScaleSatisfaction::Unsatisfied { since, dirty } => {
                assert_eq!(since, Duration::ZERO);
                assert_eq!(dirty[&ScaleAction::Create], vec!["a-1", "a-2"]);
            }
            other => panic!("unexpected {other:?}"),
        }
        e.observe("ns/a", ScaleAction::Create, "a-1");
        let later = t0 + Duration::from_secs(7);
        match e.satisfied("ns/a", later) {
            ScaleSatisfaction::Unsatisfied { since, dirty } => {
                // The clock starts at the first unsatisfied check, not at the last.
                assert_eq!(since, Duration::from_secs(7));
                assert_eq!(dirty[&ScaleAction::Create], vec!["a-2"]);
            }
            other => panic!("unexpected {other:?}"),
        }
        e.observe("ns/a", ScaleAction::Create, "a-2");
        assert_eq!(e.satisfied("ns/a", later), ScaleSatisfaction::Satisfied);
    }

    #[test]
    fn pod_events_observe_what_the_store_shows() {
        let e = ScaleExpectations::new();
        for n in ["new", "gone", "late"] {
            e.expect("ns/a", ScaleAction::Create, n);
        }
        e.expect("ns/a", ScaleAction::Delete, "old");
        e.expect("ns/a", ScaleAction::Delete, "going");
        e.observe_event("ns/a", "new", Cached::Present, false);
        e.observe_event("ns/a", "going", Cached::Terminating, false);
        // A create and a delete seen at once: the delete event proves both.
        e.observe_event("ns/a", "gone", Cached::Absent, true);
        e.observe_event("ns/a", "old", Cached::Present, false);
        assert_eq!(e.pending("ns/a", ScaleAction::Create), vec!["late"]);
        assert_eq!(e.pending("ns/a", ScaleAction::Delete), vec!["old"]);
        let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta::default();
        assert_eq!(Cached::of(Some(&meta)), Cached::Present);
        assert_eq!(Cached::of(None), Cached::Absent);
    }

    #[test]
    fn scale_observe_wrong_action_does_not_satisfy() {
        let e = ScaleExpectations::new();
        e.expect("ns/a", ScaleAction::Delete, "a-1");
        e.observe("ns/a", ScaleAction::Create, "a-1");
        assert!(matches!(
            e.satisfied("ns/a", Instant::now()),
            ScaleSatisfaction::Unsatisfied { .. }
        ));
        e.observe("ns/a", ScaleAction::Delete, "a-1");
        assert_eq!(
            e.satisfied("ns/a", Instant::now()),
            ScaleSatisfaction::Satisfied
        );
    }

    #[test]
    fn scale_keys_are_independent_and_delete_clears() {
        let e = ScaleExpectations::new();
        e.expect("ns/a", ScaleAction::Create, "x");
        e.expect("ns/b", ScaleAction::Create, "x");
        e.delete("ns/a");
        assert_eq!(
            e.satisfied("ns/a", Instant::now()),
            ScaleSatisfaction::Satisfied
        );
        assert_eq!(e.pending("ns/b", ScaleAction::Create), vec!["x"]);
    }

    #[test]
    fn scale_unsatisfied_clock_restarts_after_satisfaction() {
        let e = ScaleExpectations::new();
        let t0 = Instant::now();
        e.expect("k", ScaleAction::Create, "p");
        let _ = e.satisfied("k", t0);
        e.observe("k", ScaleAction::Create, "p");
        e.expect("k", ScaleAction::Create, "q");
        let t1 = t0 + Duration::from_secs(100);
        assert!(matches!(
            e.satisfied("k", t1),
            ScaleSatisfaction::Unsatisfied { since, .. } if since == Duration::ZERO
        ));
    }

    #[test]
    fn version_expectation_lifecycle() {
        let e = ResourceVersionExpectations::new();
        let t0 = Instant::now();
        assert_eq!(e.satisfied("u1", "5", t0), VersionSatisfaction::Satisfied);
        e.expect("u1", "10");
        assert_eq!(
            e.satisfied("u1", "9", t0),
            VersionSatisfaction::Unsatisfied {
                since: Duration::ZERO
            }
        );
        assert_eq!(
            e.satisfied("u1", "9", t0 + Duration::from_secs(3)),
            VersionSatisfaction::Unsatisfied {
                since: Duration::from_secs(3)
            }
        );
        assert_eq!(e.satisfied("u1", "10", t0), VersionSatisfaction::Satisfied);
        assert!(e.is_empty());
    }

    #[test]
    fn version_expect_keeps_the_newest() {
        let e = ResourceVersionExpectations::new();
        e.expect("u", "20");
        e.expect("u", "15");
        assert!(matches!(
            e.satisfied("u", "16", Instant::now()),
            VersionSatisfaction::Unsatisfied { .. }
        ));
        e.observe("u", "21");
        assert!(e.is_empty());
    }

    #[test]
    fn version_unparsable_values() {
        // An unparsable expectation is replaced by anything and satisfied by anything.
        assert!(is_version_newer_or_equal("abc", "1"));
        // An unparsable observation never satisfies a numeric expectation.
        assert!(!is_version_newer_or_equal("1", "abc"));
        assert!(is_version_newer_or_equal("", "abc"));
        assert!(is_version_newer_or_equal("10", "10"));
        assert!(!is_version_newer_or_equal("11", "10"));
    }

    /// The cache as a map of name to state; names not in it are absent.
    fn cache<'a>(entries: &'a [(&'a str, Cached)]) -> impl Fn(&str) -> Cached + 'a {
        move |n| {
            entries
                .iter()
                .find(|(k, _)| *k == n)
                .map_or(Cached::Absent, |(_, c)| *c)
        }
    }

    #[test]
    fn cache_view_decides_each_action() {
        // (action, what the cache shows, observed?)
        let table = [
            (ScaleAction::Create, Cached::Absent, false),
            (ScaleAction::Create, Cached::Present, true),
            (ScaleAction::Create, Cached::Terminating, true),
            (ScaleAction::Delete, Cached::Absent, true),
            (ScaleAction::Delete, Cached::Present, false),
            // A graceful deletion counts as the delete, as upstream's event handler does.
            (ScaleAction::Delete, Cached::Terminating, true),
        ];
        for (action, cached, want) in table {
            assert_eq!(cached.shows(action), want, "{action:?} with {cached:?}");
        }
    }

    #[test]
    fn observe_cache_clears_what_the_store_shows_after_lost_events() {
        let e = ScaleExpectations::new();
        e.expect("ns/cs", ScaleAction::Create, "cs-a");
        e.expect("ns/cs", ScaleAction::Create, "cs-b");
        e.expect("ns/cs", ScaleAction::Delete, "cs-old1");
        e.expect("ns/cs", ScaleAction::Delete, "cs-old2");
        e.expect("ns/other", ScaleAction::Create, "other-x");
        // No event was seen: cs-a is cached, cs-b not yet; cs-old1 is terminating, cs-old2 is
        // still there.
        let view = [
            ("cs-a", Cached::Present),
            ("cs-old1", Cached::Terminating),
            ("cs-old2", Cached::Present),
        ];
        assert_eq!(e.observe_cache("ns/cs", cache(&view)), 2);
        assert_eq!(e.pending("ns/cs", ScaleAction::Create), vec!["cs-b"]);
        assert_eq!(e.pending("ns/cs", ScaleAction::Delete), vec!["cs-old2"]);
        // Other workloads are left alone.
        assert_eq!(e.pending("ns/other", ScaleAction::Create), vec!["other-x"]);

        // Later snapshot: cs-b arrived and cs-old2 is gone (deleted during a watch gap).
        let view = [("cs-a", Cached::Present), ("cs-b", Cached::Present)];
        assert_eq!(e.observe_cache("ns/cs", cache(&view)), 2);
        assert_eq!(
            e.satisfied("ns/cs", Instant::now()),
            ScaleSatisfaction::Satisfied
        );
        assert!(!e.keys().contains(&"ns/cs".to_string()));
    }

    #[test]
    fn retain_keys_drops_deleted_workloads() {
        let e = ScaleExpectations::new();
        e.expect("ns/gone", ScaleAction::Create, "x");
        e.expect("ns/live", ScaleAction::Create, "y");
        e.retain_keys(|k| k == "ns/live");
        assert_eq!(e.keys(), vec!["ns/live".to_string()]);
    }

    proptest::proptest! {
        /// Whatever was expected, a snapshot in which every create is present and every delete
        /// is absent or terminating satisfies the workload.
        #[test]
        fn a_snapshot_that_shows_everything_satisfies(
            creates in proptest::collection::btree_set("[a-z]{1,4}", 0..6),
            deletes in proptest::collection::btree_set("[A-Z]{1,4}", 0..6),
            terminating in proptest::bool::ANY,
        ) {
            let e = ScaleExpectations::new();
            for n in &creates { e.expect("k", ScaleAction::Create, n); }
            for n in &deletes { e.expect("k", ScaleAction::Delete, n); }
            let view = |n: &str| {
                if creates.contains(n) {
                    Cached::Present
                } else if terminating && deletes.contains(n) {
                    Cached::Terminating
                } else {
                    Cached::Absent
                }
            };
            e.observe_cache("k", view);
            proptest::prop_assert_eq!(e.satisfied("k", Instant::now()), ScaleSatisfaction::Satisfied);
        }

        #[test]
        fn version_satisfied_iff_cached_reaches_expected(exp in 0u64..1000, cached in 0u64..1000) {
            let e = ResourceVersionExpectations::new();
            e.expect("u", &exp.to_string());
            let sat = e.satisfied("u", &cached.to_string(), Instant::now());
            proptest::prop_assert_eq!(sat == VersionSatisfaction::Satisfied, cached >= exp);
        }

        #[test]
        fn scale_satisfied_after_observing_all(names in proptest::collection::btree_set("[a-z]{1,5}", 0..8)) {
            let e = ScaleExpectations::new();
            for n in &names { e.expect("k", ScaleAction::Create, n); }
            for n in &names { e.observe("k", ScaleAction::Create, n); }
            proptest::prop_assert_eq!(e.satisfied("k", Instant::now()), ScaleSatisfaction::Satisfied);
        }
    }
}
