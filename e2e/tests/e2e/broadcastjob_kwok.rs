//! BroadcastJob across many nodes, on the kwok scale cluster (`hack/scale-cluster.sh`): kwok
//! plays the kubelet of the Nodes each test creates (20 at most), the test plays it where a Pod
//! must end (its status set to Succeeded). One Pod per eligible node under selectors, taints,
//! tolerations and cordoned nodes; parallelism caps the Pods in flight; a node added mid-job
//! gets its Pod and a node that stops fitting loses it.
//!
//! Each test starts a kruise-manager of this tree against the scale cluster, and deletes the
//! job, its Pods and its Nodes again (the scale cluster has no garbage collector). Not part of
//! the local cluster's suite: the `kwok` stage runs it under `flock /tmp/kruise-scale.lock`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::keys;
use kruise_e2e::broadcastjob::{self, phase, status_i64};
use kruise_e2e::kwok::{self, FakeNode, Manager};
use kruise_e2e::wait_for;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use rand::Rng;
use serde_json::{Value, json};

/// One manager on the cluster at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The namespace every test of this file uses (see `kruise_e2e::kwok`: never deleted).
const NS: &str = "e2e-bcj-kwok";
const RUN_LABEL: &str = "kruise-rs.e2e/bcj-run";
/// Generous: on a loaded machine kwok, the scheduler and a debug manager share two cores.
const WAIT: Duration = Duration::from_secs(120);

#[derive(Clone)]
struct Run {
    client: Client,
    prefix: String,
    nodes: Arc<Mutex<Vec<String>>>,
}

impl Run {
    fn jobs(&self) -> Api<kube::api::DynamicObject> {
        broadcastjob::api(&self.client, NS)
    }
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NS)
    }
    fn node(&self, i: usize) -> String {
        format!("{}-{i:02}", self.prefix)
    }
    fn fake(&self, i: usize) -> FakeNode {
        FakeNode::new(self.node(i)).label(RUN_LABEL, &self.prefix)
    }
    async fn create_nodes(&self, nodes: &[FakeNode]) {
        if let Ok(mut v) = self.nodes.lock() {
            v.extend(nodes.iter().map(|n| n.name.clone()));
        }
        kwok::create_nodes(&self.client, nodes)
            .await
            .expect("create Nodes");
    }
    /// The job's Pods not being deleted, by node.
    async fn pods_by_node(&self) -> BTreeMap<String, Vec<Pod>> {
        let mut out: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
        for p in broadcastjob::pods(&self.pods(), &self.prefix)
            .await
            .expect("pods")
        {
            if p.metadata.deletion_timestamp.is_none() {
                out.entry(kruise_e2e::daemonset::pod_node(&p))
                    .or_default()
                    .push(p);
            }
        }
        out
    }
    /// Creates the run's job (named like the run) selecting the run's Nodes plus `selector`.
    async fn create_job(&self, spec: Value, selector: Value, tolerations: Value) {
        let mut sel = json!({ RUN_LABEL: self.prefix });
        if let (Some(s), Some(extra)) = (sel.as_object_mut(), selector.as_object()) {
            s.extend(extra.clone());
        }
        let mut job = broadcastjob::new(&self.prefix, "true", "Never", spec).expect("job");
        let pod_spec = &mut job.data["spec"]["template"]["spec"];
        pod_spec["nodeSelector"] = sel;
        pod_spec["tolerations"] = tolerations;
        self.jobs()
            .create(&PostParams::default(), &job)
            .await
            .expect("create BroadcastJob");
    }
    /// Waits until the job's status satisfies `check`; returns the job then.
    async fn wait_status(
        &self,
        what: &str,
        check: impl Fn(&kube::api::DynamicObject) -> bool,
    ) -> kube::api::DynamicObject {
        let check = &check;
        wait_for(
            &format!("BroadcastJob status: {what}"),
            WAIT,
            || async move {
                let job = self.jobs().get(&self.prefix).await?;
                Ok(check(&job).then_some(job))
            },
        )
        .await
        .expect(what)
    }
    /// Plays the kubelet: the Pod ran to completion.
    async fn succeed(&self, pod: &Pod) {
        self.pods()
            .patch_status(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&json!({"status": {"phase": "Succeeded"}})),
            )
            .await
            .expect("Pod Succeeded");
    }
}

/// Runs `body` with a manager and a fresh run; whatever the body does, deletes the job, its
/// Pods and the run's Nodes and stops the manager.
async fn with_run<F, Fut>(test: &str, body: F)
where
    F: FnOnce(Run) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let _serial = SERIAL.lock().await;
    let client = kwok::client().await.expect("the kwok scale cluster");
    kwok::namespace(&client, NS).await.expect("namespace");
    let manager = Manager::start(test).await.expect("kruise-manager");
    let suffix: u32 = rand::rng().random_range(0..0xff_ffff);
    let run = Run {
        client,
        prefix: format!("{test}-{suffix:06x}"),
        nodes: Arc::default(),
    };
    let outcome = tokio::spawn(body(run.clone())).await;
    let jobs = run.jobs();
    let _ = jobs.delete(&run.prefix, &DeleteParams::default()).await;
    let gone = wait_for("the job deleted", WAIT, || async {
        Ok(jobs.get_opt(&run.prefix).await?.is_none().then_some(()))
    })
    .await;
    let pods = kwok::delete_pods(
        &run.pods(),
        &format!("{}={}", keys::BROADCASTJOB_NAME_LABEL, run.prefix),
    )
    .await;
    let names = run.nodes.lock().map(|v| v.clone()).unwrap_or_default();
    let nodes = kwok::delete_nodes(&run.client, &names).await;
    manager.stop().await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    gone.expect("delete the job");
    pods.expect("delete the Pods");
    nodes.expect("delete the Nodes");
}

async fn cordon(client: &Client, node: &str) {
    Api::<Node>::all(client.clone())
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("cordon");
}

#[tokio::test]
async fn one_pod_per_eligible_node_under_selectors_taints_and_cordons() {
    with_run("bcj-place", |run| async move {
        // 20 Nodes: every 5th from 1 tainted against the job, from 2 in another pool, 3 and 8
        // cordoned, 4 and 9 tainted with a taint the job tolerates.
        let mut fakes = Vec::new();
        for i in 0..20 {
            let mut n = run
                .fake(i)
                .label("pool", if i % 5 == 2 { "b" } else { "a" });
            if i % 5 == 1 {
                n = n.taint("dedicated", "db", "NoSchedule");
            }
            if i == 4 || i == 9 {
                n = n.taint("warmup", "yes", "NoSchedule");
            }
            fakes.push(n);
        }
        run.create_nodes(&fakes).await;
        for i in [3, 8] {
            cordon(&run.client, &run.node(i)).await;
        }
        let eligible: BTreeSet<String> = (0..20)
            .filter(|i| i % 5 != 1 && i % 5 != 2 && *i != 3 && *i != 8)
            .map(|i| run.node(i))
            .collect();
        run.create_job(
            json!({"completionPolicy": {"type": "Never"}}),
            json!({"pool": "a"}),
            json!([{"key": "warmup", "operator": "Exists", "effect": "NoSchedule"}]),
        )
        .await;
        let placed = wait_for("a Pod on every eligible node", WAIT, || {
            let run = run.clone();
            let eligible = eligible.clone();
            async move {
                let by_node = run.pods_by_node().await;
                let on: BTreeSet<String> = by_node.keys().cloned().collect();
                Ok((on == eligible).then_some(by_node))
            }
        })
        .await
        .expect("placement");
        assert!(placed.values().all(|p| p.len() == 1), "one Pod per node");
        let n = i64::try_from(eligible.len()).expect("n");
        let job = run
            .wait_status("desired and active", |j| {
                status_i64(j, "desired") == n && status_i64(j, "active") == n
            })
            .await;
        assert_eq!(phase(&job), "running");
        // Nothing more comes: the other Nodes stay without a Pod.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let later = run.pods_by_node().await;
        assert_eq!(later.keys().cloned().collect::<BTreeSet<_>>(), eligible);
        assert!(later.values().all(|p| p.len() == 1));
    })
    .await;
}

/// Parallelism 3 over 10 Nodes: never more than 3 Pods in flight, and 3 in flight whenever 3
/// remain. The test plays the kubelet and finishes no Pod until the controller has put as many in
/// flight as parallelism allows (3, then the 1 left), so a controller that starts fewer stalls the
/// rounds and fails the test, and one that starts more fails at once.
#[tokio::test]
async fn parallelism_caps_pods_in_flight() {
    with_run("bcj-par", |run| async move {
        let fakes: Vec<FakeNode> = (0..10).map(|i| run.fake(i)).collect();
        run.create_nodes(&fakes).await;
        run.create_job(json!({"parallelism": 3}), json!({}), json!([]))
            .await;
        // How many Pods were in flight each time the test let them finish.
        let mut rounds: Vec<usize> = Vec::new();
        let deadline = std::time::Instant::now() + WAIT;
        let job = loop {
            let pods = broadcastjob::pods(&run.pods(), &run.prefix)
                .await
                .expect("pods");
            let done = pods
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
                .count();
            let live: Vec<&Pod> = pods
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Succeeded"))
                .collect();
            assert!(
                live.len() <= 3,
                "{} Pods in flight with parallelism 3 (rounds so far {rounds:?})",
                live.len()
            );
            let full = 3.min(10usize.saturating_sub(done));
            let placed = live
                .iter()
                .all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some());
            if full > 0 && live.len() == full && placed {
                rounds.push(live.len());
                for p in &live {
                    run.succeed(p).await;
                }
            }
            let job = run.jobs().get(&run.prefix).await.expect("job");
            if phase(&job) == "completed" {
                break job;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "not completed within {WAIT:?}: {} in flight, {done} done, waiting for {full} in \
                 flight (parallelism 3 not reached?); rounds {rounds:?}; status {:?}",
                live.len(),
                job.data["status"]
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        assert_eq!(
            rounds,
            [3, 3, 3, 1],
            "Pods in flight at each round: parallelism 3 reached while 3 remained"
        );
        assert_eq!(
            status_i64(&job, "succeeded"),
            10,
            "{:?}",
            job.data["status"]
        );
        assert_eq!(status_i64(&job, "desired"), 10);
        let by_node = run.pods_by_node().await;
        assert_eq!(by_node.len(), 10);
        assert!(by_node.values().all(|p| p.len() == 1));
    })
    .await;
}

#[tokio::test]
async fn a_node_added_mid_job_gets_its_pod_and_one_that_stops_fitting_loses_it() {
    with_run("bcj-grow", |run| async move {
        let fakes: Vec<FakeNode> = (0..5).map(|i| run.fake(i)).collect();
        run.create_nodes(&fakes).await;
        run.create_job(
            json!({"completionPolicy": {"type": "Never"}, "failurePolicy": {"type": "Continue"}}),
            json!({}),
            json!([]),
        )
        .await;
        let want = |n: usize| -> BTreeSet<String> { (0..n).map(|i| run.node(i)).collect() };
        let first = want(5);
        wait_for("a Pod on each of 5 Nodes", WAIT, || {
            let (run, first) = (run.clone(), first.clone());
            async move {
                let on: BTreeSet<String> = run.pods_by_node().await.keys().cloned().collect();
                Ok((on == first).then_some(()))
            }
        })
        .await
        .expect("5 Pods");
        run.create_nodes(&[run.fake(5)]).await;
        let six = want(6);
        wait_for("a Pod on the new Node", WAIT, || {
            let (run, six) = (run.clone(), six.clone());
            async move {
                let on: BTreeSet<String> = run.pods_by_node().await.keys().cloned().collect();
                Ok((on == six).then_some(()))
            }
        })
        .await
        .expect("the new Node's Pod");
        run.wait_status("desired 6", |j| status_i64(j, "desired") == 6)
            .await;
        // A NoExecute taint on Node 0: its Pod goes, and the job no longer wants it.
        Api::<Node>::all(run.client.clone())
            .patch(
                &run.node(0),
                &PatchParams::default(),
                &Patch::Merge(
                    &json!({"spec": {"taints": [{"key": "drain", "effect": "NoExecute"}]}}),
                ),
            )
            .await
            .expect("taint");
        let rest: BTreeSet<String> = (1..6).map(|i| run.node(i)).collect();
        wait_for("the tainted Node's Pod deleted", WAIT, || {
            let (run, rest) = (run.clone(), rest.clone());
            async move {
                let on: BTreeSet<String> = run.pods_by_node().await.keys().cloned().collect();
                let job = run.jobs().get(&run.prefix).await?;
                Ok((on == rest && status_i64(&job, "desired") == 5).then_some(()))
            }
        })
        .await
        .expect("Pod of the tainted Node");
        let notes = broadcastjob::wait_event(
            &run.client,
            NS,
            &run.prefix,
            keys::REASON_SUCCESSFUL_DELETE,
            WAIT,
        )
        .await
        .expect("SuccessfulDelete Event");
        assert_eq!(notes.len(), 1, "{notes:?}");
    })
    .await;
}
