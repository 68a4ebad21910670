//! CloneSet Events at scale, on the kwok scale cluster (`hack/scale-cluster.sh`): a CloneSet of
//! 40 Pods creates them all, and its Normal Events (`RevisionCreated`, then a
//! `SuccessfulCreate` about each Pod) stop at 25, as upstream's recorder lets 25 Events of one
//! type about one object through and drops the rest (client-go's spam filter). A rollout of thousands of Pods thus costs the API server
//! a few dozen Event writes, not one or two per Pod.
//!
//! Starts a kruise-manager of this tree against the scale cluster and stops it, and deletes
//! what it created (the scale cluster has no garbage collector). Run by the `kwok` stage of
//! `hack/test.sh` under `flock /tmp/kruise-scale.lock`.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kruise_e2e::cloneset as cs;
use kruise_e2e::kwok::{self, FakeNode, Manager};
use kruise_e2e::wait_for;
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::json;

/// The namespace of this file's test (see `kruise_e2e::kwok`: never deleted).
const NS: &str = "e2e-cs-kwok";
const RUN_LABEL: &str = "kruise-rs.e2e/cs-run";
const NODES: usize = 4;
const PODS: usize = 40;
/// Generous: on a loaded machine kwok, the scheduler and a debug manager share two cores.
const WAIT: Duration = Duration::from_secs(180);

#[tokio::test]
async fn forty_creates_write_twenty_five_events_about_the_cloneset() {
    let client = kwok::client().await.expect("the kwok scale cluster");
    kwok::namespace(&client, NS).await.expect("namespace");
    let manager = Manager::start("cs-events").await.expect("kruise-manager");
    let (run, fakes) = kwok::run_nodes("cs", RUN_LABEL, NODES);
    let nodes: Vec<String> = fakes.iter().map(|f| f.name.clone()).collect();
    let outcome = tokio::spawn(body(client.clone(), run.clone(), fakes)).await;
    // The CloneSet first (else it recreates its Pods), then Pods, then the Nodes.
    let (gone, pods) =
        kwok::delete_workload_and_pods(&client, &cs::api(&client, NS), NS, &run, WAIT).await;
    let deleted_nodes = kwok::delete_nodes(&client, &nodes).await;
    manager.stop().await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    gone.expect("delete the CloneSet");
    pods.expect("delete the Pods");
    deleted_nodes.expect("delete the Nodes");
}

async fn body(client: Client, run: String, fakes: Vec<FakeNode>) {
    kwok::create_nodes(&client, &fakes)
        .await
        .expect("create Nodes");
    let mut set = cs::new(&run, PODS as i32, "v1", json!({})).expect("cloneset");
    set.data["spec"]["template"]["spec"] = json!({
        "nodeSelector": {RUN_LABEL: run},
        "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "app", "image": kruise_e2e::image("testapp", "v1")}]
    });
    let sets = cs::api(&client, NS);
    sets.create(&PostParams::default(), &set)
        .await
        .expect("create the CloneSet");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    cs::wait_rolled_out(&sets, &run, PODS as i64, WAIT)
        .await
        .expect("40 Ready in the CloneSet's status");
    assert_eq!(cs::pods(&pods, &run).await.expect("pods").len(), PODS);

    // Every create has been published or dropped once the status counts the Pods; the writes
    // run in the background, so give the last ones a moment to land before counting. The
    // budget is per object and type: the revision's Normal Event takes one of the 25.
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let normal = || async {
        let list = events.list(&Default::default()).await?.items;
        let about: Vec<Event> = list
            .into_iter()
            .filter(|e| {
                e.type_.as_deref() == Some("Normal")
                    && e.regarding.as_ref().is_some_and(|r| {
                        r.kind.as_deref() == Some("CloneSet") && r.name.as_deref() == Some(&run)
                    })
            })
            .collect();
        Ok::<_, kube::Error>(about)
    };
    wait_for("25 Normal Events about the CloneSet", WAIT, || async {
        Ok((normal().await?.len() >= 25).then_some(()))
    })
    .await
    .expect("the first 25 Events");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let written = normal().await.expect("list Events");
    assert_eq!(
        written.len(),
        25,
        "25 Normal Events written of the 41 published"
    );
    let creates: Vec<&Event> = written
        .iter()
        .filter(|e| e.reason.as_deref() == Some("SuccessfulCreate"))
        .collect();
    let about_pods: BTreeSet<String> = creates
        .iter()
        .filter_map(|e| e.related.as_ref()?.name.clone())
        .collect();
    assert!(creates.len() >= 20, "{} SuccessfulCreate", creates.len());
    assert_eq!(about_pods.len(), creates.len(), "each about its own Pod");
}
