//! The DaemonSet status from the nodes and their Pods (upstream `updateDaemonSetStatus`).

use jiff::Timestamp;
use kruise_api::apps::v1beta1::DaemonSetStatus;

use super::plan::NodePods;
use super::pod::pod_hash;
use crate::cloneset::podutil;

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
            if live.iter().any(|p| kruise_api::pod::is_ready(p)) {
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
}
