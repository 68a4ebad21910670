//! WorkloadSpread across zones, on the kwok scale cluster (`hack/scale-cluster.sh`): twenty fake
//! Nodes in three zones, one subset a zone (`z0` capped at 8, `z1` at 12, `z2` uncapped).
//!
//! - A burst of 30 Pods of a ReplicaSet created at once, all through the Pod webhook: the caps
//!   hold exactly (8, 12, 10) however the reservations collide, every Pod runs in its subset's
//!   zone, the status counts them, and the deletion costs rank `z2` lowest, then `z1`, then `z0`.
//!   (The scale cluster has no kube-controller-manager: the ReplicaSet is only an owner here;
//!   `workloadspread.rs` runs a real Deployment's rollout on the local cluster.)
//! - A CloneSet of 12 (caps 4, 4, none) spread 4 + 4 + 4, then scaled to 6 by our manager: `z2`'s
//!   Pods go first, then `z1`'s, and `z0`'s four stay.
//! - Adaptive: a CloneSet of 17 whose Pods take a host port (one a Node), caps 10, 5, none. `z0`
//!   has seven Nodes, so three of its ten Pods cannot be scheduled: past
//!   `rescheduleCriticalSeconds` the manager deletes them and closes `z0`, and their
//!   replacements go past the full `z1` to `z2`: 7 + 5 + 5, all running.
//!
//! Starts a kruise-manager of this tree against the scale cluster and stops it, and deletes what
//! it created (the scale cluster has no garbage collector). Run by the `kwok` stage of
//! `hack/test.sh` under `flock /tmp/kruise-scale.lock`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::MatchedWorkloadSpread;
use kruise_api::keys::{self, k8s};
use kruise_e2e::cloneset as cs;
use kruise_e2e::kwok::{self, FakeNode, Manager};
use kruise_e2e::workloadspread::{self as wsapi, create_seen};
use kruise_e2e::{pod_ready, wait_for};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client, ResourceExt};
use rand::Rng;
use serde_json::{Value, json};

/// The namespace of this file's test (see `kruise_e2e::kwok`: never deleted).
const NS: &str = "e2e-ws-kwok";
const RUN_LABEL: &str = "kruise-rs.e2e/ws-run";
const ZONE: &str = "topology.kubernetes.io/zone";
const NODES: usize = 20;
const ZONES: usize = 3;
const BURST: usize = 30;
/// Generous: on a loaded machine kwok, the scheduler and a debug manager share two cores.
const WAIT: Duration = Duration::from_secs(180);

fn subset_of(p: &Pod) -> Option<String> {
    MatchedWorkloadSpread::of(p.metadata.annotations.as_ref()).map(|m| m.subset)
}

/// How many of the Pods are in each subset, by the webhook's annotation.
fn per_subset(pods: &[Pod]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for p in pods {
        *out.entry(subset_of(p).unwrap_or_else(|| "-".into()))
            .or_default() += 1;
    }
    out
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// Every Pod runs in its subset's zone.
fn in_their_zones(pods: &[Pod], zone_of: &BTreeMap<String, String>) {
    for p in pods {
        let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
        let zone = node.as_ref().and_then(|n| zone_of.get(n)).cloned();
        assert_eq!(
            zone,
            subset_of(p),
            "{} runs in its subset's zone",
            p.name_any()
        );
    }
}

/// One subset a zone, each required to its zone; `caps` per zone (`None` uncapped).
fn zone_subsets(caps: [Option<i32>; ZONES]) -> Value {
    let subsets: Vec<Value> = caps
        .iter()
        .enumerate()
        .map(|(i, cap)| {
            let mut s = json!({"name": format!("z{i}"), "requiredNodeSelectorTerm": {
                "matchExpressions": [{"key": ZONE, "operator": "In", "values": [format!("z{i}")]}]}});
            if let Some(c) = cap {
                s["maxReplicas"] = json!(c);
            }
            s
        })
        .collect();
    json!(subsets)
}

/// The Pod spec bits every Pod of the run needs: on the run's Nodes, past kwok's taints.
fn on_run_nodes(run: &str) -> Value {
    json!({
        "nodeSelector": {RUN_LABEL: run},
        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": kruise_e2e::image("testapp", "v1")}]
    })
}

#[tokio::test]
async fn caps_hold_under_a_burst_and_scale_down_starts_from_the_last_zone() {
    let client = kwok::client().await.expect("the kwok scale cluster");
    kwok::namespace(&client, NS).await.expect("namespace");
    kwok::ensure_crd(&client, "workloadspreads.apps.kruise.io")
        .await
        .expect("the WorkloadSpread CRD");
    let manager = Manager::start("ws").await.expect("kruise-manager");
    let suffix: u32 = rand::rng().random_range(0..0xff_ffff);
    let run = format!("ws-{suffix:06x}");
    let nodes: Vec<String> = (0..NODES).map(|i| format!("{run}-{i:02}")).collect();
    let fakes: Vec<FakeNode> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            FakeNode::new(n.clone())
                .label(RUN_LABEL, &run)
                .label(ZONE, &format!("z{}", i % ZONES))
        })
        .collect();
    let outcome = tokio::spawn(body(client.clone(), run.clone(), fakes)).await;
    // The CloneSet first (else it recreates its Pods), then Pods, the objects, the Nodes.
    let sets = cs::api(&client, NS);
    let cloneset = format!("{run}-cs");
    let _ = sets.delete(&cloneset, &DeleteParams::default()).await;
    let gone = wait_for("the CloneSet deleted", WAIT, || async {
        Ok(sets.get_opt(&cloneset).await?.is_none().then_some(()))
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let mut deleted_pods = Vec::new();
    let adaptive = format!("{run}-ad");
    let _ = sets.delete(&adaptive, &DeleteParams::default()).await;
    for app in [format!("{run}-rs"), cloneset.clone(), adaptive.clone()] {
        deleted_pods.push(kwok::delete_pods(&pods, &format!("app={app}")).await);
    }
    let spreads = wsapi::api(&client, NS);
    for name in [format!("{run}-rs"), cloneset, adaptive] {
        let _ = spreads.delete(&name, &DeleteParams::default()).await;
    }
    let _ = Api::<ReplicaSet>::namespaced(client.clone(), NS)
        .delete(&format!("{run}-rs"), &DeleteParams::default())
        .await;
    let deleted_nodes = kwok::delete_nodes(&client, &nodes).await;
    manager.stop().await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    gone.expect("delete the CloneSet");
    for d in deleted_pods {
        d.expect("delete the Pods");
    }
    deleted_nodes.expect("delete the Nodes");
}

async fn body(client: Client, run: String, fakes: Vec<FakeNode>) {
    kwok::create_nodes(&client, &fakes)
        .await
        .expect("create Nodes");
    let zone_of: BTreeMap<String, String> = fakes
        .iter()
        .map(|n| (n.name.clone(), n.labels[ZONE].clone()))
        .collect();
    burst(&client, &run, &zone_of).await;
    cloneset_scale_down(&client, &run).await;
    adaptive_leaves_a_full_zone(&client, &run, &zone_of).await;
}

/// 30 Pods of a ReplicaSet created at once; see the module docs.
async fn burst(client: &Client, run: &str, zone_of: &BTreeMap<String, String>) {
    let name = format!("{run}-rs");
    create_seen(
        client,
        NS,
        &name,
        json!({
            "targetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name},
            "subsets": zone_subsets([Some(8), Some(12), None]),
        }),
    )
    .await
    .expect("create the WorkloadSpread");
    let hash = "b1";
    let labels = json!({"app": name, keys::POD_TEMPLATE_HASH_LABEL: hash});
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": BURST, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": on_run_nodes(run)}}
    }))
    .expect("replicaset");
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create the ReplicaSet");
    let owner = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name,
        "uid": rs.uid().unwrap_or_default(), "controller": true}]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    // All at once, each retried as a ReplicaSet controller would if the webhook refused it
    // (a reservation that lost every conflict retry).
    let creates = (0..BURST).map(|i| {
        let pods = pods.clone();
        let pod: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{name}-{i:02}"), "labels": labels,
                         "ownerReferences": owner},
            "spec": on_run_nodes(run)
        }))
        .expect("pod");
        async move {
            let mut refused = 0;
            loop {
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(_) => return refused,
                    Err(e) if refused < 10 => {
                        refused += 1;
                        eprintln!("create {}: {e}; again", pod.name_any());
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => panic!("create {}: {e}", pod.name_any()),
                }
            }
        }
    });
    let refused: usize = futures::future::join_all(creates).await.into_iter().sum();
    eprintln!("{BURST} Pods created at once; {refused} creates refused and retried");

    let all = wait_for("the burst's Pods running", WAIT, || async {
        let list = cs::pods(&pods, &name).await?;
        let placed = list
            .iter()
            .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some());
        Ok((list.len() == BURST && placed && list.iter().all(pod_ready)).then_some(list))
    })
    .await
    .expect("running");
    assert_eq!(
        per_subset(&all),
        counts(&[("z0", 8), ("z1", 12), ("z2", 10)]),
        "the caps hold under the burst"
    );
    in_their_zones(&all, zone_of);
    let spreads = wsapi::api(client, NS);
    wait_for("the status and the deletion costs", WAIT, || async {
        let st = spreads.get(&name).await?.status.unwrap_or_default();
        let got: Vec<(i32, i32)> = st
            .subset_statuses
            .iter()
            .map(|s| (s.replicas, s.missing_replicas))
            .collect();
        let list = cs::pods(&pods, &name).await?;
        let costs_ok = list.iter().all(|p| {
            let want = match subset_of(p).as_deref() {
                Some("z0") => "300",
                Some("z1") => "200",
                _ => "100",
            };
            p.annotations()
                .get(k8s::POD_DELETION_COST_ANNOTATION)
                .map(String::as_str)
                == Some(want)
        });
        let versioned = st.versioned(hash).len() == ZONES;
        Ok((got == [(8, 0), (12, 0), (10, -1)] && costs_ok && versioned).then_some(()))
    })
    .await
    .expect("status and costs");
}

/// A CloneSet of 12 spread 4 + 4 + 4, scaled down to 6; see the module docs.
async fn cloneset_scale_down(client: &Client, run: &str) {
    let name = format!("{run}-cs");
    create_seen(
        client,
        NS,
        &name,
        json!({
            "targetRef": {"apiVersion": keys::APPS_V1BETA1, "kind": "CloneSet", "name": name},
            "subsets": zone_subsets([Some(4), Some(4), None]),
        }),
    )
    .await
    .expect("create the CloneSet's WorkloadSpread");
    let mut set = cs::new(&name, 12, "v1", json!({})).expect("cloneset");
    set.data["spec"]["template"]["spec"] = on_run_nodes(run);
    let sets = cs::api(client, NS);
    sets.create(&PostParams::default(), &set)
        .await
        .expect("create the CloneSet");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    // Ready with their costs, and seen Ready by the CloneSet (it deletes a not-ready Pod
    // before it looks at costs, as upstream).
    let all = wait_for("12 Ready Pods with their costs", WAIT, || async {
        let list = cs::pods(&pods, &name).await?;
        let ok = list.len() == 12
            && list.iter().all(|p| {
                pod_ready(p)
                    && p.annotations()
                        .contains_key(k8s::POD_DELETION_COST_ANNOTATION)
            });
        Ok(ok.then_some(list))
    })
    .await
    .expect("spread");
    assert_eq!(per_subset(&all), counts(&[("z0", 4), ("z1", 4), ("z2", 4)]));
    cs::wait_rolled_out(&sets, &name, 12, WAIT)
        .await
        .expect("12 Ready in the CloneSet's status");
    cs::patch_spec(&sets, &name, json!({"replicas": 6}))
        .await
        .expect("scale down");
    let left = wait_for("six Pods left", WAIT, || async {
        let list = cs::pods(&pods, &name).await?;
        Ok((list.len() == 6).then_some(list))
    })
    .await
    .expect("scaled");
    assert_eq!(
        per_subset(&left),
        counts(&[("z0", 4), ("z1", 2)]),
        "z2 goes first, then z1"
    );
}

/// Adaptive moves the Pods a full zone cannot place; see the module docs.
async fn adaptive_leaves_a_full_zone(
    client: &Client,
    run: &str,
    zone_of: &BTreeMap<String, String>,
) {
    let name = format!("{run}-ad");
    create_seen(
        client,
        NS,
        &name,
        json!({
            "targetRef": {"apiVersion": keys::APPS_V1BETA1, "kind": "CloneSet", "name": name},
            "subsets": zone_subsets([Some(10), Some(5), None]),
            "scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 5}},
        }),
    )
    .await
    .expect("create the Adaptive WorkloadSpread");
    let mut set = cs::new(&name, 17, "v1", json!({})).expect("cloneset");
    let mut spec = on_run_nodes(run);
    // One Pod a Node: the scheduler finds a zone's Nodes full once each holds one.
    spec["containers"][0]["ports"] = json!([{"containerPort": 8080, "hostPort": 18080}]);
    set.data["spec"]["template"]["spec"] = spec;
    let sets = cs::api(client, NS);
    sets.create(&PostParams::default(), &set)
        .await
        .expect("create the CloneSet");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let all = wait_for("17 Pods running, 7 + 5 + 5", WAIT, || async {
        let list = cs::pods(&pods, &name).await?;
        let ok = list.len() == 17
            && list.iter().all(pod_ready)
            && per_subset(&list) == counts(&[("z0", 7), ("z1", 5), ("z2", 5)]);
        Ok(ok.then_some(list))
    })
    .await
    .unwrap_or_else(|e| panic!("rescheduled: {e}"));
    in_their_zones(&all, zone_of);
    let spreads = wsapi::api(client, NS);
    wait_for("z0 closed, the last subset open", WAIT, || async {
        let st = spreads.get(&name).await?.status.unwrap_or_default();
        let got: Vec<(i32, bool)> = st
            .subset_statuses
            .iter()
            .map(|s| (s.replicas, s.unschedulable()))
            .collect();
        Ok((got == [(7, true), (5, false), (5, false)]).then_some(()))
    })
    .await
    .expect("status");
}
