//! The daemon: its DaemonSet, and a Ready Pod of it on every node.

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::keys;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use super::{Check, FIX_INSTALL};
use crate::dev::{self, cluster};
use crate::error::{Result, kube_err};

/// Label selector of the daemon's Pods (`deploy/daemon/daemon.yaml`).
const DAEMON_SELECTOR: &str = "app.kubernetes.io/name=kruise-daemon";

pub(super) async fn check_daemon(client: &Client) -> Result<Check> {
    let title = "daemon";
    if cluster::daemonset(client).await?.is_none() {
        return Ok(Check::fail(
            title,
            format!(
                "DaemonSet {}/{} not found",
                keys::KRUISE_NAMESPACE,
                dev::DAEMON_DAEMONSET
            ),
            FIX_INSTALL,
        ));
    }
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let node_names: Vec<String> = nodes
        .list(&ListParams::default())
        .await
        .map_err(kube_err)?
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    let ready_on: Vec<String> = pods
        .list(&ListParams::default().labels(DAEMON_SELECTOR))
        .await
        .map_err(kube_err)?
        .items
        .iter()
        .filter(|p| pod_ready(p))
        .filter_map(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .collect();
    let missing: Vec<&String> = node_names
        .iter()
        .filter(|n| !ready_on.contains(n))
        .collect();
    Ok(if missing.is_empty() {
        Check::pass(
            title,
            format!("a Ready Pod on each of {} nodes", node_names.len()),
        )
    } else {
        Check::fail(
            title,
            format!(
                "no Ready daemon Pod on {}",
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            format!(
                "kubectl -n {} describe daemonset {} (tainted node? image pull?)",
                keys::KRUISE_NAMESPACE,
                dev::DAEMON_DAEMONSET
            ),
        )
    })
}

fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}
