//! Pure decisions of the ContainerRecreateRequest controller (manager side): the next step for a
//! request given its pod and the time, the container status snapshot the daemon waits for, and
//! the not-ready key the request holds (the KruisePodReady write itself is
//! [`kruise_api::appspub::kruise_pod_ready_condition`]).

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{
    ContainerRecreateRequest, ContainerRecreateRequestPhase,
    ContainerRecreateRequestSyncContainerStatus,
};
use kruise_api::appspub::PodReadinessMessage;
use kruise_api::keys::{self, k8s};
use kube::ResourceExt;

use kruise_webhook::crr::admit::{self, AdmitError};

/// How long a new request may wait for the daemon to give it a phase.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a Recreating request is looked at (snapshot refresh) without events.
pub const RECREATING_RESYNC: Duration = Duration::from_secs(3);
pub const MSG_POD_GONE: &str = "pod has gone";
pub const MSG_NO_DAEMON: &str = "daemon has not responded for a long time";
pub const MSG_DEADLINE: &str = "recreating has exceeded the activeDeadlineSeconds";
/// Reason and message of the PreRecreateGrace condition.
pub const GRACE_REASON: &str = "PreRecreateGrace";
pub const GRACE_MESSAGE: &str =
    "Pod has been forced to not-ready for unreadyGracePeriodSeconds drain";

/// The not-ready key a request holds on its pod.
pub fn readiness_key(crr: &ContainerRecreateRequest) -> PodReadinessMessage {
    PodReadinessMessage::new(
        keys::READINESS_USER_AGENT_CRR,
        format!("{}/{}", crr.namespace().unwrap_or_default(), crr.name_any()),
    )
}

pub fn has_finalizer(crr: &ContainerRecreateRequest) -> bool {
    crate::runner::finalizer::has(crr, keys::CRR_UNREADY_ACQUIRED_FINALIZER)
}

fn has_grace_condition(crr: &ContainerRecreateRequest) -> bool {
    crr.status
        .iter()
        .flat_map(|s| s.conditions.iter())
        .any(|c| {
            c.type_ == keys::CRR_CONDITION_PRE_RECREATE_GRACE && c.status == k8s::CONDITION_TRUE
        })
}

fn secs(n: i64) -> Duration {
    Duration::from_secs(u64::try_from(n.max(0)).unwrap_or(0))
}

fn left(total: Duration, since: Timestamp, now: Timestamp) -> Option<Duration> {
    total
        .checked_sub(now.duration_since(since).unsigned_abs())
        .filter(|d| !d.is_zero())
}

fn min_opt(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// One step of a reconcile; the shell performs it and the resulting watch event brings the
/// next one.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Finished or deleted while holding the pod: remove the not-ready key (when
    /// `remove_key`) and then the finalizer.
    Release { remove_key: bool },
    /// Finished: drop the active label so the daemon stops watching it.
    DropActiveLabel,
    /// Finished and past `ttlSecondsAfterFinished`.
    Delete,
    /// Fill in what the CRR webhook would have (see [`admit::admit`]).
    Admit(Box<ContainerRecreateRequest>),
    /// Complete the request (phase Completed, completionTime, message).
    Complete(String),
    /// Recreating: write the snapshot when it changed, take the pod's readiness for the
    /// unready grace period when asked, and look again after `requeue`.
    Recreating {
        snapshot: Option<Vec<ContainerRecreateRequestSyncContainerStatus>>,
        acquire_unready: bool,
        requeue: Duration,
    },
    /// Nothing to do now; look again after this long (or on the next event).
    Wait(Option<Duration>),
}

/// The next step for `crr`. `pod` is the request's pod, `None` when it does not exist.
pub fn next_step(crr: &ContainerRecreateRequest, pod: Option<&Pod>, now: Timestamp) -> Step {
    let status = crr.status.as_ref();
    let completed = status.and_then(|s| s.completion_time.as_ref());
    let deleting = crr.metadata.deletion_timestamp.is_some();
    if deleting || completed.is_some() {
        if has_finalizer(crr) {
            let remove_key = pod.is_some_and(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && kruise_api::pod::has_readiness_gate(p, keys::KRUISE_POD_READY)
            });
            return Step::Release { remove_key };
        }
        if deleting {
            return Step::Wait(None);
        }
        if crr.labels().contains_key(keys::CRR_ACTIVE_LABEL) {
            return Step::DropActiveLabel;
        }
        let (Some(ttl), Some(done)) = (crr.spec.ttl_seconds_after_finished, completed) else {
            return Step::Wait(None);
        };
        return match left(secs(i64::from(ttl)), done.0, now) {
            Some(d) => Step::Wait(Some(d)),
            None => Step::Delete,
        };
    }
    let pod_uid = crr.labels().get(keys::CRR_POD_UID_LABEL);
    let live_pod = pod.filter(|p| p.metadata.deletion_timestamp.is_none());
    if status.is_none() && !admit::is_admitted(crr) {
        return match live_pod {
            Some(p) => match admit::admit(crr, p) {
                Ok(a) => Step::Admit(Box::new(a)),
                Err(e) => Step::Complete(e.to_string()),
            },
            None => Step::Complete(
                AdmitError::PodNotFound {
                    namespace: crr.namespace().unwrap_or_default(),
                    pod: crr.spec.pod_name.clone(),
                }
                .to_string(),
            ),
        };
    }
    let Some(pod) = live_pod.filter(|p| p.metadata.uid.as_ref() == pod_uid) else {
        return Step::Complete(MSG_POD_GONE.to_string());
    };
    let created = crr
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(now, |t| t.0);
    let mut requeue = None;
    if status.is_none() {
        match left(RESPONSE_TIMEOUT, created, now) {
            None => return Step::Complete(MSG_NO_DAEMON.to_string()),
            Some(d) => requeue = min_opt(requeue, d),
        }
    }
    if let Some(deadline) = crr.spec.active_deadline_seconds {
        match left(secs(deadline), created, now) {
            None => return Step::Complete(MSG_DEADLINE.to_string()),
            Some(d) => requeue = min_opt(requeue, d),
        }
    }
    if status.map(|s| s.phase) != Some(ContainerRecreateRequestPhase::Recreating) {
        return Step::Wait(requeue);
    }
    let current = status
        .map(|s| s.container_status_snapshot.clone())
        .unwrap_or_default();
    let fresh = snapshot(crr, pod, created);
    let snapshot = ((current.is_empty() || !fresh.is_empty()) && fresh != current).then_some(fresh);
    let wants_grace = crr
        .spec
        .strategy
        .as_ref()
        .is_some_and(|s| s.unready_grace_period_seconds.is_some());
    Step::Recreating {
        snapshot,
        acquire_unready: wants_grace && !has_grace_condition(crr),
        requeue: requeue.map_or(RECREATING_RESYNC, |r| r.min(RECREATING_RESYNC)),
    }
}

/// Statuses of the request's containers that run a container started after the request was
/// made (the new ones), in spec order.
pub fn snapshot(
    crr: &ContainerRecreateRequest,
    pod: &Pod,
    created: Timestamp,
) -> Vec<ContainerRecreateRequestSyncContainerStatus> {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    crr.spec
        .containers
        .iter()
        .filter_map(|c| {
            let st = statuses?.iter().find(|s| s.name == c.name)?;
            let started = st.state.as_ref()?.running.as_ref()?.started_at.as_ref()?;
            if started.0 < created {
                return None;
            }
            Some(ContainerRecreateRequestSyncContainerStatus {
                name: st.name.clone(),
                ready: st.ready,
                restart_count: st.restart_count,
                container_id: st.container_id.clone().unwrap_or_default(),
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
