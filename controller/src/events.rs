//! The controllers' Events: built one way (the reason doubles as the action, as upstream's
//! recorders report it) and published as a report, never as part of the work — a refusal is
//! logged and the reconcile goes on.
//!
//! Upstream's recorders (client-go's `EventSourceObjectSpamFilter`, on by default) write at most
//! 25 Events of one type about one object at once, then one every 5 minutes, and drop the rest
//! before they reach the API server. [`Recorder`] does the same: a rollout of 2,000 Pods of one
//! CloneSet writes a few dozen Events, not two per Pod, and the manager spends its CPU and the
//! API server's on the Pods.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Reporter};

/// Events of one type about one object written at once (client-go `defaultSpamBurst`).
const SPAM_BURST: f64 = 25.0;
/// The time one more such Event is let through after that (client-go `defaultSpamQPS`).
const SPAM_REFILL: Duration = Duration::from_secs(300);
/// The objects the filter remembers (client-go `maxLruCacheEntries`).
const SPAM_KEYS: usize = 4096;

/// A controller's Event recorder: kube's, behind upstream's spam filter (see the module docs).
#[derive(Clone)]
pub struct Recorder {
    inner: kube::runtime::events::Recorder,
    controller: String,
    spam: Arc<Mutex<SpamFilter>>,
}

impl Recorder {
    /// A recorder reporting as `reporter`; its filter is its own, as upstream's is per recorder.
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            controller: reporter.controller.clone(),
            inner: kube::runtime::events::Recorder::new(client, reporter),
            spam: Arc::default(),
        }
    }

    /// Writes `ev` about `about`, unless the spam filter drops it (then `Ok`, as upstream's
    /// recorder drops it without a word to its caller).
    pub async fn publish(&self, ev: &Event, about: &ObjectReference) -> Result<(), kube::Error> {
        let key = spam_key(&self.controller, about, ev.type_);
        // A poisoned lock only means another publish panicked: let the Event through.
        let allowed = self
            .spam
            .lock()
            .map(|mut f| f.allow(&key, Instant::now()))
            .unwrap_or(true);
        if !allowed {
            tracing::trace!(reason = %ev.reason, object = ?about.name, "Event dropped by the spam filter");
            return Ok(());
        }
        self.inner.publish(ev, about).await
    }
}

/// The filter's key (client-go `getSpamKey`): the reporter, the object, the Event's type.
fn spam_key(controller: &str, about: &ObjectReference, type_: EventType) -> String {
    let part = |v: &Option<String>| v.clone().unwrap_or_default();
    let type_ = match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    };
    [
        controller.to_owned(),
        part(&about.kind),
        part(&about.namespace),
        part(&about.name),
        part(&about.uid),
        part(&about.api_version),
        type_.to_owned(),
    ]
    .join("\u{1f}")
}

/// A token bucket per key, full at first: [`SPAM_BURST`] tokens, one more every
/// [`SPAM_REFILL`].
#[derive(Default)]
struct SpamFilter {
    buckets: HashMap<String, Bucket>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn tokens_at(&self, now: Instant) -> f64 {
        let refilled =
            now.saturating_duration_since(self.at).as_secs_f64() / SPAM_REFILL.as_secs_f64();
        (self.tokens + refilled).min(SPAM_BURST)
    }
}

impl SpamFilter {
    /// Whether an Event under `key` may be written at `now`; takes its token if so.
    fn allow(&mut self, key: &str, now: Instant) -> bool {
        if !self.buckets.contains_key(key) && self.buckets.len() >= SPAM_KEYS {
            self.shrink(now);
        }
        let b = self.buckets.entry(key.to_owned()).or_insert(Bucket {
            tokens: SPAM_BURST,
            at: now,
        });
        b.tokens = b.tokens_at(now);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Makes room: forgets the buckets full again (as good as none), then, if that was not
    /// enough, all but the most recently used half (upstream's LRU forgets one at a time; half
    /// at once keeps this off every insert).
    fn shrink(&mut self, now: Instant) {
        self.buckets.retain(|_, b| b.tokens_at(now) < SPAM_BURST);
        if self.buckets.len() < SPAM_KEYS {
            return;
        }
        let mut ats: Vec<Instant> = self.buckets.values().map(|b| b.at).collect();
        let keep = SPAM_KEYS / 2;
        let cut = ats.len() - keep;
        let (_, nth, _) = ats.select_nth_unstable(cut);
        let oldest_kept = *nth;
        self.buckets.retain(|_, b| b.at >= oldest_kept);
    }
}

/// An Event of `type_` with `reason` and `note`; `secondary` names the object it concerns (a Pod,
/// a revision), which also keeps Events about different objects from folding into one series.
pub fn event(
    type_: EventType,
    reason: &str,
    note: String,
    secondary: Option<ObjectReference>,
) -> Event {
    Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: reason.to_owned(),
        secondary,
    }
}

/// Publishes `ev` about `about`. A namespace being deleted refuses new Events (expected: logged at
/// debug); any other failure is logged at warn.
pub async fn publish_event(recorder: &Recorder, ev: &Event, about: &ObjectReference) {
    match recorder.publish(ev, about).await {
        Ok(()) => {}
        Err(kube::Error::Api(s)) if s.is_forbidden() && s.message.contains("being terminated") => {
            tracing::debug!(reason = %ev.reason, "event refused: the namespace is terminating");
        }
        Err(e) => tracing::warn!(error = %e, reason = %ev.reason, "failed to publish an Event"),
    }
}

/// [`event`] then [`publish_event`].
pub async fn publish(
    recorder: &Recorder,
    about: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    publish_event(recorder, &event(type_, reason, note, None), about).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn about(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("apps.kruise.io/v1alpha1".into()),
            kind: Some("CloneSet".into()),
            namespace: Some("default".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        }
    }

    #[test]
    fn twenty_five_at_once_then_one_every_five_minutes() {
        let mut f = SpamFilter::default();
        let key = spam_key("cloneset-controller", &about("app"), EventType::Normal);
        let t0 = Instant::now();
        let passed = (0..2000).filter(|_| f.allow(&key, t0)).count();
        assert_eq!(passed, 25);
        assert!(!f.allow(&key, t0 + Duration::from_secs(299)));
        assert!(f.allow(&key, t0 + Duration::from_secs(300)));
        assert!(!f.allow(&key, t0 + Duration::from_secs(301)));
    }

    #[test]
    fn each_object_type_and_reporter_has_its_own_budget() {
        let mut f = SpamFilter::default();
        let t0 = Instant::now();
        let normal = spam_key("cloneset-controller", &about("app"), EventType::Normal);
        for _ in 0..25 {
            assert!(f.allow(&normal, t0));
        }
        assert!(!f.allow(&normal, t0));
        for other in [
            spam_key("cloneset-controller", &about("app"), EventType::Warning),
            spam_key("cloneset-controller", &about("web"), EventType::Normal),
            spam_key("statefulset-controller", &about("app"), EventType::Normal),
        ] {
            assert!(f.allow(&other, t0), "{other}");
        }
    }

    #[test]
    fn a_full_filter_forgets_refilled_buckets_then_the_least_recent_half() {
        let mut f = SpamFilter::default();
        let t0 = Instant::now();
        let key = |i: usize| spam_key("c", &about(&format!("o{i}")), EventType::Normal);
        // One Event each for SPAM_KEYS objects, one second apart: none refilled yet.
        for i in 0..SPAM_KEYS {
            assert!(f.allow(&key(i), t0 + Duration::from_secs(i as u64)));
        }
        let late = t0 + Duration::from_secs(SPAM_KEYS as u64);
        assert!(f.allow(&key(SPAM_KEYS), late));
        assert!(f.buckets.len() <= SPAM_KEYS / 2 + 1, "{}", f.buckets.len());
        assert!(
            f.buckets.contains_key(&key(SPAM_KEYS - 1)),
            "the most recent stay"
        );
        assert!(!f.buckets.contains_key(&key(0)), "the oldest go");
        // Once their buckets are full again they are dropped first, all of them.
        let much_later = late + SPAM_REFILL * 30;
        let n = f.buckets.len();
        for i in 0..(SPAM_KEYS - n) {
            assert!(f.allow(&key(SPAM_KEYS + 1 + i), much_later));
        }
        assert_eq!(f.buckets.len(), SPAM_KEYS);
        assert!(f.allow(&key(2 * SPAM_KEYS + 1), much_later));
        assert_eq!(
            f.buckets.len(),
            SPAM_KEYS - n + 1,
            "the refilled ones forgotten"
        );
    }
}
