//! The DaemonSet status from the nodes and their Pods (upstream `updateDaemonSetStatus`).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::{DaemonSetCondition, DaemonSetStatus};
use kruise_api::keys::k8s;

use super::plan::NodePods;
use super::pod::pod_hash;
use crate::workload::podutil;

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Counters per node: scheduled, misscheduled, ready, available, updated.
pub fn calculate(
    nodes: &[NodePods<'_>],
    hash: &str,
    min_ready: i32,
    generation: i64,
    previous: Option<&DaemonSetStatus>,
    now: Timestamp,
) -> DaemonSetStatus {
    let (mut desired, mut current, mut miss, mut ready, mut available, mut updated) =
        (0, 0, 0, 0, 0, 0);
    for np in nodes {
        let live: Vec<_> = np
            .pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        if np.placement.should_run {
            desired += 1;
            if !live.is_empty() {
                current += 1;
            }
            // Mid in-place update is not ready, whatever a stale Ready says.
            if live
                .iter()
                .any(|p| kruise_api::pod::is_ready(p) && podutil::is_inplace_update_ready(p))
            {
                ready += 1;
            }
            if live
                .iter()
                .any(|p| podutil::is_available(p, min_ready, now))
            {
                available += 1;
            }
        } else if !live.is_empty() {
            miss += 1;
        }
        if live.iter().any(|p| pod_hash(p) == Some(hash)) {
            updated += 1;
        }
    }
    DaemonSetStatus {
        current_number_scheduled: count(current),
        number_misscheduled: count(miss),
        desired_number_scheduled: count(desired),
        number_ready: count(ready),
        observed_generation: generation,
        updated_number_scheduled: count(updated),
        number_available: count(available),
        number_unavailable: count(desired.saturating_sub(available)),
        collision_count: previous.and_then(|s| s.collision_count),
        conditions: previous.map(|s| s.conditions.clone()).unwrap_or_default(),
        update_revision: hash.to_owned(),
    }
}

/// Sets condition `type_` True with `reason` and `message`; the transition time moves only when
/// it was not True before (upstream `SetDaemonSetCondition` semantics, as CloneSet's).
pub fn set_failure(
    st: &mut DaemonSetStatus,
    type_: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let since = st
        .conditions
        .iter()
        .find(|c| c.type_ == type_ && c.status == k8s::CONDITION_TRUE)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    st.conditions.retain(|c| c.type_ != type_);
    st.conditions.push(DaemonSetCondition {
        type_: type_.to_owned(),
        status: k8s::CONDITION_TRUE.to_owned(),
        last_transition_time: Some(since),
        reason: reason.to_owned(),
        message: message.to_owned(),
    });
}

/// Removes condition `type_` (the failure is over), as CloneSet does.
pub fn clear_failure(st: &mut DaemonSetStatus, type_: &str) {
    st.conditions.retain(|c| c.type_ != type_);
}

/// The text a condition shows: the API server's own message for a refused request.
pub fn failure_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => s.message.clone(),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemonset::nodes::Placement;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde_json::json;

    fn pod(hash: &str, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"controller-revision-hash": hash}},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .expect("pod")
    }

    #[test]
    fn counts_per_node() {
        let n = Node::default();
        let run = Placement {
            should_run: true,
            should_continue_running: true,
        };
        let off = Placement {
            should_run: false,
            should_continue_running: false,
        };
        let (a, b, c) = (pod("new", true), pod("old", false), pod("old", true));
        let nodes = [
            NodePods {
                node: &n,
                placement: run,
                pods: vec![&a],
            },
            NodePods {
                node: &n,
                placement: run,
                pods: vec![&b],
            },
            NodePods {
                node: &n,
                placement: run,
                pods: vec![],
            },
            NodePods {
                node: &n,
                placement: off,
                pods: vec![&c],
            },
        ];
        let s = calculate(&nodes, "new", 0, 4, None, Timestamp::now());
        assert_eq!(
            (
                s.desired_number_scheduled,
                s.current_number_scheduled,
                s.number_misscheduled
            ),
            (3, 2, 1)
        );
        assert_eq!(
            (s.number_ready, s.number_available, s.number_unavailable),
            (1, 1, 2)
        );
        assert_eq!((s.updated_number_scheduled, s.observed_generation), (1, 4));
        assert_eq!(s.update_revision, "new");
    }

    /// A stale Ready=True beside InPlaceUpdateReady=False (the kubelet's status writer racing
    /// the engine) is neither ready nor available.
    #[test]
    fn a_pod_mid_inplace_update_is_not_ready() {
        let n = Node::default();
        let run = Placement {
            should_run: true,
            should_continue_running: true,
        };
        let mid: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "labels": {"controller-revision-hash": "new"}},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "InPlaceUpdateReady", "status": "False"}
            ]}
        }))
        .expect("pod");
        let nodes = [NodePods {
            node: &n,
            placement: run,
            pods: vec![&mid],
        }];
        let s = calculate(&nodes, "new", 0, 1, None, Timestamp::now());
        assert_eq!(
            (s.number_ready, s.number_available, s.number_unavailable),
            (0, 0, 1)
        );
    }

    #[test]
    fn failure_condition_keeps_its_transition_time_until_cleared() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().expect("ts");
        let t1: Timestamp = "2026-01-01T00:05:00Z".parse().expect("ts");
        let mut st = DaemonSetStatus::default();
        set_failure(&mut st, "FailedScale", "FailedCreate", "quota", t0);
        set_failure(&mut st, "FailedScale", "FailedCreate", "quota again", t1);
        assert_eq!(st.conditions.len(), 1);
        let c = &st.conditions[0];
        assert_eq!(
            (c.status.as_str(), c.message.as_str()),
            ("True", "quota again")
        );
        assert_eq!(c.last_transition_time.as_ref().map(|t| t.0), Some(t0));
        clear_failure(&mut st, "FailedScale");
        assert!(st.conditions.is_empty());
        set_failure(&mut st, "FailedScale", "FailedCreate", "quota", t1);
        assert_eq!(
            st.conditions[0].last_transition_time.as_ref().map(|t| t.0),
            Some(t1)
        );
    }
}
