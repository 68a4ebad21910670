//! WorkloadSpread end to end, against the install from `deploy/`: a CloneSet of four under a
//! WorkloadSpread with subset `a` (at most 2, a label patch, required to the node's hostname)
//! and subset `b` (no cap). Two Pods land in `a` — patched, annotated, with the required node
//! affinity — and two in `b`; the status counts them; the deletion costs order `b` first, so
//! a scale-down to two removes `b`'s Pods. A Deployment's rolling update spreads its new
//! revision again (counted per `pod-template-hash`). A `targetFilter` picks which of a
//! StatefulSet's Pods are spread; a Job's Pods are spread. Bad input is refused naming the
//! field.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps::v1alpha1::MatchedWorkloadSpread;
use kruise_api::keys::{self, k8s};
use kruise_e2e::cloneset as cs;
use kruise_e2e::workloadspread::{self as wsapi, create_raw};
use kruise_e2e::{TestNamespace, client, pod_ready, wait_for};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(45);
/// A rolling update of four Pods, one at a time, each waiting for readiness.
const ROLLOUT: Duration = Duration::from_secs(120);
const HOSTNAME: &str = "kubernetes.io/hostname";

fn subset_of(p: &Pod) -> Option<String> {
    MatchedWorkloadSpread::of(p.metadata.annotations.as_ref()).map(|m| m.subset)
}

fn names(pods: &[Pod], subset: &str) -> BTreeSet<String> {
    pods.iter()
        .filter(|p| subset_of(p).as_deref() == Some(subset))
        .map(|p| p.name_any())
        .collect()
}

#[tokio::test]
async fn pods_fill_subsets_in_order_and_scale_down_from_the_last() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws").await.expect("ns");
    let pods: Api<Pod> = ns.api();
    let node = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .next()
        .expect("a node");
    let hostname = node.labels().get(HOSTNAME).cloned().unwrap_or_default();
    let term =
        json!({"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [hostname]}]});
    create_raw(
        &client,
        &ns.name,
        "ws",
        json!({
            "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "app"},
            "subsets": [
                {"name": "a", "requiredNodeSelectorTerm": term, "maxReplicas": 2,
                 "patch": {"metadata": {"labels": {"subset": "a"}}}},
                {"name": "b", "preferredNodeSelectorTerms": [{"weight": 1, "preference": term}]}
            ]
        }),
    )
    .await
    .expect("create WorkloadSpread");

    let sets = cs::api(&client, &ns.name);
    sets.create(
        &PostParams::default(),
        &cs::new("app", 4, "v1", json!({})).expect("cloneset"),
    )
    .await
    .expect("create CloneSet");

    let all = wait_for("four Pods spread", SETTLE, || async {
        let list = cs::pods(&pods, "app").await?;
        Ok((list.len() == 4 && list.iter().all(|p| subset_of(p).is_some())).then_some(list))
    })
    .await
    .expect("spread");
    let in_a = names(&all, "a");
    let in_b = names(&all, "b");
    assert_eq!((in_a.len(), in_b.len()), (2, 2), "a={in_a:?} b={in_b:?}");
    for p in &all {
        let raw = p.annotations()[keys::MATCHED_WORKLOADSPREAD_ANNOTATION].clone();
        let subset = subset_of(p).unwrap_or_default();
        assert_eq!(raw, format!(r#"{{"name":"ws","subset":"{subset}"}}"#));
        let affinity = serde_json::to_value(p.spec.as_ref().and_then(|s| s.affinity.clone()))
            .unwrap_or(Value::Null);
        let na = &affinity["nodeAffinity"];
        if subset == "a" {
            assert_eq!(
                p.labels().get("subset"),
                Some(&"a".to_owned()),
                "{}",
                p.name_any()
            );
            assert_eq!(
                na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0],
                term
            );
        } else {
            assert_eq!(p.labels().get("subset"), None, "{}", p.name_any());
            assert_eq!(
                na["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"],
                term
            );
        }
    }

    // The controller's counts; every reservation has become a Pod.
    let spreads = wsapi::api(&client, &ns.name);
    wait_for("the subsets' status", SETTLE, || async {
        let st = spreads.get("ws").await?.status.unwrap_or_default();
        let got: Vec<(String, i32, i32, usize)> = st
            .subset_statuses
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.replicas,
                    s.missing_replicas,
                    s.creating_pods.len(),
                )
            })
            .collect();
        // A CloneSet's Pods are counted without a revision, as upstream.
        let ignored: Vec<(i32, i32)> = st
            .versioned(keys::WS_VERSION_IGNORED)
            .iter()
            .map(|s| (s.replicas, s.missing_replicas))
            .collect();
        let ok = got == [("a".into(), 2, 0, 0), ("b".into(), 2, -1, 0)]
            && ignored == [(2, 0), (2, -1)]
            && st.versioned_subset_statuses.len() == 1;
        Ok(ok.then_some(()))
    })
    .await
    .expect("status");

    // Deletion costs: 100 × (subsets − index). Every Pod Ready too: a CloneSet deletes a
    // not-ready Pod before it looks at costs (as upstream ranks them), so scaling down while a
    // Pod of `a` still starts would rightly take that one.
    wait_for("deletion costs on four Ready Pods", SETTLE, || async {
        let list = cs::pods(&pods, "app").await?;
        let ok = list.len() == 4
            && list.iter().all(|p| {
                pod_ready(p) && {
                    let want = if in_a.contains(&p.name_any()) {
                        "200"
                    } else {
                        "100"
                    };
                    p.annotations()
                        .get(k8s::POD_DELETION_COST_ANNOTATION)
                        .map(String::as_str)
                        == Some(want)
                }
            });
        Ok(ok.then_some(()))
    })
    .await
    .expect("costs");
    // ... and the CloneSet controller has seen them Ready (its status says so).
    cs::wait_rolled_out(&sets, "app", 4, SETTLE)
        .await
        .expect("four Ready in the CloneSet's status");

    // Scale down to two: subset b's Pods go.
    cs::patch_spec(&sets, "app", json!({"replicas": 2}))
        .await
        .expect("scale down");
    let left = wait_for("two Pods left", SETTLE, || async {
        let list = cs::pods(&pods, "app").await?;
        Ok((list.len() == 2).then_some(list))
    })
    .await
    .expect("scaled");
    let left: BTreeSet<String> = left.iter().map(|p| p.name_any()).collect();
    assert_eq!(left, in_a, "the Pods of subset a stay");
}

fn template_hash(p: &Pod) -> String {
    p.labels()
        .get(keys::POD_TEMPLATE_HASH_LABEL)
        .cloned()
        .unwrap_or_default()
}

/// A Deployment under a WorkloadSpread (subset `a` capped at 2, `b` not): its Pods are counted
/// per revision (`versionedSubsetStatuses`, keyed by `pod-template-hash`), so after a rolling
/// update the new revision's four Pods are spread 2 + 2 again instead of all landing in `b`
/// while the old Pods still held `a`; the old revision's entry is dropped once its Pods are
/// gone.
#[tokio::test]
async fn a_deployment_rollout_spreads_the_new_revision_again() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws-deploy")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    create_two_subsets(
        &client,
        &ns.name,
        "ws",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}),
        2,
    )
    .await
    .expect("create WorkloadSpread");
    let deployments: Api<Deployment> = ns.api();
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {
            "replicas": 4,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate",
                         "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "app",
                        "image": kruise_e2e::image("testapp", "v1"),
                        "readinessProbe": {"httpGet": {"path": "/", "port": 8080},
                                           "periodSeconds": 1}
                    }]
                }
            }
        }
    }))
    .expect("deployment");
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .expect("create Deployment");
    let spread_of = |list: &[Pod]| {
        let a = list
            .iter()
            .filter(|p| subset_of(p).as_deref() == Some("a"))
            .count();
        let b = list
            .iter()
            .filter(|p| subset_of(p).as_deref() == Some("b"))
            .count();
        (a, b)
    };
    let first = wait_for("four Ready Pods spread", ROLLOUT, || async {
        let list = cs::pods(&pods, "web").await?;
        Ok((list.len() == 4 && list.iter().all(pod_ready)).then_some(list))
    })
    .await
    .expect("first revision");
    assert_eq!(spread_of(&first), (2, 2));
    let old_hash = template_hash(&first[0]);

    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"template": {"spec": {"containers": [
                {"name": "app", "image": kruise_e2e::image("testapp", "v2")}]}}}})),
        )
        .await
        .expect("roll the Deployment");
    let rolled = wait_for("four Ready Pods of the new revision", ROLLOUT, || async {
        let list = cs::pods(&pods, "web").await?;
        let new = list.iter().all(|p| template_hash(p) != old_hash);
        Ok((list.len() == 4 && new && list.iter().all(pod_ready)).then_some(list))
    })
    .await
    .expect("rolled out");
    assert_eq!(
        spread_of(&rolled),
        (2, 2),
        "the new revision fills `a` again"
    );
    let new_hash = template_hash(&rolled[0]);

    let spreads = wsapi::api(&client, &ns.name);
    wait_for("the status per revision", SETTLE, || async {
        let st = spreads.get("ws").await?.status.unwrap_or_default();
        let versions: Vec<&String> = st.versioned_subset_statuses.keys().collect();
        let new: Vec<(i32, i32)> = st
            .versioned(&new_hash)
            .iter()
            .map(|s| (s.replicas, s.missing_replicas))
            .collect();
        let all: Vec<(i32, i32)> = st
            .subset_statuses
            .iter()
            .map(|s| (s.replicas, s.missing_replicas))
            .collect();
        let ok = versions == [&new_hash] && new == [(2, 0), (2, -1)] && all == new;
        Ok(ok.then_some(()))
    })
    .await
    .expect("versioned status");
}

/// A subset's patch: the label `subset=<name>` (a subset must carry something to inject).
fn label_patch(subset: &str) -> Value {
    json!({"metadata": {"labels": {"subset": subset}}})
}

/// Creates the WorkloadSpread `name` over `target` with subset `a` (at most `cap_a`) and
/// subset `b` (no cap), each labelling its Pods `subset=<name>`.
async fn create_two_subsets(
    client: &kube::Client,
    ns: &str,
    name: &str,
    target: Value,
    cap_a: i32,
) -> Result<(), kube::Error> {
    create_raw(
        client,
        ns,
        name,
        json!({
            "targetRef": target,
            "subsets": [{"name": "a", "maxReplicas": cap_a, "patch": label_patch("a")},
                        {"name": "b", "patch": label_patch("b")}]
        }),
    )
    .await
    .map(|_| ())
}

fn testapp_template(app: &str, restart: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "app", "image": kruise_e2e::image("testapp", "v1")}]
        }
    })
}

/// A StatefulSet under a WorkloadSpread with a `targetFilter`: only the Pod its selector picks
/// (`db-0`) is spread and counted, the other is left alone; the caps scale against the
/// filter's `replicasPathList`. And a Job's Pods are spread by its parallelism.
#[tokio::test]
async fn a_filter_picks_the_pods_and_statefulsets_and_jobs_are_spread() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws-kinds")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    create_raw(
        &client,
        &ns.name,
        "db-spread",
        json!({
            "targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"},
            "targetFilter": {
                "selector": {"matchExpressions": [{"key": "statefulset.kubernetes.io/pod-name",
                                                   "operator": "In", "values": ["db-0"]}]},
                "replicasPathList": ["spec.replicas"]},
            "subsets": [{"name": "a", "maxReplicas": 1, "patch": label_patch("a")},
                        {"name": "b", "patch": label_patch("b")}]
        }),
    )
    .await
    .expect("create the StatefulSet's WorkloadSpread");
    create_two_subsets(
        &client,
        &ns.name,
        "job-spread",
        json!({"apiVersion": "batch/v1", "kind": "Job", "name": "batch"}),
        1,
    )
    .await
    .expect("create the Job's WorkloadSpread");
    let sts: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": 2, "serviceName": "db", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "db"}},
                 "template": testapp_template("db", "Always")}
    }))
    .expect("statefulset");
    ns.api::<StatefulSet>()
        .create(&PostParams::default(), &sts)
        .await
        .expect("create StatefulSet");
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"},
        "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0,
                 "template": testapp_template("batch", "Never")}
    }))
    .expect("job");
    ns.api::<Job>()
        .create(&PostParams::default(), &job)
        .await
        .expect("create Job");

    let db = wait_for("the StatefulSet's two Pods", SETTLE, || async {
        let list = cs::pods(&pods, "db").await?;
        Ok((list.len() == 2).then_some(list))
    })
    .await
    .expect("StatefulSet Pods");
    for p in &db {
        // Only db-0 is selected by the filter; db-1 is left as its StatefulSet made it.
        let want = (p.name_any() == "db-0").then(|| "a".to_owned());
        assert_eq!(subset_of(p), want, "{}", p.name_any());
        assert_eq!(p.labels().get("subset"), want.as_ref(), "{}", p.name_any());
    }
    let batch = wait_for("the Job's two Pods", SETTLE, || async {
        let list = cs::pods(&pods, "batch").await?;
        Ok((list.len() == 2).then_some(list))
    })
    .await
    .expect("Job Pods");
    let mut got: Vec<String> = batch.iter().filter_map(subset_of).collect();
    got.sort();
    assert_eq!(got, ["a", "b"]);

    let spreads = wsapi::api(&client, &ns.name);
    for (name, want) in [
        ("db-spread", [(1, 0), (0, -1)]),
        ("job-spread", [(1, 0), (1, -1)]),
    ] {
        wait_for(&format!("{name}'s status"), SETTLE, || async {
            let st = spreads.get(name).await?.status.unwrap_or_default();
            let counts: Vec<(i32, i32)> = st
                .subset_statuses
                .iter()
                .map(|s| (s.replicas, s.missing_replicas))
                .collect();
            Ok((counts == want).then_some(()))
        })
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[tokio::test]
async fn bad_spreads_are_refused_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws-bad")
        .await
        .expect("ns");
    let term = json!({"matchExpressions": [{"key": HOSTNAME, "operator": "Exists"}]});
    let target = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "x"});
    let cases = [
        (
            json!({"targetRef": target, "subsets": [
                {"name": "a", "requiredNodeSelectorTerm": term},
                {"name": "a", "requiredNodeSelectorTerm": term}]}),
            "spec.subsets[1].name",
        ),
        (
            json!({"targetRef": target, "subsets": [
                {"name": "a", "requiredNodeSelectorTerm": term, "maxReplicas": 1},
                {"name": "b", "requiredNodeSelectorTerm": term, "maxReplicas": "50%"}]}),
            "all integers or all percentages",
        ),
        (
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "x"},
                   "subsets": [{"name": "a", "requiredNodeSelectorTerm": term}]}),
            "spec.targetRef",
        ),
        (
            json!({"targetRef": target, "scheduleStrategy": {"type": "Adaptive"},
                   "subsets": [{"name": "a", "requiredNodeSelectorTerm": term}]}),
            "spec.scheduleStrategy.type",
        ),
    ];
    for (i, (spec, field)) in cases.into_iter().enumerate() {
        match create_raw(&client, &ns.name, &format!("bad{i}"), spec).await {
            Err(kube::Error::Api(s)) => {
                assert!(s.message.contains(field), "case {i}: {}", s.message)
            }
            other => panic!("case {i} accepted: {other:?}"),
        }
    }
}
