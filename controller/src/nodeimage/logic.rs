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
use kruise_api::keys;
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
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let Some(ready) = ready.filter(|c| c.status == "True") else {
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
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeStatus};
    use kruise_api::apps::v1beta1::{ImageTagPullPolicy, ImageTagSpec, NodeImageSpec};

    const T0: i64 = 1_700_000_000;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("ts")
    }

    fn node(ready: Option<(&str, i64)>) -> Node {
        Node {
            status: Some(NodeStatus {
                conditions: ready.map(|(s, at)| {
                    vec![NodeCondition {
                        type_: "Ready".into(),
                        status: s.into(),
                        last_transition_time: Some(Time(ts(at))),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn creation_waits_for_ready_plus_delay() {
        let cases = [
            (None, T0, Creation::NotReady),
            (Some(("False", T0)), T0 + 100, Creation::NotReady),
            (
                Some(("True", T0)),
                T0 + 10,
                Creation::After(Duration::from_secs(20)),
            ),
            (Some(("True", T0)), T0 + 30, Creation::Now),
            (Some(("True", T0)), T0 + 300, Creation::Now),
        ];
        for (ready, now, want) in cases {
            assert_eq!(creation(&node(ready), ts(now)), want, "{ready:?} at {now}");
        }
    }

    fn job_ref(name: &str, uid: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some(keys::APPS_V1BETA1.into()),
            kind: Some("ImagePullJob".into()),
            namespace: Some("ns".into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..Default::default()
        }
    }

    fn tag(
        t: &str,
        owners: Vec<ObjectReference>,
        ttl: Option<i32>,
        deadline: Option<i64>,
    ) -> ImageTagSpec {
        ImageTagSpec {
            tag: t.into(),
            created_at: Some(Time(ts(T0))),
            owner_references: owners,
            version: 1,
            pull_policy: Some(ImageTagPullPolicy {
                ttl_seconds_after_finished: ttl,
                active_deadline_seconds: deadline,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ni(
        images: Vec<(&str, Vec<ImageTagSpec>)>,
        statuses: Vec<(&str, Vec<ImageTagStatus>)>,
    ) -> NodeImage {
        let mut n = NodeImage::new(
            "n1",
            NodeImageSpec {
                images: images
                    .into_iter()
                    .map(|(k, tags)| {
                        (
                            k.to_string(),
                            ImageSpec {
                                tags,
                                ..Default::default()
                            },
                        )
                    })
                    .collect(),
            },
        );
        n.status = Some(NodeImageStatus {
            image_statuses: statuses
                .into_iter()
                .map(|(k, tags)| (k.to_string(), ImageStatus { tags }))
                .collect(),
            ..Default::default()
        });
        n
    }

    fn st(t: &str, phase: ImagePullPhase, version: i64, done: Option<i64>) -> ImageTagStatus {
        ImageTagStatus {
            tag: t.into(),
            phase,
            version,
            completion_time: done.map(|d| Time(ts(d))),
            ..Default::default()
        }
    }

    fn lookup(r: &ObjectReference) -> Owner {
        match r.name.as_deref() {
            Some("alive") => Owner::Exists("u1".into()),
            Some("recreated") => Owner::Exists("other".into()),
            Some("flaky") => Owner::Unknown,
            _ => Owner::Gone,
        }
    }

    #[test]
    fn clean_spec_drops_gone_owners_and_expired_tags() {
        let n = ni(
            vec![
                (
                    "a",
                    vec![tag(
                        "1",
                        vec![job_ref("alive", "u1"), job_ref("gone", "u2")],
                        None,
                        None,
                    )],
                ),
                ("b", vec![tag("1", vec![job_ref("gone", "u2")], None, None)]),
                (
                    "c",
                    vec![tag("1", vec![job_ref("recreated", "u1")], None, None)],
                ),
                (
                    "d",
                    vec![tag("1", vec![job_ref("flaky", "u1")], None, None)],
                ),
                (
                    "e",
                    vec![
                        tag("1", vec![job_ref("alive", "u1")], Some(100), None),
                        tag("2", vec![job_ref("alive", "u1")], Some(100), None),
                    ],
                ),
            ],
            vec![(
                "e",
                vec![
                    st("1", ImagePullPhase::Succeeded, 1, Some(T0)),
                    st("2", ImagePullPhase::Succeeded, 1, Some(T0 + 50)),
                ],
            )],
        );
        let out = clean_spec(&n, &lookup, &|_| true, ts(T0 + 120));
        let images = out.images.expect("modified");
        assert_eq!(
            images.keys().cloned().collect::<Vec<_>>(),
            vec!["a", "d", "e"]
        );
        assert_eq!(images["a"].tags[0].owner_references.len(), 1);
        assert_eq!(images["e"].tags.len(), 1);
        assert_eq!(images["e"].tags[0].tag, "2");
        assert_eq!(out.requeue, Some(Duration::from_secs(30)));
    }

    #[test]
    fn clean_spec_unchanged_and_secret_cleanup() {
        let mut n = ni(
            vec![(
                "a",
                vec![tag("1", vec![job_ref("alive", "u1")], None, None)],
            )],
            vec![],
        );
        assert_eq!(clean_spec(&n, &lookup, &|_| true, ts(T0)).images, None);
        n.spec.images.get_mut("a").expect("a").pull_secrets = vec![
            ReferenceObject {
                namespace: "cfg".into(),
                name: "old".into(),
                mode: String::new(),
            },
            ReferenceObject {
                namespace: "cfg".into(),
                name: "new".into(),
                mode: ReferenceObject::MODE_BATCH.into(),
            },
        ];
        let out = clean_spec(&n, &lookup, &|_| false, ts(T0));
        let secrets = &out.images.expect("modified")["a"].pull_secrets;
        assert_eq!(secrets.len(), 1);
        assert_eq!(secrets[0].name, "new");
        // A tag without createdAt is dropped.
        let mut n = ni(
            vec![(
                "a",
                vec![tag("1", vec![job_ref("alive", "u1")], None, None)],
            )],
            vec![],
        );
        n.spec.images.get_mut("a").expect("a").tags[0].created_at = None;
        assert_eq!(
            clean_spec(&n, &lookup, &|_| true, ts(T0)).images,
            Some(BTreeMap::new())
        );
    }

    /// (status of the tag, deadline, now, expected failure message, expected requeue secs)
    type Case = (
        Option<ImageTagStatus>,
        Option<i64>,
        i64,
        Option<&'static str>,
        Option<u64>,
    );

    #[test]
    fn status_timeouts_table() {
        let owners = vec![job_ref("alive", "u1")];
        // (status of the tag, now, expected phase/message or None, requeue)
        let cases: Vec<Case> = vec![
            (None, None, T0 + 60, None, Some(540)),
            (None, None, T0 + 600, Some(MSG_NOT_RESPONDED), None),
            (
                Some(st("1", ImagePullPhase::Pulling, 0, None)),
                None,
                T0 + 601,
                Some(MSG_NOT_RESPONDED),
                None,
            ),
            (
                Some(st("1", ImagePullPhase::Pulling, 1, None)),
                None,
                T0 + 10_000,
                None,
                None,
            ),
            (
                Some(st("1", ImagePullPhase::Pulling, 1, None)),
                Some(60),
                T0 + 600,
                None,
                Some(60),
            ),
            (
                Some(st("1", ImagePullPhase::Pulling, 1, None)),
                Some(60),
                T0 + 660,
                Some(MSG_DEADLINE),
                None,
            ),
            (
                Some(st("1", ImagePullPhase::Succeeded, 1, Some(T0))),
                Some(60),
                T0 + 9_999,
                None,
                None,
            ),
        ];
        for (i, (status, deadline, now, want, requeue)) in cases.into_iter().enumerate() {
            let n = ni(
                vec![("a", vec![tag("1", owners.clone(), None, deadline)])],
                status.map(|s| vec![("a", vec![s])]).unwrap_or_default(),
            );
            let out = status_timeouts(&n, ts(now));
            match want {
                None => assert_eq!(out.status, None, "case {i}"),
                Some(msg) => {
                    let s = out.status.expect("status");
                    let t = &s.image_statuses["a"].tags[0];
                    assert_eq!(t.message, msg, "case {i}");
                    assert_eq!(t.phase, ImagePullPhase::Failed);
                    assert_eq!(t.version, 1);
                    assert_eq!((s.desired, s.failed), (1, 1));
                    assert_eq!(out.failed.len(), 1);
                    assert_eq!(out.failed[0].owners, owners);
                }
            }
            assert_eq!(out.requeue, requeue.map(Duration::from_secs), "case {i}");
        }
    }

    #[test]
    fn status_drops_tags_not_in_spec_when_rewriting() {
        let n = ni(
            vec![("a", vec![tag("1", vec![], None, None)])],
            vec![
                ("a", vec![st("0", ImagePullPhase::Succeeded, 1, Some(T0))]),
                (
                    "gone",
                    vec![st("1", ImagePullPhase::Succeeded, 1, Some(T0))],
                ),
            ],
        );
        let s = status_timeouts(&n, ts(T0 + 700)).status.expect("status");
        assert_eq!(s.image_statuses.len(), 1);
        assert_eq!(s.image_statuses["a"].tags.len(), 1);
        assert_eq!(s.image_statuses["a"].tags[0].tag, "1");
        assert_eq!((s.desired, s.succeeded, s.failed), (1, 0, 1));
    }
}
