//! Pure status of an Advanced StatefulSet (upstream `computeReplicaStatus`, `updateStatus` and
//! `completeRollingUpdate`), and its conditions.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::{
    StatefulSet, StatefulSetCondition, StatefulSetStatus, StatefulSetUpdateStrategyType,
};
use kruise_api::condition;
use kruise_api::keys::k8s;
use serde_json::Value;

use super::plan::{is_running_and_ready, is_terminating, running_and_available};
use crate::workload::podutil;

/// Fills the pod counts of `status` from `pods` (every pod of the set, condemned included), and
/// moves currentRevision to updateRevision once every pod is updated and ready.
pub fn count(
    sts: &StatefulSet,
    status: &mut StatefulSetStatus,
    pods: &[&Pod],
    min_ready_seconds: i32,
    now: Timestamp,
) {
    let (mut replicas, mut ready, mut available) = (0, 0, 0);
    let (mut current, mut updated, mut updated_ready, mut updated_available) = (0, 0, 0, 0);
    for pod in pods {
        let created = !podutil::phase(pod).is_empty();
        if created {
            replicas += 1;
        }
        // A pod mid in-place update is not ready, whatever a stale Ready says (as CloneSet's
        // counts): otherwise status can report the rollout done before its containers restart.
        let in_service = podutil::is_inplace_update_ready(pod);
        let is_ready = is_running_and_ready(pod) && in_service;
        let is_available = running_and_available(pod, min_ready_seconds, now).0 && in_service;
        if is_ready {
            ready += 1;
            if is_available {
                available += 1;
            }
        }
        if created && !is_terminating(pod) {
            if podutil::is_at_revision(pod, &status.current_revision) {
                current += 1;
            }
            if podutil::is_at_revision(pod, &status.update_revision) {
                updated += 1;
                if is_ready {
                    updated_ready += 1;
                    if is_available {
                        updated_available += 1;
                    }
                }
            }
        }
    }
    status.replicas = replicas;
    status.ready_replicas = ready;
    status.available_replicas = available;
    status.current_replicas = current;
    status.updated_replicas = updated;
    status.updated_ready_replicas = updated_ready;
    status.updated_available_replicas = updated_available;
    let rolling = sts.spec.update_strategy.type_.unwrap_or_default()
        == StatefulSetUpdateStrategyType::RollingUpdate;
    if rolling && updated == replicas && ready == replicas {
        status.current_revision = status.update_revision.clone();
        status.current_replicas = updated;
    }
}

/// Sets (or replaces) the condition of `cond.type_`, keeping the transition time when the
/// status did not change (upstream `SetStatefulsetCondition`).
pub fn set_condition(status: &mut StatefulSetStatus, cond: StatefulSetCondition) {
    condition::set(&mut status.conditions, cond);
}

/// Drops the condition of `type_`.
pub fn remove_condition(status: &mut StatefulSetStatus, type_: &str) {
    condition::remove(&mut status.conditions, type_);
}

pub fn condition(type_: &str, reason: &str, message: &str, now: Timestamp) -> StatefulSetCondition {
    StatefulSetCondition {
        type_: type_.to_string(),
        status: k8s::CONDITION_TRUE.to_string(),
        last_transition_time: Some(Time(now)),
        reason: reason.to_string(),
        message: message.to_string(),
    }
}

/// The merge patch from `old` to `new`; fields omitted when zero are cleared explicitly.
pub fn status_patch(
    old: Option<&StatefulSetStatus>,
    new: &StatefulSetStatus,
) -> Result<Value, serde_json::Error> {
    crate::workload::status::status_patch(old, new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use kruise_api::apps::v1beta1::StatefulSetSpec;
    use kruise_api::keys;

    fn pod(rev: &str, ready: bool) -> Pod {
        let mut p = Pod::default();
        p.metadata.labels = Some(
            [(
                keys::CONTROLLER_REVISION_HASH_LABEL.to_string(),
                rev.to_string(),
            )]
            .into(),
        );
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: k8s::POD_READY.into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    #[test]
    fn counts_and_revision_completion() {
        let sts = StatefulSet::new("web", StatefulSetSpec::default());
        let mut st = StatefulSetStatus {
            current_revision: "web-a".into(),
            update_revision: "web-b".into(),
            ..Default::default()
        };
        let pods = [pod("web-a", true), pod("web-b", true), pod("web-b", false)];
        let refs: Vec<&Pod> = pods.iter().collect();
        count(&sts, &mut st, &refs, 0, Timestamp::UNIX_EPOCH);
        assert_eq!(
            (
                st.replicas,
                st.ready_replicas,
                st.current_replicas,
                st.updated_replicas
            ),
            (3, 2, 1, 2)
        );
        assert_eq!(st.updated_ready_replicas, 1);
        assert_eq!(st.current_revision, "web-a");
        let pods = [pod("web-b", true), pod("web-b", true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        count(&sts, &mut st, &refs, 0, Timestamp::UNIX_EPOCH);
        assert_eq!(st.current_revision, "web-b");
        assert_eq!(st.current_replicas, 2);
    }

    /// The kubelet may write Ready=True from a stale view after the engine set
    /// InPlaceUpdateReady=False: such a pod is neither ready nor updated-ready, and the rollout
    /// does not complete on it.
    #[test]
    fn a_pod_mid_inplace_update_is_not_ready_even_if_ready_says_so() {
        let sts = StatefulSet::new("web", StatefulSetSpec::default());
        let mut st = StatefulSetStatus {
            current_revision: "web-a".into(),
            update_revision: "web-b".into(),
            ..Default::default()
        };
        let mut mid = pod("web-b", true);
        kruise_api::pod::set_condition(
            &mut mid,
            PodCondition {
                type_: keys::INPLACE_UPDATE_READY.into(),
                status: k8s::CONDITION_FALSE.into(),
                ..Default::default()
            },
        );
        let pods = [pod("web-b", true), mid.clone()];
        let refs: Vec<&Pod> = pods.iter().collect();
        count(&sts, &mut st, &refs, 0, Timestamp::UNIX_EPOCH);
        assert_eq!(
            (
                st.ready_replicas,
                st.available_replicas,
                st.updated_replicas,
                st.updated_ready_replicas
            ),
            (1, 1, 2, 1)
        );
        assert_eq!(st.current_revision, "web-a", "not complete mid-update");
        kruise_api::pod::set_condition(
            &mut mid,
            PodCondition {
                type_: keys::INPLACE_UPDATE_READY.into(),
                status: k8s::CONDITION_TRUE.into(),
                ..Default::default()
            },
        );
        let pods = [pod("web-b", true), mid];
        let refs: Vec<&Pod> = pods.iter().collect();
        count(&sts, &mut st, &refs, 0, Timestamp::UNIX_EPOCH);
        assert_eq!((st.ready_replicas, st.updated_ready_replicas), (2, 2));
        assert_eq!(st.current_revision, "web-b");
    }
}
