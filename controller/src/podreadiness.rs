//! The pod-readiness controller: a pod that carries the `KruisePodReady` readiness gate (the
//! webhook injects it) but no such condition yet gets the condition set to True, so it can
//! become Ready. Later writers add not-ready keys to hold it down.
//!
//! It runs on the shared runner ([`crate::runner`]) over the Pod cache's store: a failed patch
//! is requeued with the pod's exponential backoff instead of being given up after a few tries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::cloneset::podutil;
use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::runner::{Controller, ReconcileError};

const NAME: &str = "podreadiness";
const CONCURRENCY: u16 = 4;
/// A pod just patched is not patched again for this long: the cache may still show the pod
/// without the condition for a moment, and patching it again then could overwrite a not-ready
/// key a later writer added meanwhile.
const RECENT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
        }
    }
}

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
    has_gate(pod)
        && pod.metadata.deletion_timestamp.is_none()
        && podutil::condition(pod, keys::KRUISE_POD_READY).is_none()
}

/// Whether the pod carries the `KruisePodReady` readiness gate.
pub fn has_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.condition_type == keys::KRUISE_POD_READY))
}

/// The `KruisePodReady` condition after adding (`add`) or removing a not-ready key, or `None`
/// when nothing changes (or the pod has no gate). The condition is False while any key is held.
pub fn condition_with_key(
    pod: &Pod,
    msg: &kruise_api::appspub::PodReadinessMessage,
    add: bool,
    now: Timestamp,
) -> Result<Option<k8s_openapi::api::core::v1::PodCondition>, kruise_api::Error> {
    if !has_gate(pod) {
        return Ok(None);
    }
    let current = podutil::condition(pod, keys::KRUISE_POD_READY);
    let message = current.and_then(|c| c.message.clone()).unwrap_or_default();
    let (message, changed) = if add {
        kruise_api::appspub::add_readiness_message(&message, msg)?
    } else {
        kruise_api::appspub::remove_readiness_message(&message, msg)?
    };
    let status = if kruise_api::appspub::parse_readiness_messages(&message)?.is_empty() {
        "True"
    } else {
        "False"
    };
    let status_changed = current.is_none_or(|c| c.status != status);
    if !changed && !status_changed {
        return Ok(None);
    }
    let mut cond = current.cloned().unwrap_or_default();
    cond.type_ = keys::KRUISE_POD_READY.to_string();
    if status_changed {
        cond.last_transition_time = Some(Time(now));
    }
    cond.status = status.to_string();
    cond.message = Some(message);
    Ok(Some(cond))
}

/// The status patch that adds `KruisePodReady=True`.
pub fn condition_patch(now: Timestamp) -> serde_json::Value {
    json!({
        "status": {
            "conditions": [{
                "type": keys::KRUISE_POD_READY,
                "status": "True",
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
    let wanted = pods
        .live_pods()
        .filter(|p| futures::future::ready(needs_condition(p)))
        .map(|p| ObjectRef::from_obj(p.as_ref()));
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
    use crate::cloneset::podutil::testpod::pod;
    use k8s_openapi::api::core::v1::PodReadinessGate;

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
        let with_cond = crate::cloneset::podutil::testpod::P(gated())
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
            condition_with_key(&pod("a").build(), &msg, true, t)
                .expect("ok")
                .is_none()
        );
        let held = condition_with_key(&gated(), &msg, true, t)
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
        assert!(condition_with_key(&p, &msg, true, t).expect("ok").is_none());
        let freed = condition_with_key(&p, &msg, false, t)
            .expect("ok")
            .expect("changed");
        assert_eq!(freed.status, "True");
        assert_eq!(freed.message.as_deref(), Some("[]"));
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
