//! WorkloadSpread end to end, against the install from `deploy/`: a CloneSet of four under a
//! WorkloadSpread with subset `a` (at most 2, a label patch, required to the node's hostname)
//! and subset `b` (no cap). Two Pods land in `a` — patched, annotated, with the required node
//! affinity — and two in `b`; the status counts them; the deletion costs order `b` first, so
//! a scale-down to two removes `b`'s Pods. Bad input is refused naming the field.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps::v1alpha1::MatchedWorkloadSpread;
use kruise_api::keys::{self, k8s};
use kruise_e2e::cloneset as cs;
use kruise_e2e::workloadspread::{self as wsapi, create_raw};
use kruise_e2e::{TestNamespace, client, pod_ready, wait_for};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(45);
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
        Ok((got == [("a".into(), 2, 0, 0), ("b".into(), 2, -1, 0)]).then_some(()))
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
