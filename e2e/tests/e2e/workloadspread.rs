//! WorkloadSpread end to end, against the install from `deploy/`: a CloneSet of four under a
//! WorkloadSpread with subset `a` (at most 2, a label patch, required to the node's hostname)
//! and subset `b` (no cap). Two Pods land in `a` — patched, annotated, with the required node
//! affinity — and two in `b`; the status counts them; the deletion costs order `b` first, so
//! a scale-down to two removes `b`'s Pods. A Deployment's rolling update spreads its new
//! revision again (counted per `pod-template-hash`). A `targetFilter` picks which of a
//! StatefulSet's Pods are spread; a Job's Pods are spread. Adaptive gives the Pods a subset
//! cannot place to the next; Pods from before the WorkloadSpread are adopted by their node's
//! subset; a custom kind of the whitelist is spread through the StatefulSet it owns. Bad input is
//! refused naming the field.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::MatchedWorkloadSpread;
use kruise_api::keys::{self, k8s};
use kruise_e2e::cloneset as cs;
use kruise_e2e::customkind::CustomKind;
use kruise_e2e::workloadspread::{self as wsapi, create_raw, create_seen};
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
    let (term, _) = node_terms(&client).await;
    create_seen(
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

    let sets = new_cloneset(&client, &ns.name, 4).await;

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

/// Creates the CloneSet `app` of `replicas` testapp Pods; its API.
async fn new_cloneset(
    client: &kube::Client,
    ns: &str,
    replicas: i32,
) -> Api<kube::api::DynamicObject> {
    let sets = cs::api(client, ns);
    sets.create(
        &PostParams::default(),
        &cs::new("app", replicas, "v1", json!({})).expect("cloneset"),
    )
    .await
    .expect("create CloneSet");
    sets
}

/// The hostname term of the local cluster's node, and one that matches no node.
async fn node_terms(client: &kube::Client) -> (Value, Value) {
    (
        kruise_e2e::hostname_term(client).await,
        json!({"matchExpressions": [{"key": "e2e.kruise.io/zone", "operator": "In", "values": ["nowhere"]}]}),
    )
}

fn schedulable(st: &kruise_api::apps::v1alpha1::WorkloadSpreadSubsetStatus) -> Option<String> {
    st.conditions
        .iter()
        .find(|c| c.type_ == "Schedulable")
        .map(|c| c.status.clone())
}

/// Adaptive (upstream's e2e "reschedule subset-a"): subset `a` (at most 2) requires a zone no
/// node is in, so its two Pods stay Pending and unschedulable; once they have waited past
/// `rescheduleCriticalSeconds` the manager marks `a` `Schedulable=False` and deletes them, and
/// the CloneSet's replacements are placed in `b` by the webhook. The last subset stays
/// schedulable.
#[tokio::test]
async fn adaptive_moves_pods_out_of_a_subset_that_cannot_place_them() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws-adaptive")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    let (here, nowhere) = node_terms(&client).await;
    create_seen(
        &client,
        &ns.name,
        "ws",
        json!({
            "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "app"},
            "subsets": [
                {"name": "a", "requiredNodeSelectorTerm": nowhere, "maxReplicas": 2,
                 "patch": label_patch("a")},
                {"name": "b", "requiredNodeSelectorTerm": here, "patch": label_patch("b")}
            ],
            "scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 3}}
        }),
    )
    .await
    .expect("create WorkloadSpread");
    new_cloneset(&client, &ns.name, 4).await;

    // First placement: two Pods in `a` (Pending, nowhere to go), two in `b`.
    let first = wait_for("two Pods in each subset", SETTLE, || async {
        let list = cs::pods(&pods, "app").await?;
        let ok = list.len() == 4 && names(&list, "a").len() == 2 && names(&list, "b").len() == 2;
        Ok(ok.then_some(list))
    })
    .await
    .expect("first placement");
    let stuck: BTreeSet<String> = first
        .iter()
        .filter(|p| subset_of(p).as_deref() == Some("a"))
        .filter_map(|p| p.metadata.uid.clone())
        .collect();

    // Rescheduled: `a`'s Pods deleted, four Running and Ready in `b`, on the node.
    let last = wait_for("four Ready Pods in b", Duration::from_secs(60), || async {
        let list = cs::pods(&pods, "app").await?;
        let ok = list.len() == 4
            && list.iter().all(|p| {
                subset_of(p).as_deref() == Some("b")
                    && pod_ready(p)
                    && !stuck.contains(p.metadata.uid.as_deref().unwrap_or_default())
            });
        Ok(ok.then_some(list))
    })
    .await
    .expect("rescheduled to b");
    for p in &last {
        assert_eq!(
            p.labels().get("subset"),
            Some(&"b".to_owned()),
            "{}",
            p.name_any()
        );
    }
    // None of the stuck Pods is left, not even terminating.
    let all = pods.list(&Default::default()).await.expect("pods").items;
    assert!(
        all.iter()
            .all(|p| !stuck.contains(p.metadata.uid.as_deref().unwrap_or_default())),
        "stuck Pods left: {:?}",
        all.iter().map(|p| p.name_any()).collect::<Vec<_>>()
    );

    // The status: `a` closed (and still missing its two), `b` open with the four.
    let spreads = wsapi::api(&client, &ns.name);
    wait_for("a closed, b open", SETTLE, || async {
        let st = spreads.get("ws").await?.status.unwrap_or_default();
        let got: Vec<(String, i32, i32, Option<String>)> = st
            .subset_statuses
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.replicas,
                    s.missing_replicas,
                    schedulable(s),
                )
            })
            .collect();
        let want = vec![
            ("a".to_owned(), 0, 2, Some("False".to_owned())),
            ("b".to_owned(), 4, -1, Some("True".to_owned())),
        ];
        Ok((got == want).then_some(()))
    })
    .await
    .expect("status");
}

/// Pods the CloneSet ran before its WorkloadSpread existed (one annotated for another
/// WorkloadSpread) are adopted by the subset their node is in, as upstream's e2e "manage the
/// pods that were created before workloadspread": annotated, given the subset's labels, counted
/// (three in `a` over its cap of two), and the one over the cap is the first to go on a
/// scale-down.
#[tokio::test]
async fn pods_from_before_the_spread_are_adopted_by_their_nodes_subset() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws-adopt")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    let (here, nowhere) = node_terms(&client).await;
    let sets = new_cloneset(&client, &ns.name, 3).await;
    cs::wait_rolled_out(&sets, "app", 3, SETTLE)
        .await
        .expect("three Ready");
    let before = cs::pods(&pods, "app").await.expect("pods");
    let uids: BTreeSet<String> = before
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    let foreign = json!({"metadata": {"annotations": {
        keys::MATCHED_WORKLOADSPREAD_ANNOTATION: r#"{"name":"other","subset":"a"}"#}}});
    pods.patch(
        &before[0].name_any(),
        &PatchParams::default(),
        &Patch::Merge(&foreign),
    )
    .await
    .expect("annotate a Pod for another WorkloadSpread");

    create_seen(
        &client,
        &ns.name,
        "ws",
        json!({
            "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "app"},
            "subsets": [
                {"name": "a", "requiredNodeSelectorTerm": here, "maxReplicas": 2,
                 "patch": label_patch("a")},
                {"name": "b", "requiredNodeSelectorTerm": nowhere, "patch": label_patch("b")}
            ]
        }),
    )
    .await
    .expect("create WorkloadSpread");

    // Adopted in place (same Pods), with the subset's label; the costs put one over the cap.
    let adopted = wait_for("three Pods adopted into a", SETTLE, || async {
        let list = cs::pods(&pods, "app").await?;
        let costs: Vec<&str> = list
            .iter()
            .filter_map(|p| p.annotations().get(k8s::POD_DELETION_COST_ANNOTATION))
            .map(String::as_str)
            .collect();
        let ok = list.len() == 3
            && list.iter().all(|p| {
                p.annotations().get(keys::MATCHED_WORKLOADSPREAD_ANNOTATION)
                    == Some(&r#"{"name":"ws","subset":"a"}"#.to_owned())
                    && p.labels().get("subset") == Some(&"a".to_owned())
            })
            && costs.iter().filter(|c| **c == "-100").count() == 1
            && costs.iter().filter(|c| **c == "200").count() == 2;
        Ok(ok.then_some(list))
    })
    .await
    .expect("adopted");
    let now: BTreeSet<String> = adopted
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    assert_eq!(now, uids, "the same Pods, not new ones");
    let spreads = wsapi::api(&client, &ns.name);
    wait_for("a counts three", SETTLE, || async {
        let st = spreads.get("ws").await?.status.unwrap_or_default();
        let got: Vec<(i32, i32)> = st
            .subset_statuses
            .iter()
            .map(|s| (s.replicas, s.missing_replicas))
            .collect();
        Ok((got == [(3, 0), (0, -1)]).then_some(()))
    })
    .await
    .expect("status");

    // Scale down by one: the Pod over the cap goes.
    let over = adopted
        .iter()
        .find(|p| {
            p.annotations().get(k8s::POD_DELETION_COST_ANNOTATION) == Some(&"-100".to_owned())
        })
        .map(|p| p.name_any())
        .expect("the Pod over the cap");
    cs::patch_spec(&sets, "app", json!({"replicas": 2}))
        .await
        .expect("scale down");
    let left = wait_for("two Pods left", SETTLE, || async {
        let list = cs::pods(&pods, "app").await?;
        Ok((list.len() == 2).then_some(list))
    })
    .await
    .expect("scaled");
    assert!(
        left.iter().all(|p| p.name_any() != over),
        "{over} (cost -100) should have gone first"
    );
}

/// The custom kind's whitelist entry is the test's to put and take back: the key is
/// cluster-wide (in the manager's `kruise-configuration`), so what was there before returns.
struct WhiteListed {
    cms: Api<k8s_openapi::api::core::v1::ConfigMap>,
    before: Option<Option<String>>,
}

impl WhiteListed {
    async fn put(client: &kube::Client, value: String) -> WhiteListed {
        use k8s_openapi::api::core::v1::ConfigMap;
        let manager_ns = kruise_e2e::mode::manager_namespace(client)
            .await
            .expect("manager namespace");
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &manager_ns);
        let name = keys::KRUISE_CONFIGURATION_CONFIGMAP;
        let key = keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY;
        let before = cms
            .get_opt(name)
            .await
            .expect("read kruise-configuration")
            .map(|c| c.data.and_then(|d| d.get(key).cloned()));
        if before.is_none() {
            let cm: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": name}, "data": {key: value}}))
            .expect("configmap");
            cms.create(&PostParams::default(), &cm)
                .await
                .expect("create kruise-configuration");
        } else {
            cms.patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {key: value}})),
            )
            .await
            .expect("whitelist the kind");
        }
        WhiteListed { cms, before }
    }

    async fn restore(self) {
        let name = keys::KRUISE_CONFIGURATION_CONFIGMAP;
        let key = keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY;
        let res = match self.before {
            None => self.cms.delete(name, &Default::default()).await.map(|_| ()),
            Some(v) => self
                .cms
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {key: v}})),
                )
                .await
                .map(|_| ()),
        };
        res.expect("restore kruise-configuration");
    }
}

/// A custom workload kind listed in the `kruise-configuration` whitelist (upstream's
/// `WorkloadSpread_Watch_Custom_Workload_WhiteList`): a `GameServerSet` (a CRD of this run) owns
/// a StatefulSet (its `subResources`), whose Pods are spread. The percentage cap scales against
/// the whitelist's `replicasPath` (`spec.size`, 4: `a` takes 50 % = 2 of the three Pods), the
/// webhook walks the Pods' owners up to the GameServerSet, and the manager counts them through
/// the StatefulSet it controls. Before the kind is listed, a WorkloadSpread of it is refused
/// naming the field and the whitelist. The manager reads the kind under RBAC the test grants,
/// as a user would.
#[tokio::test]
async fn a_whitelisted_custom_workload_is_spread_through_the_statefulset_it_owns() {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws-custom")
        .await
        .expect("ns");
    let kind = CustomKind::create(&client, "ws", &["get", "list"])
        .await
        .expect("the GameServerSet kind, and the manager's grant on it");
    let group = kind.group.clone();

    let outcome = tokio::spawn(custom_body(client.clone(), ns.name.clone(), group.clone())).await;
    kind.remove(&client).await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }

    async fn custom_body(client: kube::Client, ns: String, group: String) {
        let api_version = format!("{group}/v1");
        let target = json!({"apiVersion": api_version, "kind": "GameServerSet", "name": "gs"});
        let (here, _) = node_terms(&client).await;
        let spec = json!({
            "targetRef": target,
            "subsets": [
                {"name": "a", "requiredNodeSelectorTerm": here, "maxReplicas": "50%",
                 "patch": label_patch("a")},
                {"name": "b", "patch": label_patch("b")}
            ]
        });
        // Not listed yet: refused, naming the field and where to list it.
        let refused = create_raw(&client, &ns, "ws", spec.clone())
            .await
            .expect_err("an unlisted kind is refused");
        let refused = refused.to_string();
        assert!(
            refused.contains("spec.targetRef")
                && refused.contains(keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY),
            "{refused}"
        );
        let listed = WhiteListed::put(
            &client,
            json!({"workloads": [{"Group": group, "Version": "v1", "Kind": "GameServerSet",
                "replicasPath": "spec.size",
                "subResources": [{"Group": "apps", "Version": "v1", "Kind": "StatefulSet"}]}]})
            .to_string(),
        )
        .await;
        let outcome = tokio::spawn(spread_custom(
            client.clone(),
            ns.clone(),
            group.clone(),
            spec,
        ))
        .await;
        // The WorkloadSpread goes before its kind leaves the whitelist: left behind, it would be
        // an object that no longer validates, and an update of it (`kubectl kruise migrate
        // storage` rewrites every object) would be refused, as upstream refuses it.
        let gone = wsapi::api(&client, &ns)
            .delete("ws", &kube::api::DeleteParams::default())
            .await;
        listed.restore().await;
        if let Err(kube::Error::Api(e)) = &gone
            && e.code != 404
        {
            panic!("delete the WorkloadSpread: {e}");
        }
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
    }

    async fn spread_custom(client: kube::Client, ns: String, group: String, spec: Value) {
        // The CRD is established within moments; the create is retried until it is.
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "GameServerSet"));
        let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        let gs: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": "GameServerSet",
            "metadata": {"name": "gs"}, "spec": {"size": 4}}))
        .expect("gameserverset");
        let gs = wait_for("the GameServerSet created", SETTLE, || async {
            Ok(sets.create(&PostParams::default(), &gs).await.ok())
        })
        .await
        .expect("create the GameServerSet");
        wait_for("the WorkloadSpread accepted", SETTLE, || async {
            Ok(create_raw(&client, &ns, "ws", spec.clone()).await.ok())
        })
        .await
        .expect("create the WorkloadSpread");
        let sts: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "gs-sts", "ownerReferences": [{
                "apiVersion": format!("{group}/v1"), "kind": "GameServerSet", "name": "gs",
                "uid": gs.uid().unwrap_or_default(), "controller": true}]},
            "spec": {"replicas": 3, "podManagementPolicy": "Parallel", "serviceName": "gs",
                     "selector": {"matchLabels": {"app": "gs"}},
                     "template": testapp_template("gs", "Always")}
        }))
        .expect("statefulset");
        Api::<StatefulSet>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &sts)
            .await
            .expect("create the StatefulSet");
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let all = wait_for("three Pods spread 2 + 1", SETTLE, || async {
            let list = cs::pods(&pods, "gs").await?;
            let ok =
                list.len() == 3 && names(&list, "a").len() == 2 && names(&list, "b").len() == 1;
            Ok(ok.then_some(list))
        })
        .await
        .expect("spread");
        for p in &all {
            let subset = subset_of(p).unwrap_or_default();
            assert_eq!(p.labels().get("subset"), Some(&subset), "{}", p.name_any());
        }
        let spreads = wsapi::api(&client, &ns);
        wait_for("the manager counts them", SETTLE, || async {
            let st = spreads.get("ws").await?.status.unwrap_or_default();
            let got: Vec<(i32, i32)> = st
                .subset_statuses
                .iter()
                .map(|s| (s.replicas, s.missing_replicas))
                .collect();
            Ok((got == [(2, 0), (1, -1)]).then_some(()))
        })
        .await
        .expect("status");
    }
}

/// A StatefulSet's Pods are placed by ordinal, as upstream (no reservation): with subsets `a`
/// (1), `b` (1) and `c` (no cap), `db-0` is in `a`, `db-1` in `b`, `db-2` in `c` however the
/// Parallel creates interleave, and again when `db-2` and `db-0` are deleted together and come
/// back.
#[tokio::test]
async fn a_statefulsets_pods_are_placed_by_ordinal() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ws-ordinal")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    create_seen(
        &client,
        &ns.name,
        "ws",
        json!({
            "targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"},
            "subsets": [{"name": "a", "maxReplicas": 1, "patch": label_patch("a")},
                        {"name": "b", "maxReplicas": 1, "patch": label_patch("b")},
                        {"name": "c", "patch": label_patch("c")}]
        }),
    )
    .await
    .expect("create WorkloadSpread");
    create_db_statefulset(&ns, 3).await;
    let by_ordinal = |list: &[Pod]| -> Vec<(String, Option<String>)> {
        list.iter().map(|p| (p.name_any(), subset_of(p))).collect()
    };
    let want = vec![
        ("db-0".to_owned(), Some("a".to_owned())),
        ("db-1".to_owned(), Some("b".to_owned())),
        ("db-2".to_owned(), Some("c".to_owned())),
    ];
    let first = wait_for("three Pods", SETTLE, || async {
        let list = cs::pods(&pods, "db").await?;
        Ok((list.len() == 3).then_some(list))
    })
    .await
    .expect("StatefulSet Pods");
    assert_eq!(by_ordinal(&first), want);
    let old: BTreeSet<String> = first
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    for name in ["db-2", "db-0"] {
        pods.delete(name, &Default::default())
            .await
            .expect("delete a Pod");
    }
    let again = wait_for("db-0 and db-2 back", SETTLE, || async {
        let list = cs::pods(&pods, "db").await?;
        let fresh = list
            .iter()
            .filter(|p| !old.contains(p.metadata.uid.as_deref().unwrap_or_default()))
            .count();
        Ok((list.len() == 3 && fresh == 2).then_some(list))
    })
    .await
    .expect("recreated");
    assert_eq!(by_ordinal(&again), want);
    // Placed, not reserved: no subset holds a creating or deleting entry for them.
    let st = wsapi::api(&client, &ns.name)
        .get("ws")
        .await
        .expect("ws")
        .status
        .unwrap_or_default();
    assert!(
        st.subset_statuses
            .iter()
            .all(|s| s.creating_pods.is_empty() && s.deleting_pods.is_empty()),
        "{:?}",
        st.subset_statuses
    );
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
) -> kruise_e2e::Result<()> {
    create_seen(
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

/// Creates StatefulSet `db` (Parallel, `replicas` testapp Pods labelled `app: db`).
async fn create_db_statefulset(ns: &TestNamespace, replicas: i32) {
    let sts: StatefulSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"replicas": replicas, "serviceName": "db", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": "db"}},
                 "template": testapp_template("db", "Always")}
    }))
    .expect("statefulset");
    ns.api::<StatefulSet>()
        .create(&PostParams::default(), &sts)
        .await
        .expect("create StatefulSet");
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
    create_seen(
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
    // Its Job does not exist yet: the status is written all the same (upstream counts a missing
    // workload as 0 replicas), each subset missing its whole cap.
    let early = wsapi::api(&client, &ns.name)
        .get("job-spread")
        .await
        .expect("job-spread")
        .status
        .unwrap_or_default();
    let counts: Vec<(i32, i32)> = early
        .subset_statuses
        .iter()
        .map(|s| (s.replicas, s.missing_replicas))
        .collect();
    assert_eq!(counts, [(0, 1), (0, -1)]);
    create_db_statefulset(&ns, 2).await;
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
            json!({"targetRef": target, "scheduleStrategy": {"type": "Sometimes"},
                   "subsets": [{"name": "a", "requiredNodeSelectorTerm": term}]}),
            "spec.scheduleStrategy.type",
        ),
        // Adaptive: the last subset takes what the others cannot place, so it has no cap; the
        // critical time is bounded by the five minutes a subset stays closed.
        (
            json!({"targetRef": target,
                   "scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 10}},
                   "subsets": [{"name": "a", "requiredNodeSelectorTerm": term},
                               {"name": "b", "requiredNodeSelectorTerm": term, "maxReplicas": 1}]}),
            "spec.scheduleStrategy.adaptive: Invalid value",
        ),
        (
            json!({"targetRef": target,
                   "scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 400}},
                   "subsets": [{"name": "a", "requiredNodeSelectorTerm": term, "maxReplicas": 1},
                               {"name": "b", "requiredNodeSelectorTerm": term}]}),
            "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds",
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
