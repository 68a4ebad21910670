//! Pure NodeImage bookkeeping: which tags need a worker, the status to write, when to retry.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::apitypes::{
    ImagePullPhase, ImageStatus, ImageTagSpec, ImageTagStatus, NodeImageSpec, NodeImageStatus,
};

/// Upstream defaults for a tag's pull policy.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
pub const DEFAULT_BACKOFF_LIMIT: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Per-attempt timeout of a tag.
pub fn pull_timeout(tag: &ImageTagSpec) -> Duration {
    tag.pull_policy
        .as_ref()
        .and_then(|p| p.timeout_seconds)
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(s as u64))
        .unwrap_or(DEFAULT_TIMEOUT)
}

/// Retries after the first attempt; a negative limit falls back to the default, as upstream.
pub fn backoff_limit(tag: &ImageTagSpec) -> u32 {
    match tag.pull_policy.as_ref().and_then(|p| p.backoff_limit) {
        Some(n) if n >= 0 => n as u32,
        _ => DEFAULT_BACKOFF_LIMIT,
    }
}

/// Sleep before retry number `attempt` (0-based): 1s, 2s, 4s… capped at 30s.
pub fn backoff_delay(attempt: u32) -> Duration {
    let d = FIRST_BACKOFF.saturating_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX));
    d.min(MAX_BACKOFF)
}

/// `name:tag`, the reference handed to the runtime.
pub fn full_image_name(name: &str, tag: &str) -> String {
    format!("{name}:{tag}")
}

/// A tag whose status (same version) already has a completion time is finished: it keeps its
/// status and gets no worker, even after a daemon restart.
pub fn finished_status<'a>(
    status: Option<&'a NodeImageStatus>,
    image: &str,
    tag: &ImageTagSpec,
) -> Option<&'a ImageTagStatus> {
    status?
        .image_statuses
        .get(image)?
        .tags
        .iter()
        .find(|t| t.tag == tag.tag && t.version == tag.version && t.completion_time.is_some())
}

/// Builds the status to write from the spec and the per-tag statuses the workers hold.
/// Tags not in the spec are dropped, tags are sorted by name (as upstream), counters recomputed.
/// Fields the daemon does not own (firstSyncStatus) are kept from `previous`.
pub fn aggregate(
    spec: &NodeImageSpec,
    previous: Option<&NodeImageStatus>,
    tag_statuses: &BTreeMap<String, BTreeMap<String, ImageTagStatus>>,
) -> NodeImageStatus {
    let mut out = NodeImageStatus {
        first_sync_status: previous.and_then(|p| p.first_sync_status.clone()),
        ..Default::default()
    };
    let mut images = BTreeMap::new();
    for (name, image) in &spec.images {
        out.desired += image.tags.len() as i32;
        let Some(known) = tag_statuses.get(name) else {
            continue;
        };
        let mut tags: Vec<ImageTagStatus> = image
            .tags
            .iter()
            .filter_map(|t| known.get(&t.tag).cloned())
            .collect();
        if tags.is_empty() {
            continue;
        }
        tags.sort_by(|a, b| a.tag.cmp(&b.tag));
        for t in &tags {
            match t.phase {
                ImagePullPhase::Succeeded => out.succeeded += 1,
                ImagePullPhase::Failed => out.failed += 1,
                ImagePullPhase::Pulling => out.pulling += 1,
                ImagePullPhase::Waiting => out.waiting += 1,
            }
        }
        images.insert(name.clone(), ImageStatus { tags });
    }
    out.image_statuses = images;
    out
}

/// Whether anything is still to be reported soon: some tag not finished, or a finished status
/// carries an older version than the spec.
pub fn in_progress(spec: &NodeImageSpec, status: &NodeImageStatus) -> bool {
    if status.succeeded + status.failed < status.desired {
        return true;
    }
    spec.images.iter().any(|(name, image)| {
        image.tags.iter().any(|t| {
            status.image_statuses.get(name).is_some_and(|s| {
                s.tags
                    .iter()
                    .any(|st| st.tag == t.tag && st.version != t.version)
            })
        })
    })
}

/// Whether `new` has more finished (Succeeded or Failed) tags than `old`.
pub fn more_finished(old: Option<&NodeImageStatus>, new: &NodeImageStatus) -> bool {
    let done = |s: &NodeImageStatus| s.succeeded + s.failed;
    new.succeeded + new.failed > old.map(done).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finishing_a_tag_is_more_finished() {
        let pulling = NodeImageStatus {
            desired: 2,
            pulling: 2,
            ..Default::default()
        };
        let one_done = NodeImageStatus {
            desired: 2,
            pulling: 1,
            succeeded: 1,
            ..Default::default()
        };
        assert!(more_finished(Some(&pulling), &one_done));
        assert!(more_finished(None, &one_done));
        assert!(!more_finished(Some(&one_done), &one_done));
        assert!(!more_finished(Some(&pulling), &pulling));
    }
    use crate::apitypes::{ImageSpec, ImageTagPullPolicy};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn tag(t: &str, version: i64) -> ImageTagSpec {
        ImageTagSpec {
            tag: t.into(),
            version,
            ..Default::default()
        }
    }

    fn st(t: &str, phase: ImagePullPhase, version: i64, done: bool) -> ImageTagStatus {
        ImageTagStatus {
            tag: t.into(),
            phase,
            version,
            completion_time: done.then_some(Time(jiff::Timestamp::UNIX_EPOCH)),
            ..Default::default()
        }
    }

    fn spec(images: &[(&str, Vec<ImageTagSpec>)]) -> NodeImageSpec {
        NodeImageSpec {
            images: images
                .iter()
                .map(|(n, tags)| {
                    (
                        n.to_string(),
                        ImageSpec {
                            tags: tags.clone(),
                            ..Default::default()
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn policy_defaults() {
        let t = tag("v1", 0);
        assert_eq!(pull_timeout(&t), Duration::from_secs(600));
        assert_eq!(backoff_limit(&t), 3);
        let t = ImageTagSpec {
            pull_policy: Some(ImageTagPullPolicy {
                timeout_seconds: Some(5),
                backoff_limit: Some(-1),
                ..Default::default()
            }),
            ..tag("v1", 0)
        };
        assert_eq!(pull_timeout(&t), Duration::from_secs(5));
        assert_eq!(backoff_limit(&t), 3);
        let t = ImageTagSpec {
            pull_policy: Some(ImageTagPullPolicy {
                backoff_limit: Some(0),
                ..Default::default()
            }),
            ..tag("v1", 0)
        };
        assert_eq!(backoff_limit(&t), 0);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_delay(0), Duration::from_secs(1));
        assert_eq!(backoff_delay(1), Duration::from_secs(2));
        assert_eq!(backoff_delay(4), Duration::from_secs(16));
        assert_eq!(backoff_delay(5), Duration::from_secs(30));
        assert_eq!(backoff_delay(40), Duration::from_secs(30));
    }

    #[test]
    fn aggregate_counts_sorts_and_drops_unknown_tags() {
        let spec = spec(&[
            ("reg/a", vec![tag("v2", 1), tag("v1", 1), tag("v3", 1)]),
            ("reg/b", vec![tag("latest", 0)]),
            ("reg/c", vec![tag("x", 0)]),
        ]);
        let mut known = BTreeMap::new();
        known.insert(
            "reg/a".to_string(),
            BTreeMap::from([
                (
                    "v2".to_string(),
                    st("v2", ImagePullPhase::Pulling, 1, false),
                ),
                (
                    "v1".to_string(),
                    st("v1", ImagePullPhase::Succeeded, 1, true),
                ),
                (
                    "v3".to_string(),
                    st("v3", ImagePullPhase::Waiting, 1, false),
                ),
                (
                    "old".to_string(),
                    st("old", ImagePullPhase::Failed, 1, true),
                ),
            ]),
        );
        known.insert(
            "reg/b".to_string(),
            BTreeMap::from([(
                "latest".to_string(),
                st("latest", ImagePullPhase::Failed, 0, true),
            )]),
        );
        known.insert("gone".to_string(), BTreeMap::new());
        let prev = NodeImageStatus {
            first_sync_status: Some(crate::apitypes::SyncStatusForTests::default()),
            ..Default::default()
        };
        let s = aggregate(&spec, Some(&prev), &known);
        assert_eq!(
            (s.desired, s.succeeded, s.failed, s.pulling, s.waiting),
            (5, 1, 1, 1, 1)
        );
        let imgs = &s.image_statuses;
        assert_eq!(imgs.len(), 2);
        let a: Vec<_> = imgs["reg/a"].tags.iter().map(|t| t.tag.as_str()).collect();
        assert_eq!(a, vec!["v1", "v2", "v3"]);
        assert!(s.first_sync_status.is_some());
        assert!(in_progress(&spec, &s));
    }

    #[test]
    fn aggregate_of_empty_spec_has_no_statuses() {
        let s = aggregate(&NodeImageSpec::default(), None, &BTreeMap::new());
        assert_eq!(s, NodeImageStatus::default());
        assert!(!in_progress(&NodeImageSpec::default(), &s));
    }

    #[test]
    fn finished_tags_are_recognised_by_version() {
        let status = NodeImageStatus {
            image_statuses: BTreeMap::from([(
                "reg/a".to_string(),
                ImageStatus {
                    tags: vec![
                        st("v1", ImagePullPhase::Succeeded, 1, true),
                        st("v2", ImagePullPhase::Pulling, 1, false),
                    ],
                },
            )]),
            ..Default::default()
        };
        assert!(finished_status(Some(&status), "reg/a", &tag("v1", 1)).is_some());
        // Same tag, newer version in the spec: pull again.
        assert!(finished_status(Some(&status), "reg/a", &tag("v1", 2)).is_none());
        // Interrupted pull (no completion time): resume.
        assert!(finished_status(Some(&status), "reg/a", &tag("v2", 1)).is_none());
        assert!(finished_status(None, "reg/a", &tag("v1", 1)).is_none());
    }

    #[test]
    fn version_skew_keeps_reporting() {
        let spec = spec(&[("reg/a", vec![tag("v1", 2)])]);
        let status = NodeImageStatus {
            desired: 1,
            succeeded: 1,
            image_statuses: BTreeMap::from([(
                "reg/a".to_string(),
                ImageStatus {
                    tags: vec![st("v1", ImagePullPhase::Succeeded, 1, true)],
                },
            )]),
            ..Default::default()
        };
        assert!(in_progress(&spec, &status));
    }
}
