//! CloneSet status: pod counts, revisions, the Progressing condition, and the label selector
//! string used by the scale subresource.

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kruise_api::apps::v1beta1::{CloneSet, CloneSetCondition, CloneSetStatus};
use kruise_api::condition;
use kruise_api::keys::{self, k8s};
use kruise_api::selector;
use serde_json::Value;

use super::error::Error;
use crate::workload::intstr::partition_replicas;
use crate::workload::podfacts::PodFacts;

/// Fill the pod counts, currentRevision and expectedUpdatedReplicas of `status`, whose revisions
/// are already set.
pub fn calculate_counts(
    cs: &CloneSet,
    status: &mut CloneSetStatus,
    pods: &[PodFacts],
    now: Timestamp,
) {
    let min_ready = cs.spec.min_ready_seconds;
    let replicas = cs.spec.replicas.unwrap_or(1);
    status.replicas = 0;
    status.ready_replicas = 0;
    status.available_replicas = 0;
    status.updated_replicas = 0;
    status.updated_ready_replicas = 0;
    status.updated_available_replicas = 0;
    for pod in pods {
        let ready = pod.readiness.is_update_ready(0, now);
        let available = pod.is_available(min_ready, now);
        let updated = pod.is_at_revision(&status.update_revision);
        status.replicas += 1;
        status.ready_replicas += i32::from(ready);
        status.available_replicas += i32::from(available);
        status.updated_replicas += i32::from(updated);
        status.updated_ready_replicas += i32::from(updated && ready);
        status.updated_available_replicas += i32::from(updated && available);
    }
    // The update revision is stable once every pod runs it and the count is right; readiness does
    // not matter here.
    if status.updated_replicas == status.replicas && status.replicas == replicas {
        status.current_revision = status.update_revision.clone();
    }
    status.expected_updated_replicas = match &cs.spec.update_strategy.rolling_update {
        Some(r) => match partition_replicas(r.partition.as_ref(), replicas) {
            Ok(p) => replicas - p,
            Err(_) => status.expected_updated_replicas,
        },
        None => replicas,
    };
}

pub fn get_condition<'a>(status: &'a CloneSetStatus, type_: &str) -> Option<&'a CloneSetCondition> {
    condition::get(&status.conditions, type_)
}

/// Set a condition by upstream's rules ([`condition::set`]).
pub fn set_condition(status: &mut CloneSetStatus, cond: CloneSetCondition) {
    condition::set(&mut status.conditions, cond);
}

pub fn remove_condition(status: &mut CloneSetStatus, type_: &str) {
    condition::remove(&mut status.conditions, type_);
}

pub fn new_condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> CloneSetCondition {
    CloneSetCondition {
        type_: type_.to_string(),
        status: if status {
            k8s::CONDITION_TRUE
        } else {
            k8s::CONDITION_FALSE
        }
        .to_string(),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
        reason: reason.to_string(),
        message: message.to_string(),
    }
}

fn paused(cs: &CloneSet) -> bool {
    cs.spec
        .update_strategy
        .rolling_update
        .as_ref()
        .is_some_and(|r| r.paused)
}

/// Update the Progressing condition (only with progressDeadlineSeconds); returns when to check
/// again for the deadline.
pub fn progressing(
    cs: &CloneSet,
    status: &mut CloneSetStatus,
    now: Timestamp,
) -> Option<std::time::Duration> {
    let deadline = match cs.spec.progress_deadline_seconds {
        Some(d) if d != i32::MAX => d,
        _ => {
            remove_condition(status, keys::CLONESET_CONDITION_PROGRESSING);
            return None;
        }
    };
    let replicas = cs.spec.replicas.unwrap_or(1);
    let t = keys::CLONESET_CONDITION_PROGRESSING;
    let all_available = status.current_revision == status.update_revision
        && status.replicas == replicas
        && status.updated_replicas == replicas
        && status.updated_available_replicas == replicas;
    if all_available {
        set_condition(
            status,
            new_condition(
                t,
                true,
                keys::CLONESET_REASON_AVAILABLE,
                "CloneSet is available",
                now,
            ),
        );
        return None;
    }
    if paused(cs) {
        set_condition(
            status,
            new_condition(
                t,
                true,
                keys::CLONESET_REASON_PAUSED,
                "CloneSet is paused",
                now,
            ),
        );
        return None;
    }
    if status.expected_updated_replicas < replicas
        && status.expected_updated_replicas <= status.updated_available_replicas
    {
        set_condition(
            status,
            new_condition(
                t,
                true,
                keys::CLONESET_REASON_PROGRESS_PARTITION_AVAILABLE,
                "CloneSet has been paused due to partition ready",
                now,
            ),
        );
        return None;
    }
    let exceeded = get_condition(status, t).is_some_and(|c| {
        c.reason == keys::CLONESET_REASON_PROGRESS_DEADLINE_EXCEEDED
            || c.last_update_time
                .as_ref()
                .is_some_and(|u| u.0 + SignedDuration::from_secs(i64::from(deadline)) < now)
    });
    if exceeded {
        let msg = format!(
            "CloneSet revision {} has timed out progressing",
            status.update_revision
        );
        set_condition(
            status,
            new_condition(
                t,
                false,
                keys::CLONESET_REASON_PROGRESS_DEADLINE_EXCEEDED,
                &msg,
                now,
            ),
        );
        return None;
    }
    set_condition(
        status,
        new_condition(
            t,
            true,
            keys::CLONESET_REASON_UPDATED,
            "CloneSet is progressing",
            now,
        ),
    );
    let since = get_condition(status, t)
        .and_then(|c| c.last_update_time.as_ref())
        .map_or(now, |u| u.0);
    let left = (since + SignedDuration::from_secs(i64::from(deadline))).duration_since(now);
    // One extra second avoids waking up just before the deadline.
    let left = left + SignedDuration::from_secs(1);
    std::time::Duration::try_from(left).ok()
}

/// Whether the new status differs from the old one in a way worth writing.
pub fn status_changed(old: &CloneSetStatus, new: &CloneSetStatus) -> bool {
    let cond_key = |s: &CloneSetStatus| {
        s.conditions
            .iter()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    c.message.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    new.observed_generation > old.observed_generation
        || new.replicas != old.replicas
        || new.ready_replicas != old.ready_replicas
        || new.available_replicas != old.available_replicas
        || new.updated_replicas != old.updated_replicas
        || new.updated_ready_replicas != old.updated_ready_replicas
        || new.updated_available_replicas != old.updated_available_replicas
        || new.expected_updated_replicas != old.expected_updated_replicas
        || new.update_revision != old.update_revision
        || new.current_revision != old.current_revision
        || new.collision_count != old.collision_count
        || new.label_selector != old.label_selector
        || cond_key(old) != cond_key(new)
}

/// `status.labelSelector`: the selector in Kubernetes' string form
/// ([`selector::to_selector_string`], upstream's `LabelSelectorAsSelector(...).String()`).
/// Empty for a selector with an unknown operator, which the invalid-spec gate stops before any
/// status with it is written.
pub fn selector_string(sel: &LabelSelector) -> String {
    selector::to_selector_string(sel).unwrap_or_default()
}

/// The merge patch that turns `old` into `new`. Fields the serializer omits when zero must be
/// cleared explicitly, or the merge would keep their old value.
pub fn status_patch(old: Option<&CloneSetStatus>, new: &CloneSetStatus) -> Result<Value, Error> {
    Ok(crate::workload::status::status_patch(old, new)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::podutil::testpod::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kruise_api::apps::v1beta1::{CloneSetSpec, RollingUpdateCloneSetStrategy};

    fn cs(replicas: i32, partition: Option<IntOrString>) -> CloneSet {
        let mut spec = CloneSetSpec {
            replicas: Some(replicas),
            ..Default::default()
        };
        spec.update_strategy.rolling_update = Some(RollingUpdateCloneSetStrategy {
            partition,
            ..Default::default()
        });
        CloneSet::new("demo", spec)
    }

    fn status(update: &str, current: &str) -> CloneSetStatus {
        CloneSetStatus {
            update_revision: update.into(),
            current_revision: current.into(),
            ..Default::default()
        }
    }

    #[test]
    fn counts_and_revisions() {
        let c = cs(3, None);
        let pods = [
            pod("a").rev("demo-new").running_ready(0).build(),
            pod("b")
                .rev("demo-new")
                .running_ready(0)
                .cond(keys::INPLACE_UPDATE_READY, "False", 0)
                .build(),
            pod("c").rev("demo-old").running_ready(0).build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let mut st = status("demo-new", "demo-old");
        calculate_counts(&c, &mut st, &PodFacts::all(&refs), ts(100));
        assert_eq!(st.replicas, 3);
        assert_eq!(st.ready_replicas, 2);
        assert_eq!(st.available_replicas, 2);
        assert_eq!(st.updated_replicas, 2);
        assert_eq!(st.updated_ready_replicas, 1);
        assert_eq!(st.updated_available_replicas, 1);
        assert_eq!(st.expected_updated_replicas, 3);
        assert_eq!(st.current_revision, "demo-old");
    }

    #[test]
    fn current_revision_follows_when_all_updated_even_if_not_ready() {
        let c = cs(2, None);
        let pods = [
            pod("a").rev("demo-new").build(),
            pod("b").rev("demo-new").build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let mut st = status("demo-new", "demo-old");
        calculate_counts(&c, &mut st, &PodFacts::all(&refs), ts(100));
        assert_eq!(st.current_revision, "demo-new");
        assert_eq!(st.ready_replicas, 0);
    }

    #[test]
    fn expected_updated_replicas_uses_partition() {
        let c = cs(5, Some(IntOrString::String("40%".into())));
        let mut st = status("x", "y");
        calculate_counts(&c, &mut st, &[], ts(0));
        assert_eq!(st.expected_updated_replicas, 3);
        let mut c = cs(5, None);
        c.spec.update_strategy.rolling_update = None;
        calculate_counts(&c, &mut st, &[], ts(0));
        assert_eq!(st.expected_updated_replicas, 5);
    }

    #[test]
    fn progressing_condition_lifecycle() {
        let mut c = cs(2, None);
        let mut st = status("n", "o");
        st.expected_updated_replicas = 2;
        assert!(progressing(&c, &mut st, ts(0)).is_none());
        assert!(st.conditions.is_empty());
        c.spec.progress_deadline_seconds = Some(60);
        let wait = progressing(&c, &mut st, ts(0)).expect("requeue");
        assert_eq!(wait.as_secs(), 61);
        assert_eq!(st.conditions[0].reason, keys::CLONESET_REASON_UPDATED);
        let _ = progressing(&c, &mut st, ts(61));
        assert_eq!(
            st.conditions[0].reason,
            keys::CLONESET_REASON_PROGRESS_DEADLINE_EXCEEDED
        );
        assert_eq!(st.conditions[0].status, "False");
        st.current_revision = "n".into();
        st.replicas = 2;
        st.updated_replicas = 2;
        st.updated_available_replicas = 2;
        let _ = progressing(&c, &mut st, ts(70));
        assert_eq!(st.conditions[0].reason, keys::CLONESET_REASON_AVAILABLE);
        assert_eq!(st.conditions.len(), 1);
    }

    #[test]
    fn condition_transition_time_is_kept() {
        let mut st = CloneSetStatus::default();
        set_condition(&mut st, new_condition("A", true, "R1", "", ts(0)));
        set_condition(&mut st, new_condition("A", true, "R2", "", ts(10)));
        assert_eq!(st.conditions[0].last_transition_time, Some(Time(ts(0))));
        assert_eq!(st.conditions[0].reason, "R2");
        set_condition(&mut st, new_condition("A", false, "R2", "", ts(20)));
        assert_eq!(st.conditions[0].last_transition_time, Some(Time(ts(20))));
    }

    #[test]
    fn selector_strings() {
        let sel = LabelSelector {
            match_labels: Some(
                [
                    ("b".to_string(), "2".to_string()),
                    ("a".to_string(), "1".to_string()),
                ]
                .into(),
            ),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "c".into(),
                    operator: "In".into(),
                    values: Some(vec!["y".into(), "x".into()]),
                },
                LabelSelectorRequirement {
                    key: "d".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
            ]),
        };
        assert_eq!(selector_string(&sel), "a=1,b=2,c in (x,y),!d");
    }

    #[test]
    fn status_change_detection() {
        let a = status("n", "o");
        let mut b = a.clone();
        assert!(!status_changed(&a, &b));
        b.ready_replicas = 1;
        assert!(status_changed(&a, &b));
        let mut c = a.clone();
        c.conditions.push(new_condition(
            keys::CLONESET_CONDITION_FAILED_UPDATE,
            true,
            "",
            "x",
            ts(0),
        ));
        assert!(status_changed(&a, &c));
    }

    #[test]
    fn status_patch_clears_omitted_fields() {
        let old = CloneSetStatus {
            updated_available_replicas: 3,
            expected_updated_replicas: 3,
            conditions: vec![new_condition(
                "FailedUpdate",
                true,
                "",
                "x",
                Timestamp::UNIX_EPOCH,
            )],
            ..Default::default()
        };
        let new = CloneSetStatus {
            replicas: 2,
            ..Default::default()
        };
        let p = status_patch(Some(&old), &new).expect("patch");
        assert_eq!(p["status"]["updatedAvailableReplicas"], Value::Null);
        assert_eq!(p["status"]["conditions"], Value::Null);
        assert_eq!(p["status"]["replicas"], 2);
        assert_eq!(p["status"]["readyReplicas"], 0);
        let p = status_patch(None, &new).expect("patch");
        assert!(p["status"].get("conditions").is_none());
    }
}
