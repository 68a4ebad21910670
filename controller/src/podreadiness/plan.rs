//! The pure half of the pod-readiness controller: which Pods need the condition, the patch that
//! sets it, and the memory of Pods patched recently.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys::{self, k8s};
use kruise_api::pod as kpod;
use serde_json::json;

/// A pod just patched is not patched again for this long: the cache may still show the pod
/// without the condition for a moment, and patching it again then could overwrite a not-ready
/// key a later writer added meanwhile.
pub const RECENT: Duration = Duration::from_secs(10);

/// UIDs patched recently, so that the events racing our own write do not repeat it.
#[derive(Default)]
pub struct Recent(Mutex<HashMap<String, Instant>>);

impl Recent {
    /// True when `uid` was not claimed within `RECENT`; claims it.
    pub fn claim(&self, uid: &str, now: Instant) -> bool {
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
    pub fn release(&self, uid: &str) {
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

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
