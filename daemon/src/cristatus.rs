//! Whether the daemon reaches its node's CRI runtime, and who is told.
//!
//! Upstream's daemon exits when it finds no usable runtime, and the kubelet restarts it in a loop
//! with nothing but the log saying why. Here the daemon keeps running: [`supervise`] connects with
//! backoff, then keeps checking the connection, and reports each change once (not once per retry)
//! as a log line, an Event on the Node, the `kruise_daemon_cri_available` gauge and a condition on
//! the daemon's own Pod (what `kubectl kruise check` reads). The readiness endpoint follows it.
//! [`Tracker`] is the pure part: the state, what a new attempt changes, and the next delay.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::criruntime::{CriClient, CriError, SocketSource};
use crate::events::Events;
use crate::metrics::Metrics;

/// First retry delay after a failed attempt; it doubles up to [`MAX_BACKOFF`].
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between attempts while the runtime is unavailable: short enough that a runtime
/// started after the daemon is picked up within seconds.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How often a connected runtime is checked.
pub const CHECK_PERIOD: Duration = Duration::from_secs(10);
/// Deadline of one health check call.
const CHECK_TIMEOUT: Duration = Duration::from_secs(3);
/// An image name no one has: ImageStatus on it is the cheapest call that proves CRI v1 answers.
const PROBE_IMAGE: &str = "kruise-daemon-healthz-probe";
/// events.k8s.io refuses notes over 1 kB.
const MAX_NOTE: usize = 1000;

/// What the daemon knows about its runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CriStatus {
    /// No attempt finished yet.
    Unknown,
    Available {
        runtime: String,
        socket: String,
    },
    Unavailable {
        reason: String,
    },
}

impl CriStatus {
    pub fn is_available(&self) -> bool {
        matches!(self, CriStatus::Available { .. })
    }
}

/// The state machine: attempts in, changes worth reporting out.
#[derive(Debug)]
pub struct Tracker {
    status: CriStatus,
    /// Failed attempts in a row (drives the backoff).
    failures: u32,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            status: CriStatus::Unknown,
            failures: 0,
        }
    }
}

impl Tracker {
    pub fn status(&self) -> &CriStatus {
        &self.status
    }

    /// Records one attempt's outcome; returns the new status when it differs from the last one
    /// reported (a different failure reason counts as a change, the same one repeated does not).
    pub fn observe(&mut self, outcome: CriStatus) -> Option<CriStatus> {
        if outcome.is_available() {
            self.failures = 0;
        } else {
            self.failures = self.failures.saturating_add(1);
        }
        if outcome == self.status {
            return None;
        }
        self.status = outcome.clone();
        Some(outcome)
    }

    /// How long to wait before the next attempt: the check period while connected, else a
    /// doubling backoff from [`MIN_BACKOFF`] capped at [`MAX_BACKOFF`].
    pub fn next_delay(&self) -> Duration {
        if self.failures == 0 {
            return CHECK_PERIOD;
        }
        let doublings = (self.failures - 1).min(16);
        MIN_BACKOFF.saturating_mul(1 << doublings).min(MAX_BACKOFF)
    }
}

/// A failed connect or check, in the words a node's operator needs: which paths were tried, or
/// that the runtime answers but not with the CRI version the daemon speaks.
pub fn reason(e: &CriError) -> String {
    match e {
        CriError::Version { path, status } if status.code() == tonic::Code::Unimplemented => {
            format!(
                "the runtime at {} does not serve CRI v1 (runtime.v1.RuntimeService/Version: \
                 Unimplemented): kruise-daemon needs a runtime speaking CRI v1",
                path.display()
            )
        }
        other => other.to_string(),
    }
}

/// Where the daemon's own Pod is, to put the condition on it.
#[derive(Debug, Clone)]
pub struct OwnPod {
    pub namespace: String,
    pub name: String,
}

/// Everything [`supervise`] reports to.
#[derive(Clone)]
pub struct Reporters {
    pub client: kube::Client,
    pub node: String,
    pub own_pod: Option<OwnPod>,
    pub events: Events,
    pub metrics: Metrics,
}

impl Reporters {
    fn node_ref(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(self.node.clone()),
            // `kubectl describe node` looks Events up by a UID equal to the node's name, as the
            // kubelet writes them.
            uid: Some(self.node.clone()),
            ..Default::default()
        }
    }

    /// Log, Event and gauge: once per change.
    fn announce(&self, status: &CriStatus, retry_in: Duration) {
        match status {
            CriStatus::Unknown => {}
            CriStatus::Available { runtime, socket } => {
                self.metrics.set_cri_available(true);
                tracing::info!(%runtime, %socket, "CRI runtime available; starting the CRI duties");
                self.events.emit(
                    self.node_ref(),
                    false,
                    keys::DAEMON_REASON_CRI_AVAILABLE,
                    "ConnectCRI",
                    format!("kruise-daemon reached {runtime} at {socket}"),
                );
            }
            CriStatus::Unavailable { reason } => {
                self.metrics.set_cri_available(false);
                tracing::warn!(%reason, ?retry_in,
                    "CRI runtime unavailable; kruise-daemon keeps serving /healthz and /metrics \
                     and retries");
                let mut note = format!("kruise-daemon cannot use the CRI runtime: {reason}");
                truncate(&mut note, MAX_NOTE);
                self.events.emit(
                    self.node_ref(),
                    true,
                    keys::DAEMON_REASON_CRI_UNAVAILABLE,
                    "ConnectCRI",
                    note,
                );
            }
        }
    }

    /// Writes the condition on the daemon's Pod; false when it must be tried again.
    async fn write_condition(&self, status: &CriStatus) -> bool {
        let Some(pod) = &self.own_pod else {
            return true;
        };
        let Some(cond) = condition(status) else {
            return true;
        };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &pod.namespace);
        let patch = json!({"status": {"conditions": [cond]}});
        match pods
            .patch_status(&pod.name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, pod = %pod.name, "cannot write the CRI condition");
                false
            }
        }
    }
}

/// The Pod condition for a status (none while unknown).
pub fn condition(status: &CriStatus) -> Option<serde_json::Value> {
    let (ok, reason, message) = match status {
        CriStatus::Unknown => return None,
        CriStatus::Available { runtime, socket } => (
            "True",
            keys::DAEMON_REASON_CRI_AVAILABLE,
            format!("{runtime} at {socket}"),
        ),
        CriStatus::Unavailable { reason } => {
            ("False", keys::DAEMON_REASON_CRI_UNAVAILABLE, reason.clone())
        }
    };
    Some(json!({
        "type": keys::DAEMON_CONDITION_CRI_AVAILABLE,
        "status": ok,
        "reason": reason,
        "message": message,
        "lastTransitionTime": Time(jiff::Timestamp::now()),
    }))
}

fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

/// One attempt: connect when there is no client yet, else check the one there is.
async fn attempt(source: &SocketSource, client: &mut Option<CriClient>) -> CriStatus {
    let result = match client {
        None => CriClient::connect(source).await.map(|c| {
            *client = Some(c);
        }),
        Some(c) => match tokio::time::timeout(CHECK_TIMEOUT, c.image_status(PROBE_IMAGE)).await {
            Ok(r) => r.map(|_| ()),
            Err(_) => Err(CriError::Timeout {
                op: "ImageStatus",
                timeout: CHECK_TIMEOUT,
            }),
        },
    };
    match (result, client.as_ref()) {
        (Ok(()), Some(c)) => CriStatus::Available {
            runtime: format!("{} {}", c.runtime_name(), c.runtime_version()),
            socket: c.socket().display().to_string(),
        },
        (Ok(()), None) => CriStatus::Unknown,
        (Err(e), _) => CriStatus::Unavailable { reason: reason(&e) },
    }
}

/// Connects to the runtime (retrying with backoff until it answers), hands the first working
/// client to `connected`, then keeps checking it; every change of status is reported once and
/// published on `status` (the readiness endpoint reads it). Runs until `shutdown`.
pub async fn supervise(
    source: SocketSource,
    reporters: Reporters,
    status: watch::Sender<CriStatus>,
    connected: watch::Sender<Option<CriClient>>,
    shutdown: CancellationToken,
) {
    let mut tracker = Tracker::default();
    let mut client: Option<CriClient> = None;
    let mut condition_pending = false;
    loop {
        let outcome = attempt(&source, &mut client).await;
        if let Some(changed) = tracker.observe(outcome) {
            reporters.announce(&changed, tracker.next_delay());
            status.send_replace(changed);
            condition_pending = true;
        }
        if connected.borrow().is_none() && client.is_some() {
            connected.send_replace(client.clone());
        }
        if condition_pending {
            condition_pending = !reporters.write_condition(tracker.status()).await;
        }
        let delay = if condition_pending {
            tracker.next_delay().min(MIN_BACKOFF * 5)
        } else {
            tracker.next_delay()
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn down(r: &str) -> CriStatus {
        CriStatus::Unavailable { reason: r.into() }
    }

    fn up() -> CriStatus {
        CriStatus::Available {
            runtime: "containerd v2".into(),
            socket: "/hostvarrun/containerd/containerd.sock".into(),
        }
    }

    #[test]
    fn each_change_is_reported_once_not_once_per_retry() {
        let mut t = Tracker::default();
        assert_eq!(t.observe(down("no socket")), Some(down("no socket")));
        for _ in 0..5 {
            assert_eq!(t.observe(down("no socket")), None);
        }
        // A different cause is news: the socket appeared but does not speak CRI v1.
        assert_eq!(
            t.observe(down("Unimplemented")),
            Some(down("Unimplemented"))
        );
        assert_eq!(t.observe(up()), Some(up()));
        assert_eq!(t.observe(up()), None);
        assert!(t.status().is_available());
        assert_eq!(t.observe(down("gone")), Some(down("gone")));
    }

    #[test]
    fn retries_back_off_to_a_cap_and_reset_once_connected() {
        let mut t = Tracker::default();
        let delays: Vec<u64> = (0..7)
            .map(|_| {
                t.observe(down("x"));
                t.next_delay().as_secs()
            })
            .collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 10, 10, 10]);
        for _ in 0..100 {
            t.observe(down("x"));
        }
        assert_eq!(t.next_delay(), MAX_BACKOFF);
        t.observe(up());
        assert_eq!(t.next_delay(), CHECK_PERIOD);
        t.observe(down("x"));
        assert_eq!(t.next_delay(), MIN_BACKOFF);
    }

    #[test]
    fn condition_says_why() {
        assert_eq!(condition(&CriStatus::Unknown), None);
        let c = condition(&down("no CRI socket found; tried /a.sock")).expect("condition");
        assert_eq!(c["type"], keys::DAEMON_CONDITION_CRI_AVAILABLE);
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], keys::DAEMON_REASON_CRI_UNAVAILABLE);
        assert_eq!(c["message"], "no CRI socket found; tried /a.sock");
        let c = condition(&up()).expect("condition");
        assert_eq!(c["status"], "True");
        assert_eq!(c["reason"], keys::DAEMON_REASON_CRI_AVAILABLE);
    }

    #[test]
    fn a_runtime_without_cri_v1_is_named_as_such() {
        let e = CriError::Version {
            path: "/hostvarrun/old.sock".into(),
            status: tonic::Status::unimplemented("unknown service runtime.v1.RuntimeService"),
        };
        let r = reason(&e);
        assert!(
            r.contains("/hostvarrun/old.sock") && r.contains("CRI v1"),
            "{r}"
        );
        let e = CriError::NoSocket(vec!["/r/a.sock".into(), "/r/b/b.sock".into()]);
        assert_eq!(
            reason(&e),
            "no CRI socket found; tried /r/a.sock, /r/b/b.sock"
        );
    }

    #[test]
    fn notes_are_cut_on_a_char_boundary() {
        let mut s = "é".repeat(600);
        truncate(&mut s, MAX_NOTE);
        assert!(s.len() <= MAX_NOTE && s.chars().all(|c| c == 'é'));
    }
}
