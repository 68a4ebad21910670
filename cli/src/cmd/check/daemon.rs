//! The daemon: its DaemonSet, and on every node a Ready Pod of it that reaches the node's CRI
//! runtime (the `kruise.io/CRIAvailable` condition the daemon writes on its Pod).

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::keys;
use kruise_manager::daemonset::nodes::placement;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use super::{Check, FIX_INSTALL};
use crate::dev::{self, cluster};
use crate::error::{Result, kube_err};

/// Label selector of the daemon's Pods (`deploy/daemon/daemon.yaml`).
const DAEMON_SELECTOR: &str = "app.kubernetes.io/name=kruise-daemon";

pub(super) async fn check_daemon(client: &Client) -> Result<Check> {
    let title = "daemon";
    let Some(ds) = cluster::daemonset(client).await? else {
        return Ok(Check::fail(
            title,
            format!(
                "DaemonSet {}/{} not found",
                keys::KRUISE_NAMESPACE,
                dev::DAEMON_DAEMONSET
            ),
            FIX_INSTALL,
        ));
    };
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let all_nodes = nodes.list(&ListParams::default()).await.map_err(kube_err)?;
    // Only the nodes the DaemonSet places a Pod on are owed one: a virtual-kubelet node (the
    // shipped affinity leaves those out) or one its selector or taints refuse is not a fault.
    let template = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .unwrap_or_default();
    let (node_names, skipped): (Vec<String>, Vec<String>) = {
        let (run, skip): (Vec<&Node>, Vec<&Node>) = all_nodes
            .items
            .iter()
            .partition(|n| placement(&template, n).should_run);
        (
            run.iter().map(|n| n.name_any()).collect(),
            skip.iter().map(|n| n.name_any()).collect(),
        )
    };
    let daemon_pods = pods
        .list(&ListParams::default().labels(DAEMON_SELECTOR))
        .await
        .map_err(kube_err)?
        .items;
    let problems = node_problems(&node_names, &daemon_pods);
    Ok(if problems.is_empty() {
        Check::pass(
            title,
            format!(
                "a Ready Pod reaching the CRI runtime on each of {} nodes{}",
                node_names.len(),
                skipped_note(&skipped)
            ),
        )
    } else {
        let without_cri = problems.iter().any(|p| p.contains(NO_CRI));
        Check::fail(
            title,
            problems.join("; "),
            if without_cri {
                format!(
                    "the daemon retries by itself: start the node's runtime, or point the \
                     DaemonSet at its socket (--socket-file under /hostvarrun, or \
                     --runtime-endpoint), then `kubectl describe node` shows {}",
                    keys::DAEMON_REASON_CRI_AVAILABLE
                )
            } else {
                format!(
                    "kubectl -n {} describe daemonset {} (tainted node? image pull?)",
                    keys::KRUISE_NAMESPACE,
                    dev::DAEMON_DAEMONSET
                )
            },
        )
    })
}

/// The nodes the DaemonSet does not place a Pod on, named (the first three) after the count.
fn skipped_note(skipped: &[String]) -> String {
    if skipped.is_empty() {
        return String::new();
    }
    let mut names = skipped
        .iter()
        .take(3)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if skipped.len() > 3 {
        names.push_str(", ...");
    }
    format!(
        " ({} node{} its selector, affinity or taints leave out: {names})",
        skipped.len(),
        if skipped.len() == 1 { "" } else { "s" }
    )
}

/// Words the report uses for a daemon that runs without a usable CRI runtime.
const NO_CRI: &str = "has no CRI runtime";

/// One line per node whose daemon is missing, not Ready or without CRI, naming the Pod and, for
/// CRI, the reason the daemon wrote on its Pod.
fn node_problems(node_names: &[String], pods: &[Pod]) -> Vec<String> {
    let mut out = Vec::new();
    for node in node_names {
        let on_node: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .collect();
        if on_node
            .iter()
            .any(|p| pod_ready(p) && cri_condition(p).is_none_or(|c| c.0))
        {
            continue;
        }
        let without_cri = on_node.iter().find_map(|p| {
            cri_condition(p)
                .filter(|c| !c.0)
                .map(|c| (p.name_any(), c.1))
        });
        out.push(match without_cri {
            Some((pod, why)) => format!("daemon Pod {pod} on {node} {NO_CRI}: {why}"),
            None => format!("no Ready daemon Pod on {node}"),
        });
    }
    out
}

/// The daemon's CRI condition on its Pod: (available, message); None for a daemon that does not
/// write it (yet).
fn cri_condition(p: &Pod) -> Option<(bool, String)> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == keys::DAEMON_CONDITION_CRI_AVAILABLE)
        })
        .map(|c| (c.status == "True", c.message.clone().unwrap_or_default()))
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: &str, conditions: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"nodeName": node, "containers": []},
            "status": {"conditions": conditions},
        }))
        .expect("pod")
    }

    fn nodes(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_daemon_without_cri_is_named_with_its_reason() {
        let pods = [
            pod(
                "d-a",
                "a",
                json!([{"type": "Ready", "status": "True"},
                {"type": keys::DAEMON_CONDITION_CRI_AVAILABLE, "status": "True"}]),
            ),
            pod(
                "d-b",
                "b",
                json!([{"type": "Ready", "status": "False"},
                {"type": keys::DAEMON_CONDITION_CRI_AVAILABLE, "status": "False",
                 "reason": keys::DAEMON_REASON_CRI_UNAVAILABLE,
                 "message": "no CRI socket found; tried /hostvarrun/x.sock"}]),
            ),
        ];
        assert_eq!(
            node_problems(&nodes(&["a", "b", "c"]), &pods),
            vec![
                "daemon Pod d-b on b has no CRI runtime: no CRI socket found; tried /hostvarrun/x.sock"
                    .to_string(),
                "no Ready daemon Pod on c".to_string(),
            ]
        );
    }

    #[test]
    fn a_ready_daemon_without_the_condition_passes() {
        let pods = [pod(
            "d-a",
            "a",
            json!([{"type": "Ready", "status": "True"}]),
        )];
        assert!(node_problems(&nodes(&["a"]), &pods).is_empty());
        let pods = [pod(
            "d-a",
            "a",
            json!([{"type": "Ready", "status": "False"}]),
        )];
        assert_eq!(
            node_problems(&nodes(&["a"]), &pods),
            vec!["no Ready daemon Pod on a".to_string()]
        );
    }

    #[test]
    fn nodes_the_shipped_affinity_leaves_out_are_named_not_failed() {
        // The shipped DaemonSet's affinity and tolerations (deploy/daemon/daemon.yaml).
        let spec: k8s_openapi::api::core::v1::PodSpec = serde_json::from_value(json!({
            "containers": [],
            "tolerations": [{"operator": "Exists"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "type", "operator": "NotIn",
                    "values": ["virtual-kubelet"]}]}]}}},
        }))
        .expect("spec");
        let node = |labels: serde_json::Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}}))
                .expect("node")
        };
        assert!(placement(&spec, &node(json!({}))).should_run);
        assert!(
            !placement(
                &spec,
                &node(json!({keys::VIRTUAL_KUBELET_LABEL_KEY: keys::VIRTUAL_KUBELET_LABEL_VALUE}))
            )
            .should_run
        );
        assert_eq!(skipped_note(&[]), "");
        assert_eq!(
            skipped_note(&nodes(&["vk"])),
            " (1 node its selector, affinity or taints leave out: vk)"
        );
        assert_eq!(
            skipped_note(&nodes(&["a", "b", "c", "d"])),
            " (4 nodes its selector, affinity or taints leave out: a, b, c, ...)"
        );
    }
}
