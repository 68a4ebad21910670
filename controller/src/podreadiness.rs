//! The pod-readiness controller: a pod that carries the `KruisePodReady` readiness gate (the
//! webhook injects it) but no such condition yet gets the condition set to True, so it can
//! become Ready. Later writers add not-ready keys to hold it down.
//!
//! It runs on the shared runner ([`crate::runner`]) over the Pod cache's store: a failed patch
//! is requeued with the pod's exponential backoff instead of being given up after a few tries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys::{self, k8s};
use kruise_api::pod as kpod;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::runner::Controller;

const NAME: &str = "podreadiness";
const CONCURRENCY: u16 = 4;
/// A pod just patched is not patched again for this long: the cache may still show the pod
/// without the condition for a moment, and patching it again then could overwrite a not-ready
/// key a later writer added meanwhile.
const RECENT: Duration = Duration::from_secs(10);

/// The controller has no failure kind of its own: its error is a failed API call.
pub use crate::runner::KubeError as Error;

/// UIDs patched recently, so that the events racing our own write do not repeat it.
#[derive(Default)]
struct Recent(Mutex<HashMap<String, Instant>>);

impl Recent {
    /// True when `uid` was not claimed within `RECENT`; claims it.
    fn claim(&self, uid: &str, now: Instant) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, t| now.duration_since(*t) < RECENT);
        if m.contains_key(uid) {
            return false;
        }
        m.insert(uid.to_string(), now);
        true
    }

    /// Gives up the claim of `uid`: its patch failed, and the retry must not be mistaken for
    /// an event racing a write that landed.
    fn release(&self, uid: &str) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(uid);
    }
}

/// Whether the controller has to set the condition on this pod.
pub fn needs_condition(pod: &Pod) -> bool {
    kpod::has_readiness_gate(pod, keys::KRUISE_POD_READY)
        && pod.metadata.deletion_timestamp.is_none()
        && kpod::condition(pod, keys::KRUISE_POD_READY).is_none()
}

/// The status patch that adds `KruisePodReady=True`.
pub fn condition_patch(now: Timestamp) -> serde_json::Value {
    json!({
        "status": {
            "conditions": [{
                "type": keys::KRUISE_POD_READY,
                "status": k8s::CONDITION_TRUE,
                "lastTransitionTime": Time(now),
            }]
        }
    })
}

struct Ctx {
    client: Client,
    recent: Recent,
}

/// Runs until `shutdown`.
pub async fn run(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let wanted = pods.live_targets(|p| needs_condition(p).then(|| ObjectRef::from_obj(p.as_ref())));
    let ctx = Arc::new(Ctx {
        client,
        recent: Recent::default(),
    });
    Controller::on_store(NAME, pods.store().clone(), metrics, shutdown)
        .concurrency(CONCURRENCY)
        .trigger_refs(wanted)
        .run(reconcile, ctx)
        .await;
}

/// Sets `KruisePodReady=True` on a gated pod that has no such condition yet. A failed patch is
/// returned, so the runner retries it with the pod's backoff.
async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    // The store may hold a newer pod than the event that queued it: decide on what it holds.
    if !needs_condition(&pod) {
        return Ok(Action::await_change());
    }
    let (Some(ns), Some(name)) = (
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref(),
    ) else {
        return Ok(Action::await_change());
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if !ctx.recent.claim(&uid, Instant::now()) {
        return Ok(Action::await_change());
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    // Strategic merge keys conditions by type, so other conditions are left alone.
    let res = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(condition_patch(Timestamp::now())),
        )
        .await;
    match res {
        Ok(_) => {
            tracing::debug!("set KruisePodReady=True");
            Ok(Action::await_change())
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(Action::await_change()),
        Err(e) => {
            ctx.recent.release(&uid);
            Err(e.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::podutil::testpod::pod;
    use k8s_openapi::api::core::v1::{PodCondition, PodReadinessGate};
    use kruise_api::appspub::{PodReadinessMessage, kruise_pod_ready_condition};

    fn gated() -> Pod {
        let mut p = pod("a").build();
        p.spec.get_or_insert_default().readiness_gates = Some(vec![PodReadinessGate {
            condition_type: keys::KRUISE_POD_READY.into(),
        }]);
        p
    }

    #[test]
    fn only_gated_pods_without_the_condition() {
        assert!(!needs_condition(&pod("a").build()));
        assert!(needs_condition(&gated()));
        let with_cond = crate::workload::podutil::testpod::P(gated())
            .cond(keys::KRUISE_POD_READY, "False", 0)
            .build();
        assert!(!needs_condition(&with_cond));
        let mut deleting = gated();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert!(!needs_condition(&deleting));
    }

    #[test]
    fn not_ready_keys() {
        use kruise_api::appspub::PodReadinessMessage;
        let msg = PodReadinessMessage::new(
            keys::READINESS_USER_AGENT_LIFECYCLE,
            keys::READINESS_KEY_PRE_UPDATE_HOOK,
        );
        let t = Timestamp::UNIX_EPOCH;
        assert!(
            kruise_pod_ready_condition(&pod("a").build(), &msg, true, t)
                .expect("ok")
                .is_none()
        );
        let held = kruise_pod_ready_condition(&gated(), &msg, true, t)
            .expect("ok")
            .expect("changed");
        assert_eq!(held.status, "False");
        assert!(
            held.message
                .as_deref()
                .is_some_and(|m| m.contains("preUpdateHook"))
        );
        let mut p = gated();
        p.status.get_or_insert_default().conditions = Some(vec![held]);
        assert!(
            kruise_pod_ready_condition(&p, &msg, true, t)
                .expect("ok")
                .is_none()
        );
        let freed = kruise_pod_ready_condition(&p, &msg, false, t)
            .expect("ok")
            .expect("changed");
        assert_eq!(freed.status, "True");
        assert_eq!(freed.message.as_deref(), Some("[]"));
    }

    /// (what, pod, add?, written (status, transition time) or nothing).
    type Case<'a> = (&'a str, Pod, bool, Option<(&'a str, Timestamp)>);

    /// Where the old hand-written write differed from upstream's `addNotReadyKey` /
    /// `removeNotReadyKey`, upstream wins.
    #[test]
    fn not_ready_keys_follow_upstream() {
        use kruise_api::appspub::dump_readiness_messages;
        let a = PodReadinessMessage::new(keys::READINESS_USER_AGENT_LIFECYCLE, "a");
        let b = PodReadinessMessage::new(keys::READINESS_USER_AGENT_CRR, "b");
        let (then, now) = (
            Timestamp::UNIX_EPOCH,
            Timestamp::from_second(100).expect("ts"),
        );
        let with = |status: &str, held: &[PodReadinessMessage]| {
            let mut p = gated();
            p.status.get_or_insert_default().conditions = Some(vec![PodCondition {
                type_: keys::KRUISE_POD_READY.into(),
                status: status.into(),
                message: Some(dump_readiness_messages(held)),
                last_transition_time: Some(Time(then)),
                ..Default::default()
            }]);
            p
        };
        let cases: Vec<Case<'_>> = vec![
            // The old code flipped a True condition to False when its key was already listed.
            (
                "held key, True",
                with("True", std::slice::from_ref(&a)),
                true,
                None,
            ),
            // The old code kept the transition time when the status stayed False.
            (
                "second key",
                with("False", std::slice::from_ref(&b)),
                true,
                Some(("False", now)),
            ),
            // The old code wrote True on removal from a pod without the condition.
            ("remove, no condition", gated(), false, None),
            // The old code wrote True when the key to remove was not listed.
            ("remove absent key", with("False", &[]), false, None),
            // Another key stays: the status is left as it is.
            (
                "remove one of two",
                with("False", &[a.clone(), b.clone()]),
                false,
                Some(("False", now)),
            ),
        ];
        for (what, p, add, want) in cases {
            let got = kruise_pod_ready_condition(&p, &a, add, now).expect("readable");
            let got = got.as_ref().map(|c| {
                (
                    c.status.as_str(),
                    c.last_transition_time.as_ref().map_or(then, |t| t.0),
                )
            });
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn recent_claims_expire() {
        let r = Recent::default();
        let t0 = Instant::now();
        assert!(r.claim("a", t0));
        assert!(!r.claim("a", t0 + Duration::from_secs(1)));
        assert!(r.claim("b", t0));
        assert!(r.claim("a", t0 + RECENT + Duration::from_secs(1)));
    }

    #[test]
    fn a_released_claim_is_retried_at_once() {
        let r = Recent::default();
        let t0 = Instant::now();
        assert!(r.claim("a", t0));
        assert!(r.claim("b", t0));
        // The patch of "a" failed: its retry must patch, while "b" (patched) stays claimed.
        r.release("a");
        assert!(r.claim("a", t0 + Duration::from_millis(5)));
        assert!(!r.claim("b", t0 + Duration::from_millis(5)));
        // Releasing what was never claimed is harmless.
        r.release("c");
        assert!(r.claim("c", t0));
    }

    #[test]
    fn patch_shape() {
        let p = condition_patch(Timestamp::UNIX_EPOCH);
        assert_eq!(p["status"]["conditions"][0]["type"], keys::KRUISE_POD_READY);
        assert_eq!(p["status"]["conditions"][0]["status"], "True");
        assert_eq!(
            p["status"]["conditions"][0]["lastTransitionTime"],
            "1970-01-01T00:00:00Z"
        );
    }
}
