//! Advanced DaemonSet across many nodes, on the kwok scale cluster (`hack/scale-cluster.sh`):
//! kwok plays the kubelet of Nodes each test creates, so placement (node selector, taints) and the
//! rolling update's limits (partition, `rollingUpdate.selector`, maxUnavailable, maxSurge) are
//! seen over 20 nodes. The real kubelet's in-place restart is `daemonset.rs`'s.
//!
//! Each test starts a kruise-manager of this tree against the scale cluster and stops it, and
//! deletes the DaemonSet, its Pods and its Nodes again (the scale cluster has no garbage
//! collector). Not part of the local cluster's suite: the `kwok` stage of `hack/test.sh` runs it
//! against the scale cluster under `flock /tmp/kruise-scale.lock`. The tests run one at a time
//! (one manager).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_e2e::daemonset::{self, patch_spec, pod_node, set_image, status_i64, wait_status};
use kruise_e2e::kwok::{self, FakeNode, Manager};
use kruise_e2e::{container_status, pod_ready};
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use rand::Rng;
use serde_json::{Value, json};

/// One manager on the cluster at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The namespace every test of this file uses (see `kruise_e2e::kwok`: never deleted).
const NS: &str = "e2e-ads-kwok";
const RUN_LABEL: &str = "kruise-rs.e2e/ads-run";
/// Generous: on a loaded machine kwok, the scheduler and a debug manager share two cores.
const WAIT: Duration = Duration::from_secs(180);
const V1: &str = "registry.example/agent:v1";
const V2: &str = "registry.example/agent:v2";

/// A test's cluster objects: its Nodes (named `<prefix>-NN`), its DaemonSet and Pods.
#[derive(Clone)]
struct Run {
    client: Client,
    prefix: String,
    name: String,
    nodes: Arc<Mutex<Vec<String>>>,
    /// More DaemonSets of the run (deleted with their Pods like `name`).
    others: Arc<Mutex<Vec<String>>>,
    /// ValidatingAdmissionPolicies (and their bindings, of the same name) of the run.
    policies: Arc<Mutex<Vec<String>>>,
}

impl Run {
    fn ds(&self) -> Api<DynamicObject> {
        daemonset::api(&self.client, NS)
    }
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NS)
    }
    fn node(&self, i: usize) -> String {
        format!("{}-{i:02}", self.prefix)
    }
    /// A fake Node `i` carrying the run's label.
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
    /// The DaemonSet's live Pods by node.
    async fn pods_by_node(&self) -> BTreeMap<String, Vec<Pod>> {
        let mut out: BTreeMap<String, Vec<Pod>> = BTreeMap::new();
        for p in daemonset::pods(&self.pods(), &self.name)
            .await
            .expect("pods")
        {
            out.entry(pod_node(&p)).or_default().push(p);
        }
        out
    }
}

/// Runs `body` with a manager and a fresh run; whatever the body does (a failed assertion
/// included), deletes the DaemonSet, its Pods and the run's Nodes and stops the manager.
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
        name: format!("{test}-{suffix:06x}"),
        nodes: Arc::default(),
        others: Arc::default(),
        policies: Arc::default(),
    };
    let outcome = tokio::spawn(body(run.clone())).await;
    for p in run.policies.lock().map(|v| v.clone()).unwrap_or_default() {
        delete_policy(&run.client, &p).await;
    }
    // The DaemonSets first (else they recreate their Pods), then Pods, then the Nodes.
    let mut names = vec![run.name.clone()];
    names.extend(run.others.lock().map(|v| v.clone()).unwrap_or_default());
    let ds = run.ds();
    let (mut gone, mut pods) = (Ok(()), Ok(()));
    for name in &names {
        let _ = ds.delete(name, &DeleteParams::default()).await;
        let g = kruise_e2e::wait_for("the DaemonSet deleted", WAIT, || async {
            Ok(ds.get_opt(name).await?.is_none().then_some(()))
        })
        .await;
        let p = kwok::delete_pods(&run.pods(), &format!("app={name}")).await;
        gone = gone.and(g);
        pods = pods.and(p);
    }
    let names = run.nodes.lock().map(|v| v.clone()).unwrap_or_default();
    let nodes = kwok::delete_nodes(&run.client, &names).await;
    manager.stop().await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    gone.expect("delete the DaemonSet");
    pods.expect("delete the Pods");
    nodes.expect("delete the Nodes");
}

/// A DaemonSet on the run's Nodes that match `node_selector` as well.
async fn create_ds(run: &Run, strategy: Value, node_selector: Value) {
    let mut sel = json!({ RUN_LABEL: run.prefix });
    if let (Some(s), Some(extra)) = (sel.as_object_mut(), node_selector.as_object()) {
        s.extend(extra.clone());
    }
    let ds =
        daemonset::new(&run.name, V1, strategy, json!({ "nodeSelector": sel })).expect("DaemonSet");
    run.ds()
        .create(&PostParams::default(), &ds)
        .await
        .expect("create DaemonSet");
}

fn policy_api(client: &Client, plural: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(
        client.clone(),
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// A ValidatingAdmissionPolicy (and its binding) refusing to create Pods labelled `label` in
/// the test namespace, with `message`: how an API server refuses a DaemonSet's Pods (a quota,
/// a policy engine) without a webhook of the test's own.
async fn refuse_pods(run: &Run, name: &str, label: &str, message: &str) {
    if let Ok(mut v) = run.policies.lock() {
        v.push(name.to_owned());
    }
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["pods"]}]},
            "validations": [{
                "expression": format!("!has(object.metadata.labels) || !('{label}' in object.metadata.labels)"),
                "message": message,
            }]
        }
    }))
    .expect("policy");
    let binding: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {kruise_e2e::E2E_LABEL: NS}}}
        }
    }))
    .expect("binding");
    let pp = PostParams::default();
    policy_api(
        &run.client,
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
    )
    .create(&pp, &policy)
    .await
    .expect("create policy");
    policy_api(
        &run.client,
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
    )
    .create(&pp, &binding)
    .await
    .expect("create binding");
}

async fn delete_policy(client: &Client, name: &str) {
    let dp = DeleteParams::default();
    let _ = policy_api(
        client,
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
    )
    .delete(name, &dp)
    .await;
    let _ = policy_api(
        client,
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
    )
    .delete(name, &dp)
    .await;
}

/// The DaemonSet's condition `type_`, if any.
fn condition<'a>(ds: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    ds.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Waits until `n` nodes each run one Ready Pod and the status says so.
async fn wait_placed(run: &Run, n: i64) -> DynamicObject {
    let ds = wait_status(
        &run.ds(),
        &run.name,
        &format!("{n} Pods scheduled and ready"),
        WAIT,
        |d| {
            status_i64(d, "desiredNumberScheduled") == n
                && status_i64(d, "currentNumberScheduled") == n
                && status_i64(d, "numberReady") == n
                && status_i64(d, "numberMisscheduled") == 0
        },
    )
    .await
    .expect("placement");
    // The status may run ahead of the list a moment: wait for the Pods themselves.
    kruise_e2e::wait_for(&format!("{n} live Pods"), WAIT, || async {
        let by_node = run.pods_by_node().await;
        let count: usize = by_node.values().map(Vec::len).sum();
        Ok((count == usize::try_from(n).unwrap_or(0)).then_some(()))
    })
    .await
    .expect("Pods");
    ds
}

fn nodes_of(by_node: &BTreeMap<String, Vec<Pod>>) -> BTreeSet<String> {
    by_node.keys().cloned().collect()
}

#[tokio::test]
async fn a_pod_per_matching_node_follows_labels_new_nodes_and_taints() {
    with_run("ads-place", |run| async move {
        // 20 Nodes: 0..=17 match `agent=yes`, 18 and 19 do not; 17 is tainted NoSchedule and
        // the DaemonSet does not tolerate it.
        let nodes: Vec<FakeNode> = (0..20)
            .map(|i| {
                let n = run
                    .fake(i)
                    .label("agent", if i < 18 { "yes" } else { "no" });
                if i == 17 {
                    n.taint("dedicated", "infra", "NoSchedule")
                } else {
                    n
                }
            })
            .collect();
        run.create_nodes(&nodes).await;
        create_ds(
            &run,
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
            json!({"agent": "yes"}),
        )
        .await;
        wait_placed(&run, 17).await;
        let by_node = run.pods_by_node().await;
        let want: BTreeSet<String> = (0..17).map(|i| run.node(i)).collect();
        assert_eq!(nodes_of(&by_node), want, "one Pod on each matching node");
        for (node, pods) in &by_node {
            assert_eq!(pods.len(), 1, "one Pod on {node}");
            let p = &pods[0];
            // Bound by node affinity, scheduled there, and running (kwok's kubelet).
            assert_eq!(
                p.spec.as_ref().and_then(|s| s.node_name.as_deref()),
                Some(node.as_str()),
                "{}",
                p.name_any()
            );
            assert_eq!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Running")
            );
            assert!(pod_ready(p), "{} Ready", p.name_any());
        }

        // Node 3 labelled out: its Pod goes, the others stay.
        let node_api: Api<Node> = Api::all(run.client.clone());
        let before: BTreeMap<String, String> = by_node
            .iter()
            .map(|(n, p)| (n.clone(), p[0].uid().unwrap_or_default()))
            .collect();
        node_api
            .patch(
                &run.node(3),
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"labels": {"agent": "no"}}})),
            )
            .await
            .expect("label node out");
        wait_placed(&run, 16).await;
        let by_node = run.pods_by_node().await;
        assert!(!by_node.contains_key(&run.node(3)), "{by_node:?}");
        for (n, p) in &by_node {
            assert_eq!(
                before.get(n),
                p[0].uid().as_ref(),
                "the Pod on {n} was kept"
            );
        }

        // A new matching Node gets a Pod.
        run.create_nodes(&[run.fake(20).label("agent", "yes")])
            .await;
        wait_placed(&run, 17).await;
        let by_node = run.pods_by_node().await;
        assert!(by_node.contains_key(&run.node(20)), "{by_node:?}");

        // The taint was what kept node 17 empty: without it, it gets its Pod.
        node_api
            .patch(
                &run.node(17),
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"taints": null}})),
            )
            .await
            .expect("untaint");
        wait_placed(&run, 18).await;
        let by_node = run.pods_by_node().await;
        let mut want: BTreeSet<String> = (0..18).filter(|i| *i != 3).map(|i| run.node(i)).collect();
        want.insert(run.node(20));
        assert_eq!(nodes_of(&by_node), want);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// What a watch on the Pods saw, replayed.

#[derive(Clone, Debug)]
struct Seen {
    name: String,
    uid: String,
    node: String,
    image: String,
    ready: bool,
    deleting: bool,
    gone: bool,
}

#[derive(Clone, Debug)]
enum Step {
    Pod(Seen),
    /// The watch's initial list is complete: what follows are changes.
    Synced,
}

struct Recorder {
    steps: Arc<Mutex<Vec<Step>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    async fn start(run: &Run) -> Self {
        let steps: Arc<Mutex<Vec<Step>>> = Arc::default();
        let sink = steps.clone();
        let cfg = watcher::Config::default().labels(&format!("app={}", run.name));
        let api = run.pods();
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, cfg).boxed();
            while let Some(ev) = stream.next().await {
                let step = match ev {
                    Ok(Event::Apply(p) | Event::InitApply(p)) => Step::Pod(seen(&p, false)),
                    Ok(Event::Delete(p)) => Step::Pod(seen(&p, true)),
                    Ok(Event::InitDone) => Step::Synced,
                    _ => continue,
                };
                if let Ok(mut v) = sink.lock() {
                    v.push(step);
                }
            }
        });
        let r = Self { steps, task };
        kruise_e2e::wait_for("the Pod watch synced", WAIT, || async {
            Ok(r.steps()
                .iter()
                .any(|s| matches!(s, Step::Synced))
                .then_some(()))
        })
        .await
        .expect("watch");
        r
    }

    fn steps(&self) -> Vec<Step> {
        self.steps.lock().map(|v| v.clone()).unwrap_or_default()
    }

    fn stop(self) -> Vec<Step> {
        self.task.abort();
        self.steps()
    }
}

fn seen(p: &Pod, gone: bool) -> Seen {
    Seen {
        name: p.name_any(),
        uid: p.uid().unwrap_or_default(),
        node: pod_node(p),
        image: p
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .and_then(|c| c.image.clone())
            .unwrap_or_default(),
        ready: pod_ready(p),
        deleting: p.metadata.deletion_timestamp.is_some(),
        gone,
    }
}

/// The Pods as they stood after each change (from the end of the initial list on).
fn replay(steps: &[Step]) -> Vec<(Seen, BTreeMap<String, Seen>)> {
    let mut state: BTreeMap<String, Seen> = BTreeMap::new();
    let mut synced = false;
    let mut out = Vec::new();
    for step in steps {
        match step {
            Step::Synced => synced = true,
            Step::Pod(s) => {
                if s.gone {
                    state.remove(&s.name);
                } else {
                    state.insert(s.name.clone(), s.clone());
                }
                if synced {
                    out.push((s.clone(), state.clone()));
                }
            }
        }
    }
    out
}

/// How many of `nodes` have no Ready Pod that is not being deleted.
fn unavailable(state: &BTreeMap<String, Seen>, nodes: &BTreeSet<String>) -> usize {
    nodes
        .iter()
        .filter(|n| {
            !state
                .values()
                .any(|s| &s.node == *n && s.ready && !s.deleting)
        })
        .count()
}

/// Nodes whose Pods have image `image`.
fn nodes_with(by_node: &BTreeMap<String, Vec<Pod>>, image: &str) -> BTreeSet<String> {
    by_node
        .iter()
        .filter(|(_, pods)| pods.iter().all(|p| seen(p, false).image == image))
        .map(|(n, _)| n.clone())
        .collect()
}

/// Waits until `updated` Pods run the new revision and all `total` are available, then checks
/// that the count stays there (the limit holds, not only the first look).
async fn wait_updated(run: &Run, updated: i64, total: i64) -> BTreeMap<String, Vec<Pod>> {
    let check = |d: &DynamicObject| {
        status_i64(d, "updatedNumberScheduled") == updated
            && status_i64(d, "numberAvailable") == total
            && status_i64(d, "currentNumberScheduled") == total
    };
    wait_status(
        &run.ds(),
        &run.name,
        &format!("{updated} of {total} updated"),
        WAIT,
        check,
    )
    .await
    .expect("update");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let d = run.ds().get(&run.name).await.expect("get");
    assert!(
        check(&d),
        "the update went past {updated}: {}",
        d.data["status"]
    );
    run.pods_by_node().await
}

#[tokio::test]
async fn partition_and_selector_limit_the_update_and_max_unavailable_holds() {
    with_run("ads-part", |run| async move {
        // zone=a on nodes 0, 1 and 10; the rest zone=b.
        let nodes: Vec<FakeNode> = (0..20)
            .map(|i| {
                run.fake(i)
                    .label("zone", if [0, 1, 10].contains(&i) { "a" } else { "b" })
            })
            .collect();
        run.create_nodes(&nodes).await;
        let all: BTreeSet<String> = (0..20).map(|i| run.node(i)).collect();
        create_ds(
            &run,
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 3, "partition": 5}}),
            json!({}),
        )
        .await;
        wait_placed(&run, 20).await;
        let uids: BTreeMap<String, String> = run
            .pods_by_node()
            .await
            .into_iter()
            .map(|(n, p)| (n, p[0].uid().unwrap_or_default()))
            .collect();
        let watch = Recorder::start(&run).await;

        // partition 5: 15 nodes update, the 5 first by name keep the old Pod (upstream updates
        // in reverse name order).
        set_image(&run.ds(), &run.name, V2)
            .await
            .expect("set image");
        let by_node = wait_updated(&run, 15, 20).await;
        let old: BTreeSet<String> = (0..5).map(|i| run.node(i)).collect();
        assert_eq!(nodes_with(&by_node, V1), old, "partition 5 kept these");
        assert_eq!(nodes_with(&by_node, V2).len(), 15);
        for (n, pods) in &by_node {
            // In place: the same Pod, its container restarted once on the new image.
            assert_eq!(uids.get(n), pods[0].uid().as_ref(), "same Pod on {n}");
            let restarts = container_status(&pods[0], "app").map(|c| c.restart_count);
            let want = if old.contains(n) { 0 } else { 1 };
            assert_eq!(restarts, Some(want), "restartCount on {n}");
        }

        // rollingUpdate.selector zone=a, partition 0: only nodes 0 and 1 of the old ones.
        patch_spec(
            &run.ds(),
            &run.name,
            json!({"updateStrategy": {"rollingUpdate": {
                "partition": 0, "selector": {"matchLabels": {"zone": "a"}}}}}),
        )
        .await
        .expect("selector");
        let by_node = wait_updated(&run, 17, 20).await;
        let old: BTreeSet<String> = (2..5).map(|i| run.node(i)).collect();
        assert_eq!(nodes_with(&by_node, V1), old, "the selector kept these");

        // Without the selector the rest follows.
        patch_spec(
            &run.ds(),
            &run.name,
            json!({"updateStrategy": {"rollingUpdate": {"selector": null}}}),
        )
        .await
        .expect("no selector");
        let by_node = wait_updated(&run, 20, 20).await;
        assert_eq!(nodes_with(&by_node, V2), all);

        let steps = watch.stop();
        let states = replay(&steps);
        let peak = states
            .iter()
            .map(|(_, st)| unavailable(st, &all))
            .max()
            .unwrap_or(0);
        eprintln!("at most {peak} of 20 nodes were without a Ready Pod at once");
        assert!(peak >= 1, "the watch saw the update: {steps:?}");
        assert!(
            peak <= 3,
            "maxUnavailable 3 exceeded: {peak} nodes without a Ready Pod at once"
        );
    })
    .await;
}

#[tokio::test]
async fn surging_runs_the_new_pod_before_deleting_the_old_one() {
    with_run("ads-surge", |run| async move {
        let nodes: Vec<FakeNode> = (0..6).map(|i| run.fake(i)).collect();
        run.create_nodes(&nodes).await;
        let all: BTreeSet<String> = (0..6).map(|i| run.node(i)).collect();
        create_ds(
            &run,
            json!({"type": "RollingUpdate", "rollingUpdate": {
                "rollingUpdateType": "Surging", "maxSurge": 1, "maxUnavailable": 0}}),
            json!({}),
        )
        .await;
        wait_placed(&run, 6).await;
        let before: BTreeMap<String, String> = run
            .pods_by_node()
            .await
            .into_iter()
            .map(|(n, p)| (n, p[0].uid().unwrap_or_default()))
            .collect();
        let watch = Recorder::start(&run).await;
        set_image(&run.ds(), &run.name, V2)
            .await
            .expect("set image");
        let by_node = wait_updated(&run, 6, 6).await;
        assert_eq!(nodes_with(&by_node, V2), all);
        for (n, pods) in &by_node {
            assert_eq!(pods.len(), 1, "{n}");
            assert_ne!(before.get(n), pods[0].uid().as_ref(), "a new Pod on {n}");
        }

        let steps = watch.stop();
        let states = replay(&steps);
        let mut old_deleted = BTreeSet::new();
        let mut peak_surge = 0;
        for (change, state) in &states {
            // Each old Pod goes only while the new Pod on its node is Ready.
            let old = before.values().any(|u| u == &change.uid);
            if old && (change.deleting || change.gone) && old_deleted.insert(change.uid.clone()) {
                let new_ready = state
                    .values()
                    .any(|s| s.node == change.node && s.image == V2 && s.ready && !s.deleting);
                assert!(
                    new_ready,
                    "old Pod {} on {} deleted before its successor was Ready: {state:?}",
                    change.name, change.node
                );
            }
            // Surging: a node whose new Pod is not Ready yet beside its old one. (Once the new
            // Pod is Ready the old one is deleted in the same sync that may surge onto the next
            // node, as upstream's syncNodes does.)
            let surging = all
                .iter()
                .filter(|n| {
                    let live = || state.values().filter(|s| &s.node == *n && !s.deleting);
                    live().count() > 1 && live().any(|s| s.image == V2 && !s.ready)
                })
                .count();
            peak_surge = peak_surge.max(surging);
            assert_eq!(
                unavailable(state, &all),
                0,
                "a node without a Ready Pod: {state:?}"
            );
        }
        assert_eq!(old_deleted.len(), 6, "every old Pod went: {steps:?}");
        assert_eq!(peak_surge, 1, "maxSurge 1: one node surging at a time");
    })
    .await;
}

#[tokio::test]
async fn a_refused_pod_create_is_an_event_and_a_condition_and_others_keep_going() {
    with_run("ads-refused", |run| async move {
        let nodes: Vec<FakeNode> = (0..3).map(|i| run.fake(i)).collect();
        run.create_nodes(&nodes).await;
        const REFUSE: &str = "kruise-rs.e2e/refuse";
        let message = "pods labelled kruise-rs.e2e/refuse are refused by this test";
        refuse_pods(&run, &run.name, REFUSE, message).await;
        // A policy takes effect once the API server has loaded it: wait until a probe Pod is
        // refused, so a slow start is not mistaken for the controller's doing.
        let probe: Pod = serde_json::from_value(json!({
            "metadata": {"generateName": "probe-", "labels": {REFUSE: "yes"}},
            "spec": {"containers": [{"name": "c", "image": V1}], "nodeSelector": {"none": "none"}}
        }))
        .expect("probe");
        kruise_e2e::wait_for("the policy in force", WAIT, || async {
            Ok(
                match run.pods().create(&PostParams::default(), &probe).await {
                    Err(kube::Error::Api(s)) if s.message.contains(message) => Some(()),
                    Ok(p) => {
                        let _ = run
                            .pods()
                            .delete(&p.name_any(), &DeleteParams::default())
                            .await;
                        None
                    }
                    Err(_) => None,
                },
            )
        })
        .await
        .expect("policy");
        let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}});
        let sel = json!({ RUN_LABEL: run.prefix });
        let mut refused = daemonset::new(
            &run.name,
            V1,
            strategy.clone(),
            json!({"nodeSelector": sel}),
        )
        .expect("DaemonSet");
        refused.data["spec"]["template"]["metadata"]["labels"][REFUSE] = json!("yes");
        run.ds()
            .create(&PostParams::default(), &refused)
            .await
            .expect("create DaemonSet");
        let other = format!("{}-ok", run.name);
        if let Ok(mut v) = run.others.lock() {
            v.push(other.clone());
        }
        let ok =
            daemonset::new(&other, V1, strategy, json!({"nodeSelector": sel})).expect("DaemonSet");
        run.ds()
            .create(&PostParams::default(), &ok)
            .await
            .expect("create DaemonSet");

        // The refused one says so in its status, with the API server's message, once the
        // manager's Node cache has all three Nodes: the first refused create can come from a
        // reconcile that ran before its Node watch delivered the third one.
        let ds = wait_status(
            &run.ds(),
            &run.name,
            "the FailedScale condition over 3 Nodes",
            WAIT,
            |d| {
                condition(d, "FailedScale").is_some_and(|c| c["status"] == "True")
                    && status_i64(d, "desiredNumberScheduled") == 3
            },
        )
        .await
        .expect("condition");
        let c = condition(&ds, "FailedScale").cloned().unwrap_or_default();
        assert_eq!(c["reason"], "FailedCreate", "{c}");
        assert!(c["message"].as_str().unwrap_or("").contains(message), "{c}");
        assert_eq!(status_i64(&ds, "desiredNumberScheduled"), 3);
        assert_eq!(status_i64(&ds, "currentNumberScheduled"), 0);
        // ... and in a Warning Event naming the node it was for.
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(run.client.clone(), NS);
        let ev = kruise_e2e::wait_for("the FailedCreate Event", WAIT, || async {
            let list = events.list(&Default::default()).await?;
            Ok(list.items.into_iter().find(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(run.name.as_str())
                    && e.reason.as_deref() == Some("FailedCreate")
            }))
        })
        .await
        .expect("event");
        assert_eq!(ev.type_.as_deref(), Some("Warning"));
        let note = ev.note.unwrap_or_default();
        assert!(note.contains(message), "{note}");
        assert!((0..3).any(|i| note.contains(&run.node(i))), "{note}");

        // The other DaemonSet of the namespace is placed meanwhile.
        let ok_status = wait_status(&run.ds(), &other, "the other DaemonSet placed", WAIT, |d| {
            status_i64(d, "numberReady") == 3
        })
        .await
        .expect("other");
        assert!(
            condition(&ok_status, "FailedScale").is_none(),
            "{}",
            ok_status.data["status"]
        );
        let still = run.ds().get(&run.name).await.expect("get");
        assert_eq!(status_i64(&still, "currentNumberScheduled"), 0);

        // Once the API server accepts them (the backoff retries), the Pods come and the
        // condition goes.
        delete_policy(&run.client, &run.name).await;
        let ds = wait_status(
            &run.ds(),
            &run.name,
            "placed after the refusal ends",
            WAIT,
            |d| status_i64(d, "numberReady") == 3 && condition(d, "FailedScale").is_none(),
        )
        .await
        .expect("recovered");
        assert_eq!(status_i64(&ds, "currentNumberScheduled"), 3);
    })
    .await;
}

/// `lifecycle.preDelete` when a node stops matching: its Pod moves to PreparingDelete and stays
/// (same UID) while the hook label is on it, the other nodes' Pods are untouched; removing the
/// label lets the controller delete it.
#[tokio::test]
async fn pre_delete_hook_holds_the_pod_of_a_node_labelled_out() {
    const HOLD: &str = "e2e.kruise-rs.io/hold";
    with_run("ads-predel", |run| async move {
        let nodes: Vec<FakeNode> = (0..5).map(|i| run.fake(i).label("agent", "yes")).collect();
        run.create_nodes(&nodes).await;
        let sel = json!({ RUN_LABEL: run.prefix, "agent": "yes" });
        let mut ds = daemonset::new(
            &run.name,
            V1,
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}),
            json!({ "nodeSelector": sel }),
        )
        .expect("DaemonSet");
        ds.data["spec"]["template"]["metadata"]["labels"][HOLD] = json!("true");
        ds.data["spec"]["lifecycle"] = json!({"preDelete": {"labelsHandler": {HOLD: "true"}}});
        run.ds()
            .create(&PostParams::default(), &ds)
            .await
            .expect("create DaemonSet");
        wait_placed(&run, 5).await;
        let before: BTreeMap<String, String> = run
            .pods_by_node()
            .await
            .iter()
            .map(|(n, p)| (n.clone(), p[0].uid().unwrap_or_default()))
            .collect();
        let node = run.node(2);
        let held = run.pods_by_node().await[&node][0].name_any();

        let node_api: Api<Node> = Api::all(run.client.clone());
        node_api
            .patch(
                &node,
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"labels": {"agent": "no"}}})),
            )
            .await
            .expect("label node out");
        let pods = run.pods();
        kruise_e2e::wait_for("the Pod in PreparingDelete", WAIT, || async {
            let p = pods.get(&held).await?;
            let state = p
                .labels()
                .get(kruise_api::keys::LIFECYCLE_STATE_LABEL)
                .cloned();
            Ok((state.as_deref() == Some("PreparingDelete")).then_some(()))
        })
        .await
        .expect("PreparingDelete");
        tokio::time::sleep(Duration::from_secs(5)).await;
        let by_node = run.pods_by_node().await;
        let after: BTreeMap<String, String> = by_node
            .iter()
            .map(|(n, p)| (n.clone(), p[0].uid().unwrap_or_default()))
            .collect();
        assert_eq!(after, before, "the held Pod and all others are still there");

        pods.patch(
            &held,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {HOLD: null}}})),
        )
        .await
        .expect("release the hook");
        wait_placed(&run, 4).await;
        let by_node = run.pods_by_node().await;
        assert!(!by_node.contains_key(&node), "{by_node:?}");
        for (n, p) in &by_node {
            assert_eq!(
                before.get(n),
                p[0].uid().as_ref(),
                "the Pod on {n} was kept"
            );
        }
    })
    .await;
}
