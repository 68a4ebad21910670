//! PersistentPodState across several nodes, on the kwok scale cluster (`hack/scale-cluster.sh`):
//! an Advanced StatefulSet spread over the run's fake Nodes; a deleted Pod comes back with the
//! recorded `kubernetes.io/hostname` as its nodeSelector and lands on the recorded node, out of
//! several it could have taken. The single-node behaviour (generation, scale-down, refusals) is
//! `persistentpodstate.rs`'s.
//!
//! Starts a kruise-manager of this tree against the scale cluster and stops it, and deletes
//! what it created (the scale cluster has no garbage collector). Run by the `kwok` stage of
//! `hack/test.sh` under `flock /tmp/kruise-scale.lock`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::kwok::{self, FakeNode, Manager};
use kruise_e2e::persistentpodstate::{self as pps, create_raw};
use kruise_e2e::statefulset as asts;
use kruise_e2e::{pod_ready, wait_for, wait_pod};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// The namespace of this file's test (see `kruise_e2e::kwok`: never deleted).
const NS: &str = "e2e-pps-kwok";
const RUN_LABEL: &str = "kruise-rs.e2e/pps-run";
const NODES: usize = 4;
/// Generous: on a loaded machine kwok, the scheduler and a debug manager share two cores.
const WAIT: Duration = Duration::from_secs(180);
const HOSTNAME: &str = "kubernetes.io/hostname";

#[tokio::test]
async fn a_recreated_pod_lands_on_its_recorded_node_among_several() {
    let client = kwok::client().await.expect("the kwok scale cluster");
    kwok::namespace(&client, NS).await.expect("namespace");
    kwok::ensure_crd(&client, "persistentpodstates.apps.kruise.io")
        .await
        .expect("the PersistentPodState CRD");
    let manager = Manager::start("pps").await.expect("kruise-manager");
    let (run, fakes) = kwok::run_nodes("pps", RUN_LABEL, NODES);
    let nodes: Vec<String> = fakes.iter().map(|f| f.name.clone()).collect();
    let outcome = tokio::spawn(body(client.clone(), run.clone(), fakes)).await;
    // The StatefulSet first (else it recreates its Pods), then Pods, the object, the Nodes.
    let (gone, pods) =
        kwok::delete_workload_and_pods(&client, &asts::api(&client, NS), NS, &run, WAIT).await;
    let _ = pps::api(&client, NS)
        .delete(&run, &DeleteParams::default())
        .await;
    let deleted_nodes = kwok::delete_nodes(&client, &nodes).await;
    manager.stop().await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    gone.expect("delete the StatefulSet");
    pods.expect("delete the Pods");
    deleted_nodes.expect("delete the Nodes");
}

async fn body(client: Client, run: String, fakes: Vec<FakeNode>) {
    kwok::create_nodes(&client, &fakes)
        .await
        .expect("create Nodes");
    create_raw(
        &client,
        NS,
        &run,
        json!({
            "targetRef": {"apiVersion": keys::APPS_V1BETA1, "kind": "StatefulSet", "name": run},
            "requiredPersistentTopology": {"nodeTopologyKeys": [HOSTNAME]},
        }),
    )
    .await
    .expect("create the PersistentPodState");
    // Spread one Pod a node over the run's Nodes; kwok plays their kubelet.
    let mut sts = asts::new(
        &run,
        NODES as i32 - 1,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel"}),
    )
    .expect("sts");
    sts.data["spec"]["template"]["spec"]["nodeSelector"] = json!({ RUN_LABEL: run });
    sts.data["spec"]["template"]["spec"]["tolerations"] =
        json!([{"operator": "Exists", "effect": "NoSchedule"}]);
    sts.data["spec"]["template"]["spec"]["affinity"] = json!({"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": run}},
            "topologyKey": HOSTNAME}]}});
    asts::api(&client, NS)
        .create(&PostParams::default(), &sts)
        .await
        .expect("create the StatefulSet");
    let states = pps::api(&client, NS);
    let recorded = wait_for("every Pod recorded", WAIT, || async {
        let s = states.get(&run).await?.status.unwrap_or_default();
        Ok((s.pod_states.len() == NODES - 1).then_some(s.pod_states))
    })
    .await
    .expect("recorded");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let name = format!("{run}-1");
    let old = pods.get(&name).await.expect("pod 1");
    let node = old
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    assert_eq!(recorded[&name].node_name, node);
    assert_eq!(
        recorded[&name].node_topology_labels.get(HOSTNAME),
        Some(&node)
    );
    pods.delete(&name, &DeleteParams::default())
        .await
        .expect("delete pod 1");
    let old_uid = old.uid().unwrap_or_default();
    let new = wait_pod(&pods, &name, "recreated and Ready", WAIT, |p| {
        p.uid().as_deref() != Some(old_uid.as_str()) && pod_ready(p)
    })
    .await
    .expect("recreated");
    let spec = new.spec.clone().unwrap_or_default();
    assert_eq!(
        spec.node_selector.unwrap_or_default().get(HOSTNAME),
        Some(&node),
        "the recorded hostname injected"
    );
    assert_eq!(
        spec.node_name.as_deref(),
        Some(node.as_str()),
        "back on its node; the free Node was also eligible"
    );
}
