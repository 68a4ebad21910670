//! Pure decisions of the NodeImage controller: when a node gets its NodeImage, which tags stay
//! in a NodeImage spec, and which tags the manager must fail because the node never answered.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::{
    ImagePullJob, ImagePullPhase, ImageSpec, ImageStatus, ImageTagStatus, NodeImage,
    NodeImageStatus, ReferenceObject,
};
use kruise_api::keys::{self, k8s};
use kube::Resource;

/// How long after a node turns Ready its NodeImage is created (upstream flag
/// `--nodeimage-creation-delay`), so a node that flaps does not churn NodeImages.
pub const CREATION_DELAY_AFTER_READY: Duration = Duration::from_secs(30);
/// How long a tag may wait for the daemon's first status before the manager fails it.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// Message of a tag the daemon never reported on.
pub const MSG_NOT_RESPONDED: &str = "node has not responded for a long time";
/// Message of a tag still unfinished after its activeDeadlineSeconds.
pub const MSG_DEADLINE: &str = "pulling exceeds the activeDeadlineSeconds";
pub use kruise_api::keys::FAKE_NODEIMAGE_LABEL;

/// Whether (and when) a NodeImage should be created for `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Creation {
    /// The node is not Ready: nothing to do until it is.
    NotReady,
    /// Ready, but not for long enough yet.
    After(Duration),
    /// Create it now.
    Now,
}

fn since(now: Timestamp, then: Timestamp) -> Duration {
    now.duration_since(then).unsigned_abs()
}

fn remaining(total: Duration, elapsed: Duration) -> Option<Duration> {
    total.checked_sub(elapsed).filter(|d| !d.is_zero())
}

/// Creation decision from the node's Ready condition.
pub fn creation(node: &Node, now: Timestamp) -> Creation {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == k8s::NODE_READY));
    let Some(ready) = ready.filter(|c| c.status == k8s::CONDITION_TRUE) else {
        return Creation::NotReady;
    };
    let Some(at) = ready.last_transition_time.as_ref() else {
        return Creation::Now;
    };
    match remaining(CREATION_DELAY_AFTER_READY, since(now, at.0)) {
        Some(d) => Creation::After(d),
        None => Creation::Now,
    }
}

/// What the controller knows about an ImagePullJob named by a tag owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The job exists with this UID.
    Exists(String),
    /// The job does not exist.
    Gone,
    /// The lookup failed; keep the reference.
    Unknown,
}

fn is_job_ref(r: &ObjectReference) -> bool {
    let group = r
        .api_version
        .as_deref()
        .and_then(|v| v.split_once('/'))
        .map(|(g, _)| g);
    group == Some(keys::APPS_GROUP) && r.kind.as_deref() == Some(ImagePullJob::kind(&()).as_ref())
}

/// The outcome of [`clean_spec`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpecCleanup {
    /// The new spec images, when anything changed.
    pub images: Option<BTreeMap<String, ImageSpec>>,
    /// What changed, for the log.
    pub messages: Vec<String>,
    /// When to look again (the earliest tag TTL).
    pub requeue: Option<Duration>,
}

/// Drops tags without `createdAt`, owner references to jobs that are gone (or were recreated with
/// another UID), tags left without owners, tags past their `ttlSecondsAfterFinished`, old-style
/// pull secrets whose copy is gone, and images left without tags.
/// `owner` looks up a referenced job; `secret_exists` a non-batch pull-secret copy.
pub fn clean_spec(
    ni: &NodeImage,
    owner: &dyn Fn(&ObjectReference) -> Owner,
    secret_exists: &dyn Fn(&ReferenceObject) -> bool,
    now: Timestamp,
) -> SpecCleanup {
    let mut out = SpecCleanup::default();
    let mut modified = false;
    let mut images = BTreeMap::new();
    let status = ni.status.as_ref();
    for (name, spec) in &ni.spec.images {
        let mut spec = spec.clone();
        let mut tags = Vec::with_capacity(spec.tags.len());
        for tag in &spec.tags {
            let full = format!("{name}:{}", tag.tag);
            if tag.created_at.is_none() {
                modified = true;
                out.messages.push(format!("image {full} has no createdAt"));
                continue;
            }
            let active: Vec<ObjectReference> = tag
                .owner_references
                .iter()
                .filter(|r| {
                    if !is_job_ref(r) {
                        // Owners of kinds we do not manage are someone else's business.
                        return true;
                    }
                    match owner(r) {
                        Owner::Exists(uid) => r.uid.as_deref() == Some(uid.as_str()),
                        Owner::Gone => false,
                        Owner::Unknown => true,
                    }
                })
                .cloned()
                .collect();
            let mut tag = tag.clone();
            if active.len() != tag.owner_references.len() {
                modified = true;
                if active.is_empty() {
                    out.messages
                        .push(format!("image {full} has no owners left"));
                    continue;
                }
                out.messages.push(format!("image {full} lost owners"));
                tag.owner_references = active;
            }
            if let Some(ttl) = tag
                .pull_policy
                .as_ref()
                .and_then(|p| p.ttl_seconds_after_finished)
            {
                let done = status
                    .and_then(|s| s.image_statuses.get(name))
                    .and_then(|s| {
                        s.tags
                            .iter()
                            .find(|t| t.tag == tag.tag && t.version == tag.version)
                    })
                    .and_then(|t| t.completion_time.as_ref());
                if let Some(done) = done {
                    let ttl = Duration::from_secs(u64::try_from(ttl.max(0)).unwrap_or(0));
                    match remaining(ttl, since(now, done.0)) {
                        None => {
                            modified = true;
                            out.messages.push(format!("image {full} is past its TTL"));
                            continue;
                        }
                        Some(left) => out.requeue = min_dur(out.requeue, left),
                    }
                }
            }
            tags.push(tag);
        }
        let secrets: Vec<ReferenceObject> = spec
            .pull_secrets
            .iter()
            .filter(|r| r.mode == ReferenceObject::MODE_BATCH || secret_exists(r))
            .cloned()
            .collect();
        if secrets.len() != spec.pull_secrets.len() {
            modified = true;
            spec.pull_secrets = secrets;
        }
        if tags.is_empty() {
            modified = true;
            out.messages.push(format!("image {name} has no tags left"));
            continue;
        }
        tags.sort_by(|a, b| a.tag.cmp(&b.tag));
        spec.tags = tags;
        images.insert(name.clone(), spec);
    }
    if modified {
        out.images = Some(images);
    }
    out
}

fn min_dur(a: Option<Duration>, b: Duration) -> Option<Duration> {
    Some(a.map_or(b, |a| a.min(b)))
}

/// A tag the manager failed, for the events sent to its owners.
#[derive(Clone, Debug, PartialEq)]
pub struct FailedTag {
    /// `name:tag`.
    pub image: String,
    pub message: String,
    pub owners: Vec<ObjectReference>,
}

/// The outcome of [`status_timeouts`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusUpdate {
    /// The new status, when it differs from the current one.
    pub status: Option<NodeImageStatus>,
    pub failed: Vec<FailedTag>,
    pub requeue: Option<Duration>,
}

fn failed_status(tag: &str, version: i64, message: &str, now: Timestamp) -> ImageTagStatus {
    ImageTagStatus {
        tag: tag.to_string(),
        phase: ImagePullPhase::Failed,
        completion_time: Some(Time(now)),
        version,
        message: message.to_string(),
        ..Default::default()
    }
}

/// Fails tags the daemon has not answered for within [`RESPONSE_TIMEOUT`] of `createdAt`, and
/// unfinished tags past `activeDeadlineSeconds` (plus the response timeout); then, if anything
/// changed, drops statuses of tags no longer in the spec and recounts.
pub fn status_timeouts(ni: &NodeImage, now: Timestamp) -> StatusUpdate {
    let mut out = StatusUpdate::default();
    let old = ni.status.clone().unwrap_or_default();
    let mut statuses = old.image_statuses.clone();
    let mut in_spec: BTreeSet<(String, String)> = BTreeSet::new();
    for (name, spec) in &ni.spec.images {
        let mut st: ImageStatus = statuses.get(name).cloned().unwrap_or_default();
        for tag in &spec.tags {
            in_spec.insert((name.clone(), tag.tag.clone()));
            let Some(created) = tag.created_at.as_ref() else {
                continue;
            };
            let age = since(now, created.0);
            let full = format!("{name}:{}", tag.tag);
            let idx = st.tags.iter().position(|t| t.tag == tag.tag);
            let mut failed_msg = None;
            let answered = idx.is_some_and(|i| st.tags[i].version == tag.version);
            if !answered {
                if let Some(left) = remaining(RESPONSE_TIMEOUT, age) {
                    out.requeue = min_dur(out.requeue, left);
                    continue;
                }
                let s = failed_status(&tag.tag, tag.version, MSG_NOT_RESPONDED, now);
                match idx {
                    Some(i) => st.tags[i] = s,
                    None => st.tags.push(s),
                }
                failed_msg = Some(MSG_NOT_RESPONDED);
            } else if let Some(i) = idx
                && st.tags[i].completion_time.is_none()
                && let Some(deadline) = tag
                    .pull_policy
                    .as_ref()
                    .and_then(|p| p.active_deadline_seconds)
            {
                let limit = Duration::from_secs(u64::try_from(deadline.max(0)).unwrap_or(0))
                    + RESPONSE_TIMEOUT;
                if let Some(left) = remaining(limit, age) {
                    out.requeue = min_dur(out.requeue, left);
                    continue;
                }
                st.tags[i] = failed_status(&tag.tag, tag.version, MSG_DEADLINE, now);
                failed_msg = Some(MSG_DEADLINE);
            }
            if let Some(message) = failed_msg {
                out.failed.push(FailedTag {
                    image: full,
                    message: message.to_string(),
                    owners: tag.owner_references.clone(),
                });
            }
        }
        if !st.tags.is_empty() {
            st.tags.sort_by(|a, b| a.tag.cmp(&b.tag));
            statuses.insert(name.clone(), st);
        }
    }
    if statuses == old.image_statuses {
        return out;
    }
    let (mut succeeded, mut failed, mut pulling) = (0, 0, 0);
    let mut kept = BTreeMap::new();
    for (name, mut st) in statuses {
        if !ni.spec.images.contains_key(&name) {
            continue;
        }
        st.tags
            .retain(|t| in_spec.contains(&(name.clone(), t.tag.clone())));
        for t in &st.tags {
            match t.phase {
                ImagePullPhase::Succeeded => succeeded += 1,
                ImagePullPhase::Failed => failed += 1,
                ImagePullPhase::Pulling => pulling += 1,
                ImagePullPhase::Waiting => {}
            }
        }
        if !st.tags.is_empty() {
            kept.insert(name, st);
        }
    }
    let mut status = old;
    status.image_statuses = kept;
    status.desired = i32::try_from(in_spec.len()).unwrap_or(i32::MAX);
    status.succeeded = succeeded;
    status.failed = failed;
    status.pulling = pulling;
    out.status = Some(status);
    out
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
