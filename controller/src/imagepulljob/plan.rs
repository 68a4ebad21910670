//! Pure decisions of the ImagePullJob controller: target nodes, the parallelism window, the tag
//! written into a NodeImage, the job status computed from NodeImage statuses, completion and TTL
//! arithmetic, and which pull-secret copies a job claims or releases. No client, no clock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{
    CompletionPolicyType, ImagePullJob, ImagePullJobStatus, ImagePullJobTemplate, ImagePullPhase,
    ImageSpec, ImageTagPullPolicy, ImageTagSpec, NodeImage, ReferenceObject,
};
use kruise_api::keys::{self, k8s};
use kruise_api::selector;
use kube::{Resource, ResourceExt};

use super::image::{ImageError, name_and_tag};

/// Nodes pulling at once when `parallelism` is unset.
pub const DEFAULT_PARALLELISM: i32 = 1;
/// Per-attempt pull timeout when the job sets none.
pub const DEFAULT_PULL_TIMEOUT_SECONDS: i32 = 600;
/// Pull attempts when the job sets none.
pub const DEFAULT_BACKOFF_LIMIT: i32 = 3;
/// Tag TTL for `completionPolicy: Never` jobs (plus up to ±10 minutes of jitter).
pub const TTL_SECONDS_FOR_NEVER: i32 = 24 * 3600;
/// Tag deadline for `completionPolicy: Never` jobs, unless the pull timeout is longer.
pub const ACTIVE_DEADLINE_SECONDS_FOR_NEVER: i64 = 1800;
/// Status message of a job stopped by its deadline.
pub const MSG_DEADLINE: &str = "job exceeds activeDeadlineSeconds";
/// Status message of a finished job.
pub const MSG_COMPLETED: &str = "job has completed";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error("invalid {what}: {why}")]
    Selector { what: &'static str, why: String },
}

/// `spec.parallelism` as a node count: an integer, or a string holding one (anything else,
/// percentages included, counts as 0 — upstream reads it with `IntValue`).
pub fn parallelism(template: &ImagePullJobTemplate) -> i32 {
    match &template.parallelism {
        None => DEFAULT_PARALLELISM,
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => s.trim().parse().unwrap_or(0),
    }
}

/// Rejects what apimachinery's `LabelSelectorAsSelector` refuses to build a selector from (an
/// empty key, an unknown operator, the wrong number of values), by
/// [`selector::requirement_violations`].
pub fn validate_selector(sel: &LabelSelector, what: &'static str) -> Result<(), PlanError> {
    for e in sel.match_expressions.iter().flatten() {
        let n = e.values.as_ref().map_or(0, Vec::len);
        if let Some(v) = selector::requirement_violations(&e.key, &e.operator, n).first() {
            return Err(PlanError::Selector {
                what,
                why: format!(
                    "operator {:?} on key {:?} with {n} values: {v:?}",
                    e.operator, e.key
                ),
            });
        }
    }
    Ok(())
}

fn pod_is_active(p: &Pod) -> bool {
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default();
    p.metadata.deletion_timestamp.is_none()
        && phase != k8s::POD_SUCCEEDED
        && phase != k8s::POD_FAILED
}

fn node_of(p: &Pod) -> &str {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// The NodeImages (by name) a job pulls on: the nodes of its active, scheduled pods
/// (`podSelector`, oldest pod first, each node once), or `selector.names` (those that exist, in
/// the given order), or the NodeImages matching `selector`'s labels, or all of them.
/// `node_images` is every NodeImage; `pods` every pod of the job's namespace.
pub fn target_nodes(
    template: &ImagePullJobTemplate,
    node_images: &[Arc<NodeImage>],
    pods: &[Arc<Pod>],
) -> Result<Vec<String>, PlanError> {
    let exists: BTreeSet<String> = node_images.iter().map(|n| n.name_any()).collect();
    if let Some(ps) = &template.pod_selector {
        let sel = ps.label_selector();
        validate_selector(&sel, "podSelector")?;
        let mut matching: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|p| pod_is_active(p) && !node_of(p).is_empty())
            .filter(|p| selector::matches(&sel, p.labels()))
            .collect();
        matching.sort_by(|a, b| {
            let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
            ta.cmp(&tb).then_with(|| a.name_any().cmp(&b.name_any()))
        });
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for p in matching {
            let node = node_of(p);
            if seen.insert(node.to_string()) && exists.contains(node) {
                out.push(node.to_string());
            }
        }
        return Ok(out);
    }
    let Some(sel) = &template.selector else {
        return Ok(exists.into_iter().collect());
    };
    if !sel.names.is_empty() {
        let mut seen = BTreeSet::new();
        return Ok(sel
            .names
            .iter()
            .filter(|n| exists.contains(*n) && seen.insert((*n).clone()))
            .cloned()
            .collect());
    }
    let ls = sel.label_selector();
    validate_selector(&ls, "selector")?;
    let mut out: Vec<String> = node_images
        .iter()
        .filter(|n| selector::matches(&ls, n.labels()))
        .map(|n| n.name_any())
        .collect();
    out.sort();
    Ok(out)
}

/// Whether a job (not finished) may want `ni`, for event routing. With a podSelector, `pods`
/// are the pods on that node.
pub fn job_may_target(job: &ImagePullJob, ni: &NodeImage, pods_on_node: &[Arc<Pod>]) -> bool {
    let t = &job.spec.template;
    if let Some(ps) = &t.pod_selector {
        let sel = ps.label_selector();
        return pods_on_node.iter().any(|p| {
            p.metadata.namespace == job.metadata.namespace && selector::matches(&sel, p.labels())
        });
    }
    match &t.selector {
        None => true,
        Some(s) if !s.names.is_empty() => s.names.iter().any(|n| *n == ni.name_any()),
        Some(s) => selector::matches(&s.label_selector(), ni.labels()),
    }
}

/// Whether a job is neither finished nor being deleted.
pub fn is_running(job: &ImagePullJob) -> bool {
    job.metadata.deletion_timestamp.is_none()
        && job
            .status
            .as_ref()
            .is_none_or(|s| s.completion_time.is_none())
}

/// The reference a job leaves on the NodeImage tags it owns.
pub fn owner_ref(job: &ImagePullJob) -> ObjectReference {
    ObjectReference {
        api_version: Some(ImagePullJob::api_version(&()).into_owned()),
        kind: Some(ImagePullJob::kind(&()).into_owned()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        ..Default::default()
    }
}

/// Random spreads added to tag lifetimes so that many tags do not expire in the same second;
/// drawn by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Jitter {
    /// In [0, 300): added to the TTL of `Always` jobs' tags.
    pub always_secs: i32,
    /// In [0, 1200): added to `TTL_SECONDS_FOR_NEVER - 600`.
    pub never_secs: i32,
}

impl Jitter {
    pub fn random() -> Self {
        use rand::Rng;
        let mut r = rand::rng();
        Self {
            always_secs: r.random_range(0..300),
            never_secs: r.random_range(0..1200),
        }
    }
}

/// The pull policy written on a job's tags. `Always` jobs keep the tag for their TTL (or
/// deadline, or the whole retry budget) plus `extra_ttl_for_always`; `Never` jobs for about a day.
pub fn tag_pull_policy(
    job: &ImagePullJob,
    jitter: Jitter,
    extra_ttl_for_always: i32,
) -> ImageTagPullPolicy {
    let t = &job.spec.template;
    let timeout = t.pull_policy.as_ref().and_then(|p| p.timeout_seconds);
    let backoff = t.pull_policy.as_ref().and_then(|p| p.backoff_limit);
    let mut p = ImageTagPullPolicy {
        timeout_seconds: timeout,
        backoff_limit: backoff,
        ..Default::default()
    };
    let cp = &t.completion_policy;
    if cp.type_ == Some(CompletionPolicyType::Never) {
        p.ttl_seconds_after_finished = Some(TTL_SECONDS_FOR_NEVER - 600 + jitter.never_secs);
        p.active_deadline_seconds = Some(
            timeout
                .map(i64::from)
                .filter(|t| *t > ACTIVE_DEADLINE_SECONDS_FOR_NEVER)
                .unwrap_or(ACTIVE_DEADLINE_SECONDS_FOR_NEVER),
        );
    } else {
        let base = match (cp.ttl_seconds_after_finished, cp.active_deadline_seconds) {
            (Some(ttl), _) => ttl,
            (None, Some(d)) => i32::try_from(d).unwrap_or(i32::MAX),
            (None, None) => timeout
                .unwrap_or(DEFAULT_PULL_TIMEOUT_SECONDS)
                .saturating_mul(backoff.unwrap_or(DEFAULT_BACKOFF_LIMIT)),
        };
        p.ttl_seconds_after_finished = Some(
            base.saturating_add(extra_ttl_for_always)
                .saturating_add(jitter.always_secs),
        );
        p.active_deadline_seconds = cp.active_deadline_seconds;
    }
    p
}

fn contains_secret(list: &[ReferenceObject], s: &ReferenceObject) -> bool {
    list.iter()
        .any(|o| o.namespace == s.namespace && o.name == s.name)
}

/// The image entry `ni` must get so that it carries the job's tag and secrets, or `None` when
/// it already does. A tag owned by other jobs gets this job added and its version bumped (a new
/// pull round); a new tag starts one above the version the daemon last reported for it.
pub fn tag_update(
    ni: &NodeImage,
    job: &ImagePullJob,
    secrets: &[ReferenceObject],
    policy: &ImageTagPullPolicy,
    now: Timestamp,
) -> Result<Option<(String, ImageSpec)>, PlanError> {
    let (name, tag) = name_and_tag(&job.spec.image)?;
    let owner = owner_ref(job);
    let mut spec = ni.spec.images.get(&name).cloned().unwrap_or_default();
    spec.sandbox_config = job.spec.template.sandbox_config.clone();
    let mut changed = !ni.spec.images.contains_key(&name)
        || ni.spec.images.get(&name).map(|s| &s.sandbox_config) != Some(&spec.sandbox_config);
    for s in secrets {
        if !contains_secret(&spec.pull_secrets, s) {
            spec.pull_secrets.push(s.clone());
            changed = true;
        }
    }
    match spec.tags.iter_mut().find(|t| t.tag == tag) {
        Some(t) if t.owner_references.iter().any(|r| r.uid == owner.uid) => {}
        Some(t) => {
            t.version += 1;
            t.owner_references.push(owner);
            t.created_at = Some(Time(now));
            t.image_pull_policy = job.spec.template.image_pull_policy;
            changed = true;
        }
        None => {
            let reported = ni
                .status
                .as_ref()
                .and_then(|s| s.image_statuses.get(&name))
                .and_then(|s| s.tags.iter().find(|t| t.tag == tag))
                .map_or(-1, |t| t.version);
            spec.tags.push(ImageTagSpec {
                tag,
                created_at: Some(Time(now)),
                pull_policy: Some(policy.clone()),
                owner_references: vec![owner],
                version: reported + 1,
                image_pull_policy: job.spec.template.image_pull_policy,
            });
            changed = true;
        }
    }
    if !changed {
        return Ok(None);
    }
    spec.tags.sort_by(|a, b| a.tag.cmp(&b.tag));
    Ok(Some((name, spec)))
}

fn secs(n: i64) -> Duration {
    Duration::from_secs(u64::try_from(n.max(0)).unwrap_or(0))
}

fn elapsed(now: Timestamp, since: Timestamp) -> Duration {
    now.duration_since(since).unsigned_abs()
}

/// The job's status from the NodeImages of its target nodes, plus the NodeImages that do not
/// carry its tag (or its secrets) yet, sorted by name.
pub fn calculate_status(
    job: &ImagePullJob,
    node_images: &[&NodeImage],
    secrets: &[ReferenceObject],
    now: Timestamp,
) -> Result<(ImagePullJobStatus, Vec<String>), PlanError> {
    let old = job.status.clone().unwrap_or_default();
    let mut st = ImagePullJobStatus {
        start_time: Some(old.start_time.clone().unwrap_or(Time(now))),
        desired: i32::try_from(node_images.len()).unwrap_or(i32::MAX),
        ..Default::default()
    };
    let (name, tag) = name_and_tag(&job.spec.image)?;
    let uid = job.metadata.uid.clone();
    let (mut pulling, mut succeeded, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    let mut not_synced = BTreeSet::new();
    for ni in node_images {
        let node = ni.name_any();
        let mut version = None;
        if let Some(spec) = ni.spec.images.get(&name) {
            if secrets
                .iter()
                .any(|s| !contains_secret(&spec.pull_secrets, s))
            {
                not_synced.insert(node.clone());
            }
            version = spec
                .tags
                .iter()
                .find(|t| t.tag == tag)
                .filter(|t| t.owner_references.iter().any(|r| r.uid == uid))
                .map(|t| t.version);
        }
        let Some(version) = version else {
            not_synced.insert(node);
            continue;
        };
        let phase = ni
            .status
            .as_ref()
            .and_then(|s| s.image_statuses.get(&name))
            .and_then(|s| s.tags.iter().find(|t| t.tag == tag))
            .filter(|t| t.version == version)
            .map(|t| t.phase);
        match phase {
            Some(ImagePullPhase::Succeeded) => succeeded.push(node),
            Some(ImagePullPhase::Failed) => failed.push(node),
            _ => pulling.push(node),
        }
    }
    let cp = &job.spec.template.completion_policy;
    let always = cp.type_ != Some(CompletionPolicyType::Never);
    let finished = succeeded.len() + failed.len();
    if always
        && let Some(deadline) = cp.active_deadline_seconds
        && node_images.len() != finished
        && let Some(start) = st.start_time.as_ref()
        && elapsed(now, start.0) >= secs(deadline)
    {
        st.completion_time = Some(Time(now));
        st.succeeded = count(&succeeded);
        failed.extend(pulling);
        failed.extend(not_synced);
        st.failed = count(&failed);
        st.failed_nodes = failed;
        st.message = MSG_DEADLINE.to_string();
        return Ok((st, Vec::new()));
    }
    st.active = count(&pulling);
    st.succeeded = count(&succeeded);
    st.failed = count(&failed);
    failed.sort();
    st.failed_nodes = failed;
    if always && st.desired == st.succeeded + st.failed {
        st.completion_time = Some(old.completion_time.unwrap_or(Time(now)));
    }
    st.message = status_message(&st);
    Ok((st, not_synced.into_iter().collect()))
}

fn count<T>(v: &[T]) -> i32 {
    i32::try_from(v.len()).unwrap_or(i32::MAX)
}

/// The human summary of a status.
pub fn status_message(st: &ImagePullJobStatus) -> String {
    if st.completion_time.is_some() {
        return MSG_COMPLETED.to_string();
    }
    if st.desired == 0 {
        return "job is running, no progress".to_string();
    }
    let done = f64::from(st.succeeded + st.failed);
    format!(
        "job is running, progress {:.1}%",
        100.0 * done / f64::from(st.desired)
    )
}

/// The NodeImages to write this round: at most `parallelism - active` of those not synced yet.
pub fn sync_window(parallelism: i32, active: i32, not_synced: &[String]) -> &[String] {
    let room = usize::try_from(parallelism.saturating_sub(active)).unwrap_or(0);
    &not_synced[..room.min(not_synced.len())]
}

/// What to do with a finished object that has `ttlSecondsAfterFinished`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// No TTL: keep it.
    Keep,
    /// Delete it now.
    Delete,
    /// Look again after this long.
    After(Duration),
}

/// TTL decision from the completion time.
pub fn ttl(ttl_seconds: Option<i32>, completed: Timestamp, now: Timestamp) -> Ttl {
    let Some(ttl) = ttl_seconds else {
        return Ttl::Keep;
    };
    match secs(i64::from(ttl)).checked_sub(elapsed(now, completed)) {
        Some(left) if !left.is_zero() => Ttl::After(left),
        _ => Ttl::Delete,
    }
}

/// How long until an `Always` job with a deadline must be looked at again (at least a second).
pub fn deadline_requeue(
    job: &ImagePullJob,
    started: Timestamp,
    now: Timestamp,
) -> Option<Duration> {
    let cp = &job.spec.template.completion_policy;
    if cp.type_ == Some(CompletionPolicyType::Never) {
        return None;
    }
    let deadline = secs(cp.active_deadline_seconds?);
    Some(
        deadline
            .checked_sub(elapsed(now, started))
            .unwrap_or_default()
            .max(Duration::from_secs(1)),
    )
}

// ---------------------------------------------------------------------------------------------
// Pull-secret copies in kruise-daemon-config
// ---------------------------------------------------------------------------------------------

/// `namespace/name` of a job, as recorded in the secrets it references.
pub fn job_key(job: &ImagePullJob) -> String {
    format!("{}/{}", job.namespace().unwrap_or_default(), job.name_any())
}

/// Jobs recorded on a copy (comma-separated `namespace/name`).
pub fn referencing_jobs(secret: &Secret) -> BTreeSet<String> {
    secret
        .annotations()
        .get(keys::IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| s.contains('/'))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The value of the references annotation for a set of jobs.
pub fn references_value(jobs: &BTreeSet<String>) -> String {
    jobs.iter().cloned().collect::<Vec<_>>().join(",")
}

fn source_of(secret: &Secret) -> ReferenceObject {
    ReferenceObject::parse(
        secret
            .annotations()
            .get(keys::IMAGEPULLJOB_SECRET_SOURCE_KEY_ANNOTATION)
            .map(String::as_str)
            .unwrap_or_default(),
    )
}

/// The outcome of [`classify_secrets`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SecretPlan {
    /// Source secret (in the job's namespace) → the copy to reuse, if one exists.
    pub claim: BTreeMap<ReferenceObject, Option<Secret>>,
    /// Copies this job referenced and no longer needs.
    pub release: Vec<Secret>,
}

/// Which copies a job uses and which it lets go. A finished or deleted job releases everything
/// it references; a running one reuses an existing copy of each of its pull secrets (preferring
/// one that already records it) and releases copies of secrets it no longer lists.
/// `copies` are the secrets of kruise-daemon-config.
pub fn classify_secrets(job: &ImagePullJob, finished: bool, copies: &[Secret]) -> SecretPlan {
    let key = job_key(job);
    let ns = job.namespace().unwrap_or_default();
    let mut plan = SecretPlan::default();
    if !finished {
        for name in &job.spec.template.pull_secrets {
            plan.claim.insert(
                ReferenceObject {
                    namespace: ns.clone(),
                    name: name.clone(),
                    mode: String::new(),
                },
                None,
            );
        }
    }
    let mut sorted: Vec<&Secret> = copies
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .collect();
    // Older versions could make several copies of one source: pick the same one every time.
    sorted.sort_by_key(|s| s.name_any());
    for s in sorted {
        let refs = referencing_jobs(s);
        if finished {
            if refs.contains(&key) {
                plan.release.push(s.clone());
            }
            continue;
        }
        let source = source_of(s);
        if let Some(slot) = plan.claim.get_mut(&source) {
            if slot.is_none() || refs.contains(&key) {
                *slot = Some(s.clone());
            }
            continue;
        }
        if refs.contains(&key) {
            plan.release.push(s.clone());
        }
    }
    plan
}

/// A new copy of `source` in `namespace`, recording `job_key`; `suffix` makes the name unique.
pub fn new_copy(source: &Secret, namespace: &str, job_key: &str, suffix: &str) -> Secret {
    let mut annotations = source.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(
        keys::IMAGEPULLJOB_SECRET_REFERENCES_ANNOTATION.into(),
        job_key.into(),
    );
    annotations.insert(
        keys::IMAGEPULLJOB_SECRET_SOURCE_KEY_ANNOTATION.into(),
        format!(
            "{}/{}",
            source.namespace().unwrap_or_default(),
            source.name_any()
        ),
    );
    annotations.insert(
        keys::IMAGEPULLJOB_SECRET_MODE_ANNOTATION.into(),
        ReferenceObject::MODE_BATCH.into(),
    );
    Secret {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(format!("{}-{suffix}", source.name_any())),
            labels: source.metadata.labels.clone(),
            annotations: Some(annotations),
            ..Default::default()
        },
        data: source.data.clone(),
        string_data: source.string_data.clone(),
        type_: source.type_.clone(),
        immutable: None,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
