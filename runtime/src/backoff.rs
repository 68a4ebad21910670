//! Per-object exponential backoff of failed reconciles, shared by every controller of the
//! manager and every duty of the daemon.
//!
//! The curve is controller-runtime's default item limiter (`ItemExponentialFailureRateLimiter`:
//! 5 ms, doubled after each consecutive failure of the same object, forgotten when a reconcile
//! of it succeeds) with the cap lowered from 1000 s to 5 min: a dev cluster's operator fixes a
//! problem and expects the controller to notice within minutes, not a quarter of an hour, and a
//! failure that lasts that long costs one request per object every 5 min.
//!
//! [`reset_on_success`] and [`requeue_with_backoff`] wrap a controller's reconcile function and
//! its error policy, so that no controller keeps its own retry arithmetic. The controller runner
//! ([`crate::runner`]) applies both to every controller of the manager and the daemon.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kube::Resource;
use kube::runtime::controller::Action;

/// Delays of one backoff curve: `base · 2^(failures − 1)`, at most `cap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub base: Duration,
    pub cap: Duration,
}

impl Policy {
    /// controller-runtime's base delay, our lower cap (see the module docs).
    pub const DEFAULT: Policy = Policy {
        base: Duration::from_millis(5),
        cap: Duration::from_secs(5 * 60),
    };

    /// The delay after the `failures`-th consecutive failure (1 for the first). Zero failures
    /// means no delay.
    pub fn delay(&self, failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        // 2^31 · 5 ms is far beyond any cap; saturate instead of overflowing.
        let factor = 1u32.checked_shl(failures - 1).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }
}

impl Default for Policy {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    failures: u32,
    /// When the last failure was recorded plus its delay.
    retry_at: Instant,
    failed_at: Instant,
}

/// Consecutive failures per object key, with the time before which a retry is not due.
#[derive(Debug, Default)]
pub struct Backoff {
    policy: Policy,
    inner: Mutex<HashMap<String, Entry>>,
}

impl Backoff {
    pub fn new(policy: Policy) -> Self {
        Self {
            policy,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // The map only holds counters; a panic elsewhere cannot make them unusable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a failure of `key` at `now` and returns how long to wait before the next try.
    pub fn fail(&self, key: &str, now: Instant) -> Duration {
        let mut map = self.lock();
        // An entry whose object was not retried for twice the cap belongs to a deleted object:
        // every live object in backoff is retried within one cap.
        let stale = self.policy.cap.saturating_mul(2);
        map.retain(|_, e| now.saturating_duration_since(e.failed_at) < stale);
        let failures = map.get(key).map_or(0, |e| e.failures).saturating_add(1);
        let delay = self.policy.delay(failures);
        map.insert(
            key.to_string(),
            Entry {
                failures,
                retry_at: now + delay,
                failed_at: now,
            },
        );
        delay
    }

    /// Forgets the failures of `key` (its reconcile succeeded).
    pub fn reset(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &str) -> u32 {
        self.lock().get(key).map_or(0, |e| e.failures)
    }

    /// How long `key` must still wait at `now` before its next try, if it must.
    pub fn remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let map = self.lock();
        let e = map.get(key)?;
        let left = e.retry_at.saturating_duration_since(now);
        (!left.is_zero()).then_some(left)
    }
}

/// The backoff key of an object: its UID (a re-created object starts afresh), else its
/// namespace and name.
pub fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    if let Some(uid) = &meta.uid {
        return uid.clone();
    }
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Wraps a reconcile function so that a success forgets the object's failures.
pub fn reset_on_success<K, C, E, F, Fut>(
    backoff: Arc<Backoff>,
    mut reconcile: F,
) -> impl FnMut(Arc<K>, Arc<C>) -> BoxFuture<'static, Result<Action, E>>
where
    K: Resource + Send + Sync + 'static,
    C: Send + Sync + 'static,
    E: Send + 'static,
    F: FnMut(Arc<K>, Arc<C>) -> Fut,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    move |obj, ctx| {
        let key = key_of(obj.as_ref());
        let backoff = backoff.clone();
        let fut = reconcile(obj, ctx);
        Box::pin(async move {
            let res = fut.await;
            if res.is_ok() {
                backoff.reset(&key);
            }
            res
        })
    }
}

/// An error policy that requeues the object after its backoff delay; `log` reports the failure
/// (each controller words it its own way) and is told the delay.
pub fn requeue_with_backoff<K, C, E, L>(
    backoff: Arc<Backoff>,
    log: L,
) -> impl Fn(Arc<K>, &E, Arc<C>) -> Action
where
    K: Resource,
    L: Fn(&K, &E, Duration),
{
    requeue_with_backoff_at_least(backoff, |_: &E| Duration::ZERO, log)
}

/// [`requeue_with_backoff`], but never sooner than `floor(err)`: for errors only a change of the
/// object can fix (that change triggers a reconcile by itself), a fast first retry would only
/// repeat the same refusal and its Event.
pub fn requeue_with_backoff_at_least<K, C, E, F, L>(
    backoff: Arc<Backoff>,
    floor: F,
    log: L,
) -> impl Fn(Arc<K>, &E, Arc<C>) -> Action
where
    K: Resource,
    F: Fn(&E) -> Duration,
    L: Fn(&K, &E, Duration),
{
    move |obj, err, _ctx| {
        let delay = backoff
            .fail(&key_of(obj.as_ref()), Instant::now())
            .max(floor(err));
        log(obj.as_ref(), err, delay);
        Action::requeue(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_curve_doubles_from_5ms_and_caps_at_5min() {
        let p = Policy::DEFAULT;
        let ms = |n| p.delay(n).as_millis();
        assert_eq!(ms(0), 0);
        assert_eq!(ms(1), 5);
        assert_eq!(ms(2), 10);
        assert_eq!(ms(3), 20);
        assert_eq!(ms(10), 2_560);
        assert_eq!(ms(16), 163_840);
        // 5 ms · 2^16 = 327.68 s is past the cap.
        assert_eq!(ms(17), 300_000);
        assert_eq!(ms(1_000), 300_000);
        assert_eq!(p.delay(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn failures_grow_per_key_and_success_resets() {
        let b = Backoff::new(Policy::DEFAULT);
        let t = Instant::now();
        assert_eq!(b.fail("a", t), Duration::from_millis(5));
        assert_eq!(b.fail("a", t), Duration::from_millis(10));
        assert_eq!(b.fail("a", t), Duration::from_millis(20));
        // Another object has its own count.
        assert_eq!(b.fail("b", t), Duration::from_millis(5));
        assert_eq!(b.failures("a"), 3);
        b.reset("a");
        assert_eq!(b.failures("a"), 0);
        assert_eq!(b.fail("a", t), Duration::from_millis(5));
        assert_eq!(b.failures("b"), 1);
    }

    #[test]
    fn remaining_counts_down_from_the_last_failure() {
        let policy = Policy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        };
        let b = Backoff::new(policy);
        let t = Instant::now();
        assert_eq!(b.remaining("a", t), None);
        b.fail("a", t);
        b.fail("a", t);
        assert_eq!(b.remaining("a", t), Some(Duration::from_secs(2)));
        assert_eq!(
            b.remaining("a", t + Duration::from_millis(1_500)),
            Some(Duration::from_millis(500))
        );
        assert_eq!(b.remaining("a", t + Duration::from_secs(2)), None);
    }

    #[test]
    fn entries_of_objects_not_retried_for_two_caps_are_dropped() {
        let policy = Policy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(10),
        };
        let b = Backoff::new(policy);
        let t = Instant::now();
        b.fail("gone", t);
        b.fail("live", t + Duration::from_secs(15));
        b.fail("other", t + Duration::from_secs(21));
        assert_eq!(b.failures("gone"), 0);
        assert_eq!(b.failures("live"), 1);
    }

    #[test]
    fn wrappers_back_off_and_reset() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let backoff = Arc::new(Backoff::default());
        let mut cm = ConfigMap::default();
        cm.metadata.uid = Some("u1".into());
        let cm = Arc::new(cm);
        let policy =
            requeue_with_backoff::<ConfigMap, (), String, _>(backoff.clone(), |_, _, _| {});
        let a1 = policy(cm.clone(), &"boom".to_string(), Arc::new(()));
        let a2 = policy(cm.clone(), &"boom".to_string(), Arc::new(()));
        assert_eq!(a1, Action::requeue(Duration::from_millis(5)));
        assert_eq!(a2, Action::requeue(Duration::from_millis(10)));
        let mut ok = reset_on_success(backoff.clone(), |_: Arc<ConfigMap>, _: Arc<()>| async {
            Ok::<_, String>(Action::await_change())
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(ok(cm.clone(), Arc::new(()))).expect("ok");
        assert_eq!(backoff.failures("u1"), 0);
    }

    #[test]
    fn a_floor_delays_only_the_errors_it_names() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let backoff = Arc::new(Backoff::default());
        let mut cm = ConfigMap::default();
        cm.metadata.uid = Some("u1".into());
        let cm = Arc::new(cm);
        let policy = requeue_with_backoff_at_least::<ConfigMap, (), String, _, _>(
            backoff.clone(),
            |e: &String| {
                if e == "needs a spec change" {
                    Duration::from_secs(30)
                } else {
                    Duration::ZERO
                }
            },
            |_, _, _| {},
        );
        let refused = policy(cm.clone(), &"needs a spec change".to_string(), Arc::new(()));
        assert_eq!(refused, Action::requeue(Duration::from_secs(30)));
        // The failure still counts toward the curve: the next one is the second step.
        let other = policy(cm.clone(), &"timeout".to_string(), Arc::new(()));
        assert_eq!(other, Action::requeue(Duration::from_millis(10)));
    }

    #[test]
    fn delays_never_shrink_and_stay_within_bounds() {
        let p = Policy::DEFAULT;
        for n in 1u32..200 {
            assert!(p.delay(n) >= p.delay(n - 1), "delay({n}) shrank");
            assert!(
                p.delay(n) >= p.base && p.delay(n) <= p.cap,
                "delay({n}) out of bounds"
            );
        }
    }
}
