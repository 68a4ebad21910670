//! The pure decisions of one BroadcastJob reconcile (upstream `Reconcile` in
//! `broadcastjob_controller.go` with `broadcastjob_utils.go`), time a parameter and no API
//! calls: which nodes should run the job's Pod ([`fits`]: upstream `checkNodeFitness`), how the
//! Pods count ([`count`]: upstream `filterPods` and `isPodFailed`), and the [`Step`] to take:
//! delete the finished job after its TTL, or the Pods to create and delete, the Events and the
//! status to write.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{
    BroadcastJob, BroadcastJobPhase, BroadcastJobStatus, CompletionPolicyType, FailurePolicyType,
    JobCondition, JobConditionType,
};
use kruise_api::keys;

use crate::workload::intstr::{NumberError, scaled_value};
use crate::workload::nodes::{
    insufficient_resources, node_matches, refuses_unschedulable, target_node, untolerated_taint,
};
use crate::workload::podutil;

/// `spec.parallelism` the controller cannot read (the webhook refuses it; an object written
/// before the webhook ran may still carry it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("spec.parallelism: {0}")]
pub struct BadParallelism(#[from] pub NumberError);

/// An Event to publish on the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Note {
    fn normal(reason: &'static str, message: String) -> Self {
        Self {
            warning: false,
            reason,
            message,
        }
    }

    fn warning(reason: &'static str, message: String) -> Self {
        Self {
            warning: true,
            reason,
            message,
        }
    }
}

/// What one reconcile does.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The job has finished (`Always` only): it is deleted once `ttlSecondsAfterFinished` has
    /// passed since its completion; until then, look again when it will have.
    Finished {
        delete: bool,
        requeue: Option<Duration>,
    },
    /// Still running (or paused, or failed under `Never`).
    Sync(Plan),
}

/// The writes of a running job. `status` counts the creations and deletions as done; the
/// reconcile takes back the ones the API refused.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Nodes to create a Pod on, in order (the reconcile creates them in slow-start batches).
    pub create_on: Vec<String>,
    /// Pods to delete, by name, with whether each counted as active.
    pub delete: Vec<(String, bool)>,
    pub events: Vec<Note>,
    pub status: BroadcastJobStatus,
    /// Look again after this long (the deadline, the TTL), if nothing happens sooner.
    pub requeue: Option<Duration>,
}

/// The job's Pods by what they count as (upstream `filterPods`).
#[derive(Debug, Default)]
pub struct Counted<'a> {
    pub active: Vec<&'a Pod>,
    pub failed: Vec<&'a Pod>,
    pub succeeded: Vec<&'a Pod>,
}

/// Succeeded and Failed by phase; a Pod neither and not terminating is active, or failed when
/// its restarts passed `restart_limit` (upstream `isPodFailed`: OnFailure Pods only, the
/// restarts of all its containers, init containers included, summed). Terminating Pods count as
/// nothing.
pub fn count<'a>(restart_limit: i32, pods: &[&'a Pod]) -> Counted<'a> {
    let mut c = Counted::default();
    for p in pods {
        match podutil::phase(p) {
            keys::k8s::POD_SUCCEEDED => c.succeeded.push(p),
            keys::k8s::POD_FAILED => c.failed.push(p),
            _ if p.metadata.deletion_timestamp.is_some() => {}
            _ if restarts_over_limit(restart_limit, p) => c.failed.push(p),
            _ => c.active.push(p),
        }
    }
    c
}

fn restarts_over_limit(restart_limit: i32, pod: &Pod) -> bool {
    let on_failure =
        pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
    if !on_failure {
        return false;
    }
    let restarts: i64 = pod
        .status
        .iter()
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .map(|c| i64::from(c.restart_count))
        .sum();
    restarts > i64::from(restart_limit)
}

/// Whether a Pod of `spec` may run on `node` (upstream `checkNodeFitness`): its nodeName, its
/// nodeSelector and required node affinity, NoSchedule and NoExecute taints against its
/// tolerations, a cordoned node unless the unschedulable taint is tolerated, and its requests
/// against the node's allocatable. `Err` says why not, in the scheduler's words.
/// `check_node_name` is false for the template (upstream's mock Pod is given the node's name).
pub fn fits(spec: &PodSpec, node: &Node, check_node_name: bool) -> Result<(), String> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if check_node_name
        && let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty())
        && n != name
    {
        return Err("node(s) didn't match the requested node name".to_owned());
    }
    if !node_matches(spec, node) {
        return Err("node(s) didn't match Pod's node affinity/selector".to_owned());
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    if let Some(t) = untolerated_taint(tolerations, node) {
        return Err(format!(
            "node(s) had taint {{{}: {}}}, that the pod didn't tolerate",
            t.key,
            t.value.as_deref().unwrap_or_default()
        ));
    }
    if refuses_unschedulable(tolerations, node) {
        return Err("node(s) were unschedulable".to_owned());
    }
    let short = insufficient_resources(spec, node);
    if !short.is_empty() {
        return Err(short.join(", "));
    }
    Ok(())
}

/// Which nodes want a Pod (upstream `getNodesToRunPod`).
#[derive(Debug, Default)]
pub struct Placement<'a> {
    /// Every node that should run the job's Pod, with the Pod it has (if any).
    pub desired: BTreeMap<&'a str, Option<&'a Pod>>,
    /// Desired nodes without a Pod yet, by name order.
    pub rest: Vec<&'a str>,
    /// Pods whose node no longer fits them (terminating ones are left alone).
    pub unfit: Vec<&'a Pod>,
    /// Nodes with more than one Pod of the job (the last one listed is kept in `desired`).
    pub duplicates: Vec<(&'a str, &'a str)>,
}

/// Places the job over `nodes` given its Pods.
pub fn place<'a>(job: &BroadcastJob, pods: &[&'a Pod], nodes: &[&'a Node]) -> Placement<'a> {
    let mut out = Placement::default();
    let mut on_node: BTreeMap<&str, &Pod> = BTreeMap::new();
    for p in pods {
        let node = target_node(p).unwrap_or_default();
        if on_node.insert(node, p).is_some() {
            out.duplicates.push((podutil::name(p), node));
        }
    }
    let template = job.spec.template.spec.clone().unwrap_or_default();
    let mut nodes: Vec<&Node> = nodes.to_vec();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        if let Some(pod) = on_node.get(name) {
            let spec = pod.spec.clone().unwrap_or_default();
            if fits(&spec, node, true).is_err() && pod.metadata.deletion_timestamp.is_none() {
                out.unfit.push(pod);
                continue;
            }
            out.desired.insert(name, Some(pod));
        } else if fits(&template, node, false).is_ok() {
            out.rest.push(name);
            out.desired.insert(name, None);
        }
    }
    out
}

/// `spec.parallelism` as a Pod count against `desired` (percentages round up; unset is no
/// limit), upstream `GetValueFromIntOrPercent`.
pub fn parallelism(job: &BroadcastJob, desired: i32) -> Result<i32, BadParallelism> {
    let unlimited = IntOrString::Int(i32::MAX);
    Ok(scaled_value(
        job.spec.parallelism.as_ref().unwrap_or(&unlimited),
        desired,
        true,
    )?)
}

/// Whether the job has finished: `Always` with a true Complete or Failed condition (upstream
/// `IsJobFinished`; a `Never` job never finishes).
pub fn is_finished(job: &BroadcastJob) -> bool {
    if job.spec.completion_type() == CompletionPolicyType::Never {
        return false;
    }
    job.status.iter().flat_map(|s| &s.conditions).any(|c| {
        matches!(
            c.type_,
            JobConditionType::Complete | JobConditionType::Failed
        ) && c.status == "True"
    })
}

fn seconds(d: SignedDuration) -> Duration {
    Duration::try_from(d).unwrap_or_default()
}

/// Time left until `from + secs`, `None` when it has passed (or either is unset).
fn left(from: Option<&Time>, secs: Option<i64>, now: Timestamp) -> Option<SignedDuration> {
    let deadline = from?.0.checked_add(SignedDuration::from_secs(secs?)).ok()?;
    let left = deadline.duration_since(now);
    left.is_positive().then_some(left)
}

fn condition(type_: JobConditionType, message: String, now: Timestamp) -> JobCondition {
    let reason = match type_ {
        JobConditionType::Complete => "Complete",
        JobConditionType::Failed => "Failed",
    };
    JobCondition {
        type_,
        status: "True".to_owned(),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: Some(reason.to_owned()),
        message: Some(message),
    }
}

/// Ends the job (upstream `finishJob`): the condition, the completion time, and a look after
/// the TTL (one second more, so that it has passed then).
fn finish(
    job: &BroadcastJob,
    st: &mut BroadcastJobStatus,
    type_: JobConditionType,
    message: String,
    now: Timestamp,
) -> Option<Duration> {
    st.conditions.push(condition(type_, message, now));
    st.completion_time = Some(Time(now));
    let ttl = job.spec.completion_policy.ttl_seconds_after_finished?;
    Some(Duration::from_secs(u64::try_from(ttl).unwrap_or(0) + 1))
}

/// The step of one reconcile of `job` over its Pods and every node, at `now`.
pub fn step(
    job: &BroadcastJob,
    pods: &[&Pod],
    nodes: &[&Node],
    now: Timestamp,
) -> Result<Step, BadParallelism> {
    let old = job.status.clone().unwrap_or_default();
    if is_finished(job) {
        let ttl = job
            .spec
            .completion_policy
            .ttl_seconds_after_finished
            .map(i64::from);
        return Ok(match (old.completion_time.as_ref(), ttl) {
            (Some(done), Some(_)) => match left(Some(done), ttl, now) {
                None => Step::Finished {
                    delete: true,
                    requeue: None,
                },
                Some(l) => Step::Finished {
                    delete: false,
                    requeue: Some(seconds(l)),
                },
            },
            _ => Step::Finished {
                delete: false,
                requeue: None,
            },
        });
    }
    Ok(Step::Sync(sync(job, pods, nodes, now, old)?))
}

fn sync(
    job: &BroadcastJob,
    pods: &[&Pod],
    nodes: &[&Node],
    now: Timestamp,
    old: BroadcastJobStatus,
) -> Result<Plan, BadParallelism> {
    let always = job.spec.completion_type() == CompletionPolicyType::Always;
    let deadline = job.spec.completion_policy.active_deadline_seconds;
    let mut plan = Plan {
        status: old.clone(),
        ..Plan::default()
    };
    let st = &mut plan.status;
    let start = st.start_time.get_or_insert(Time(now)).clone();
    if always {
        plan.requeue = left(Some(&start), deadline, now).map(seconds);
    }
    if st.phase == BroadcastJobPhase::Unset {
        st.phase = BroadcastJobPhase::Running;
    }
    let counted = count(job.spec.failure_policy.restart_limit, pods);
    let placement = place(job, pods, nodes);
    let (active, failed) = (counted.active.len() as i32, counted.failed.len() as i32);
    st.active = active;
    st.failed = failed;
    st.succeeded = counted.succeeded.len() as i32;
    st.desired = placement.desired.len() as i32;
    for (pod, node) in &placement.duplicates {
        plan.events.push(Note::warning(
            keys::BROADCASTJOB_REASON_DUPLICATE_POD,
            format!("Duplicated pod {pod} found on same node {node}"),
        ));
    }
    if st.phase == BroadcastJobPhase::Failed {
        return Ok(plan);
    }
    let failure_paused = failed > 0 && job.spec.failure_type() == FailurePolicyType::Pause;
    if job.spec.paused
        && matches!(
            st.phase,
            BroadcastJobPhase::Running | BroadcastJobPhase::Paused
        )
    {
        st.phase = BroadcastJobPhase::Paused;
        return Ok(plan);
    }
    if failure_paused {
        // Upstream also sets spec.paused in memory, which its status write drops: the job
        // stays paused (phase) while the failed Pod exists; deleting that Pod resumes it.
        if st.phase != BroadcastJobPhase::Paused {
            plan.events.push(Note::warning(
                keys::BROADCASTJOB_REASON_PAUSED,
                "job is paused, due to failed pod".to_owned(),
            ));
        }
        st.phase = BroadcastJobPhase::Paused;
        return Ok(plan);
    }
    if st.phase == BroadcastJobPhase::Paused {
        st.phase = BroadcastJobPhase::Running;
        plan.events.push(Note::normal(
            keys::BROADCASTJOB_REASON_CONTINUE,
            "continue to process job".to_owned(),
        ));
    }
    if let Some((reason, message)) = failure(job, failed, &start, now) {
        fail(job, &mut plan, &counted, reason, message, now);
        return Ok(plan);
    }
    advance(job, &mut plan, &counted, &placement, now)?;
    Ok(plan)
}

/// Why the job fails now, if it does: a failed Pod under FailFast, or (Always) the deadline.
fn failure(
    job: &BroadcastJob,
    failed: i32,
    start: &Time,
    now: Timestamp,
) -> Option<(&'static str, String)> {
    if failed > 0 && job.spec.failure_type() == FailurePolicyType::FailFast {
        return Some((
            keys::BROADCASTJOB_REASON_FAILED_POD,
            keys::BROADCASTJOB_MESSAGE_FAILED_POD.to_owned(),
        ));
    }
    let deadline = job.spec.completion_policy.active_deadline_seconds;
    let always = job.spec.completion_type() == CompletionPolicyType::Always;
    if always && deadline.is_some() && left(Some(start), deadline, now).is_none() {
        return Some((
            keys::BROADCASTJOB_REASON_DEADLINE_EXCEEDED,
            format!(
                "Job {}/{} was active longer than specified deadline",
                job.metadata.namespace.as_deref().unwrap_or_default(),
                job.metadata.name.as_deref().unwrap_or_default()
            ),
        ));
    }
    None
}

/// Fails the job (upstream's `jobFailed` branch): its active Pods deleted, and counted as
/// failed as upstream counts them.
fn fail(
    job: &BroadcastJob,
    plan: &mut Plan,
    counted: &Counted<'_>,
    reason: &'static str,
    message: String,
    now: Timestamp,
) {
    for p in &counted.active {
        plan.delete.push((podutil::name(p).to_owned(), true));
    }
    let n = counted.active.len() as i32;
    let st = &mut plan.status;
    st.phase = BroadcastJobPhase::Failed;
    (st.failed, st.active) = (st.failed + n, st.active - n);
    let (succeeded, failed) = (st.succeeded, st.failed);
    plan.requeue = finish(job, st, JobConditionType::Failed, message.clone(), now);
    plan.events.push(Note::warning(
        reason,
        format!("{message}: {succeeded} pods succeeded, {failed} pods failed"),
    ));
}

/// A running job's progress: Pods whose node stopped fitting deleted, Pods created within the
/// parallelism, and completion once every desired node has a finished Pod (Always only).
fn advance(
    job: &BroadcastJob,
    plan: &mut Plan,
    counted: &Counted<'_>,
    placement: &Placement<'_>,
    now: Timestamp,
) -> Result<(), BadParallelism> {
    let (mut active, mut failed) = (plan.status.active, plan.status.failed);
    let succeeded = plan.status.succeeded;
    for p in &placement.unfit {
        let was_active = counted.active.iter().any(|a| std::ptr::eq(*a, *p));
        plan.delete.push((podutil::name(p).to_owned(), was_active));
        if was_active {
            (failed, active) = (failed + 1, active - 1);
        }
    }
    let limit = parallelism(job, plan.status.desired)?;
    if active > limit {
        plan.events.push(Note::warning(
            keys::BROADCASTJOB_REASON_TOO_MANY_ACTIVE,
            "Number of active pods exceed parallelism limit".to_owned(),
        ));
    } else if job.metadata.deletion_timestamp.is_none() {
        let room = usize::try_from(limit - active).unwrap_or(0);
        plan.create_on = placement
            .rest
            .iter()
            .take(room)
            .map(|n| (*n).to_owned())
            .collect();
        active += plan.create_on.len() as i32;
    }
    let st = &mut plan.status;
    (st.failed, st.active) = (failed, active);
    let complete = job.spec.completion_type() == CompletionPolicyType::Always
        && !placement.desired.is_empty()
        && placement
            .desired
            .values()
            .all(|p| p.is_some_and(|p| !podutil::is_active(p)));
    if complete {
        st.phase = BroadcastJobPhase::Completed;
        plan.requeue = finish(
            job,
            st,
            JobConditionType::Complete,
            format!("Job completed, {succeeded} pods succeeded, {failed} pods failed"),
            now,
        );
        plan.events.push(Note::normal(
            keys::BROADCASTJOB_REASON_JOB_COMPLETE,
            format!(
                "Job {}/{} is completed, {succeeded} pods succeeded, {failed} pods failed",
                job.metadata.namespace.as_deref().unwrap_or_default(),
                job.metadata.name.as_deref().unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
