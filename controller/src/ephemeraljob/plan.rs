//! The pure decisions of one EphemeralJob reconcile (upstream `Reconcile` in
//! `ephemeraljob_controller.go` with `ephemeraljob_utils.go` and `econtainer/`), time a
//! parameter and no API calls: which Pods are targets ([`targets`]: upstream `filterPods`), what
//! a target's injected containers amount to ([`pod_state`]: upstream `parseEphemeralPodStatus`),
//! the status ([`status`]: upstream `calculateStatus`), and where to inject next ([`plan`]:
//! upstream `syncTargetPods`).

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1alpha1::ephemeraljob::{owns, reasons};
use kruise_api::apps::v1alpha1::{
    EphemeralJob, EphemeralJobCondition, EphemeralJobConditionType as Cond, EphemeralJobPhase,
    EphemeralJobStatus,
};
use kruise_api::{keys, selector};

use crate::workload::podutil;

/// Kubelet's reason for an ephemeral container it could not start (upstream counts it failed).
const RUN_CONTAINER_ERROR: &str = "RunContainerError";

/// What a target's injected containers amount to (upstream maps them onto Pod phases).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Every template container exited 0.
    Succeeded,
    /// One exited non-zero or could not start.
    Failed,
    /// One runs.
    Running,
    /// One waits to start.
    Waiting,
    /// Not injected yet, or no status yet.
    Unknown,
}

/// A Pod left out because a container of another origin has a name the template uses: the
/// API server would refuse the injection (names are unique across all of a Pod's containers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub pod: String,
    pub container: String,
    /// `containers`, `initContainers` or `ephemeralContainers`.
    pub list: &'static str,
}

/// The job's targets, oldest first, and the matched Pods left out for a name conflict.
#[derive(Debug, Default)]
pub struct Targets<'a> {
    pub pods: Vec<&'a Pod>,
    pub conflicts: Vec<Conflict>,
}

/// What one reconcile of an unfinished job writes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Target Pods to inject into, by name, in order.
    pub inject: Vec<String>,
    pub conflicts: Vec<Conflict>,
    pub status: EphemeralJobStatus,
    /// Look again after this long (the deadline), if nothing happens sooner.
    pub requeue: Option<Duration>,
}

/// The finished job's TTL: delete it now, or look again when it will have passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    Delete,
    Wait(Duration),
}

/// Whether the job has finished (it has a completion time; its status is final then).
pub fn is_finished(job: &EphemeralJob) -> bool {
    job.status
        .as_ref()
        .is_some_and(|s| s.completion_time.is_some())
}

/// The TTL decision of a finished job (upstream: `ttlSecondsAfterFinished`, 1800 when unset,
/// counted from `completionTime`).
pub fn ttl(job: &EphemeralJob, done: Timestamp, now: Timestamp) -> Ttl {
    let ttl = SignedDuration::from_secs(i64::from(job.spec.ttl_seconds_after_finished()));
    let left = ttl - now.duration_since(done);
    match Duration::try_from(left) {
        Ok(d) if !d.is_zero() => Ttl::Wait(d),
        _ => Ttl::Delete,
    }
}

/// Whether `pod` is one the job's selector picks (same namespace, labels match). An empty
/// selector picks nothing (upstream's Pod event handler; the webhook refuses one).
pub fn selects(job: &EphemeralJob, pod: &Pod) -> bool {
    pod.metadata.namespace == job.metadata.namespace
        && !selector::is_empty(&job.spec.selector)
        && podutil::labels(pod).is_some_and(|l| selector::matches(&job.spec.selector, l))
}

fn template_names(job: &EphemeralJob) -> BTreeSet<&str> {
    job.spec
        .template
        .ephemeral_containers
        .iter()
        .map(|c| c.name.as_str())
        .collect()
}

fn uid(job: &EphemeralJob) -> &str {
    job.metadata.uid.as_deref().unwrap_or_default()
}

/// The first container of `pod` of another origin that has a name the template uses.
fn conflict(job: &EphemeralJob, names: &BTreeSet<&str>, pod: &Pod) -> Option<Conflict> {
    let spec = pod.spec.as_ref()?;
    let found = |list: &'static str, name: &str| Conflict {
        pod: podutil::name(pod).to_owned(),
        container: name.to_owned(),
        list,
    };
    if let Some(c) = spec
        .containers
        .iter()
        .find(|c| names.contains(c.name.as_str()))
    {
        return Some(found("containers", &c.name));
    }
    let init = spec.init_containers.iter().flatten();
    if let Some(c) = init.clone().find(|c| names.contains(c.name.as_str())) {
        return Some(found("initContainers", &c.name));
    }
    let eph = spec.ephemeral_containers.iter().flatten();
    eph.filter(|c| names.contains(c.name.as_str()) && !owns(uid(job), c))
        .map(|c| found("ephemeralContainers", &c.name))
        .next()
}

/// Oldest first, then by name (upstream's order of `filterPods`).
fn by_age(a: &&Pod, b: &&Pod) -> Ordering {
    let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    t(a).cmp(&t(b))
        .then_with(|| podutil::name(a).cmp(podutil::name(b)))
}

/// The job's targets among `pods` (upstream `filterPods`): selected, active (not finished, not
/// terminating), without a conflicting container name, oldest first, at most `replicas`.
pub fn targets<'a>(job: &EphemeralJob, pods: &[&'a Pod]) -> Targets<'a> {
    let names = template_names(job);
    let mut selected: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| selects(job, p) && podutil::is_active(p))
        .collect();
    selected.sort_by(by_age);
    let cap = job
        .spec
        .replicas
        .map_or(usize::MAX, |r| usize::try_from(r).unwrap_or(0));
    let mut out = Targets::default();
    for p in selected {
        if let Some(c) = conflict(job, &names, p) {
            out.conflicts.push(c);
        } else if out.pods.len() < cap {
            out.pods.push(p);
        }
    }
    out
}

/// Whether the job has injected its containers into `pod` (upstream `getSyncPods`: any template
/// name among the Pod's ephemeral containers, carrying the job's UID).
pub fn injected(job: &EphemeralJob, pod: &Pod) -> bool {
    let names = template_names(job);
    pod.spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| names.contains(c.name.as_str()) && owns(uid(job), c))
        })
}

/// One container's state (upstream `parseEphemeralContainerStatus`).
pub fn container_state(status: &ContainerStatus) -> PodState {
    let Some(state) = status.state.as_ref() else {
        return PodState::Unknown;
    };
    if let Some(t) = &state.terminated {
        if t.exit_code != 0 {
            return PodState::Failed;
        }
        if t.finished_at.is_some() {
            return PodState::Succeeded;
        }
    }
    if state.running.is_some() {
        return PodState::Running;
    }
    if let Some(w) = &state.waiting {
        if w.reason.as_deref() == Some(RUN_CONTAINER_ERROR) {
            return PodState::Failed;
        }
        return PodState::Waiting;
    }
    PodState::Unknown
}

/// What a target's template containers amount to (upstream `parseEphemeralPodStatus`): any
/// failed → Failed; all succeeded → Succeeded; else any running → Running; any waiting →
/// Waiting.
pub fn pod_state(job: &EphemeralJob, pod: &Pod) -> PodState {
    let names = template_names(job);
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.ephemeral_container_statuses.as_ref());
    let (mut succeeded, mut running, mut waiting) = (0, 0, 0);
    for s in statuses.into_iter().flatten() {
        if !names.contains(s.name.as_str()) {
            continue;
        }
        match container_state(s) {
            PodState::Failed => return PodState::Failed,
            PodState::Succeeded => succeeded += 1,
            PodState::Running => running += 1,
            PodState::Waiting => waiting += 1,
            PodState::Unknown => {}
        }
    }
    if succeeded > 0 && succeeded == names.len() {
        PodState::Succeeded
    } else if running > 0 {
        PodState::Running
    } else if waiting > 0 {
        PodState::Waiting
    } else {
        PodState::Unknown
    }
}

/// Sets condition `type_` (status True). Unchanged when it already says the same, so the
/// timestamps mean when it was last set (upstream rewrites them on every reconcile, which here
/// would write the status on every reconcile).
fn set_condition(
    conds: &mut Vec<EphemeralJobCondition>,
    type_: Cond,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let new = EphemeralJobCondition {
        type_,
        status: keys::k8s::CONDITION_TRUE.to_owned(),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
    };
    kruise_api::condition::set(conds, new);
}

fn count(states: &[PodState], want: PodState) -> i32 {
    i32::try_from(states.iter().filter(|s| **s == want).count()).unwrap_or(i32::MAX)
}

/// Whether `activeDeadlineSeconds` has passed since `start` (upstream `pastActiveDeadline`),
/// and else how long is left.
fn deadline(job: &EphemeralJob, start: Timestamp, now: Timestamp) -> (bool, Option<Duration>) {
    let Some(secs) = job.spec.active_deadline_seconds else {
        return (false, None);
    };
    let left = SignedDuration::from_secs(secs) - now.duration_since(start);
    match Duration::try_from(left) {
        Ok(d) if !d.is_zero() => (false, Some(d)),
        _ => (true, None),
    }
}

/// The status of an unfinished job over its targets' states (upstream `calculateStatus`);
/// also how long until the deadline.
pub fn status(
    job: &EphemeralJob,
    states: &[PodState],
    now: Timestamp,
) -> (EphemeralJobStatus, Option<Duration>) {
    let (ns, name) = (
        job.metadata.namespace.as_deref().unwrap_or_default(),
        job.metadata.name.as_deref().unwrap_or_default(),
    );
    let mut st = job.status.clone().unwrap_or_default();
    let start = st.start_time.get_or_insert(Time(now)).0;
    if st.conditions.is_empty() {
        set_condition(
            &mut st.conditions,
            Cond::Initialized,
            reasons::INITIALIZED,
            "",
            now,
        );
    }
    st.matches = i32::try_from(states.len()).unwrap_or(i32::MAX);
    st.succeeded = count(states, PodState::Succeeded);
    st.failed = count(states, PodState::Failed);
    st.running = count(states, PodState::Running);
    st.waiting = count(states, PodState::Waiting);
    // Upstream compares with `replicas` as written, so a job with more replicas than Pods never
    // ends; the targets are at most `replicas`, so their count is what "all" means.
    let all = st.matches;
    let mut done = false;
    st.phase = if st.matches == 0 {
        set_condition(
            &mut st.conditions,
            Cond::MatchedEmpty,
            reasons::MATCH_EMPTY,
            reasons::MATCH_EMPTY_MESSAGE,
            now,
        );
        EphemeralJobPhase::Waiting
    } else if st.succeeded == all {
        done = true;
        set_condition(
            &mut st.conditions,
            Cond::JobSucceeded,
            reasons::JOB_SUCCEEDED,
            reasons::JOB_SUCCEEDED_MESSAGE,
            now,
        );
        EphemeralJobPhase::Succeeded
    } else if st.running > 0 {
        EphemeralJobPhase::Running
    } else if st.failed > 0 && st.failed + st.succeeded == all {
        // Every target ended, some failed (upstream only fails when all failed, and otherwise
        // stays Unknown for good).
        done = true;
        set_condition(
            &mut st.conditions,
            Cond::JobFailed,
            reasons::JOB_FAILED,
            reasons::JOB_FAILED_MESSAGE,
            now,
        );
        EphemeralJobPhase::Failed
    } else if st.waiting == all {
        EphemeralJobPhase::Waiting
    } else {
        EphemeralJobPhase::Unknown
    };
    if job.spec.paused && !done {
        st.phase = EphemeralJobPhase::Paused;
    }
    if st.failed > 0 {
        set_condition(
            &mut st.conditions,
            Cond::JobFailed,
            reasons::CREATE_FAILED,
            &reasons::create_failed_message(ns, name),
            now,
        );
    }
    let (past, left) = deadline(job, start, now);
    let unfinished = matches!(
        st.phase,
        EphemeralJobPhase::Waiting | EphemeralJobPhase::Unknown | EphemeralJobPhase::Running
    );
    if unfinished && past {
        done = true;
        st.phase = EphemeralJobPhase::Failed;
        set_condition(
            &mut st.conditions,
            Cond::JobFailed,
            reasons::DEADLINE_EXCEEDED,
            &reasons::deadline_message(ns, name),
            now,
        );
    }
    if job.spec.template.ephemeral_containers.is_empty() {
        st.phase = EphemeralJobPhase::Error;
        set_condition(
            &mut st.conditions,
            Cond::JobError,
            reasons::ERROR,
            reasons::ERROR_MESSAGE,
            now,
        );
    }
    if done {
        st.completion_time = Some(Time(now));
    }
    (st, left)
}

/// One reconcile of an unfinished job over the Pods of its namespace.
pub fn plan(job: &EphemeralJob, pods: &[&Pod], now: Timestamp) -> Plan {
    let t = targets(job, pods);
    let states: Vec<PodState> = t.pods.iter().map(|p| pod_state(job, p)).collect();
    let (status, requeue) = status(job, &states, now);
    let acting = status.completion_time.is_none()
        && !matches!(
            status.phase,
            EphemeralJobPhase::Paused | EphemeralJobPhase::Error
        );
    let mut inject = Vec::new();
    if acting {
        // In flight: injected and not ended. Upstream subtracts only the running ones, so a
        // container still pulling its image lets another injection through.
        let in_flight = t
            .pods
            .iter()
            .zip(&states)
            .filter(|(p, s)| {
                injected(job, p) && !matches!(s, PodState::Succeeded | PodState::Failed)
            })
            .count();
        let slots = usize::try_from(job.spec.parallelism())
            .unwrap_or(0)
            .saturating_sub(in_flight);
        inject = t
            .pods
            .iter()
            .filter(|p| !injected(job, p))
            .take(slots)
            .map(|p| podutil::name(p).to_owned())
            .collect();
    }
    Plan {
        inject,
        conflicts: t.conflicts,
        status,
        requeue,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
