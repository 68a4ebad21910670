//! UnitedDeployment's `Adaptive` schedule strategy end to end (upstream's "adaptive united
//! deployment" e2e tests), on the local cluster's one node: subset `a` requires a node label no
//! node has, so its Pods stay Pending (`PodScheduled=False/Unschedulable`); subset `b` requires
//! the node's hostname. Once `a`'s Pods are unschedulable past `rescheduleCriticalSeconds`, `a`
//! is marked `Schedulable=False` in `status.subsetStatuses`, its replicas go to `b` and every Pod
//! ends Running on the node; after `unschedulableDuration` the mark turns `True` (`recover`) and
//! the running Pods stay where they are. With `reserveUnschedulablePods`, `a`'s Pods are kept
//! and labelled reserved while temporary Pods run in `b` (left out of `status.replicas` and the
//! scale selector), a template change reaches them all; once the node gets the label `a`
//! requires, `a`'s Pods run, stop being reserved, and the temporary Pods go.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps::v1alpha1::UD_RESERVED_POD_LABEL;
use kruise_api::keys;
use kruise_e2e::uniteddeployment::{self as ud, cloneset_template, create_raw};
use kruise_e2e::{TestNamespace, client, wait_for};
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(45);
/// A node label no node carries (subset `a`'s Pods never schedule).
const NOWHERE: &str = "e2e.kruise.io/ud-adaptive-nowhere";

fn nowhere_term() -> Value {
    json!({"matchExpressions": [{"key": NOWHERE, "operator": "In", "values": ["true"]}]})
}

/// The subset's `Schedulable` condition as `(status, reason, lastTransitionTime)`.
fn schedulable(u: &DynamicObject, subset: &str) -> Option<(String, String, String)> {
    let c = u.data["status"]["subsetStatuses"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == subset)?["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Schedulable")?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
    Some((s("status"), s("reason"), s("lastTransitionTime")))
}

/// Waits until `subset`'s `Schedulable` condition has `status` and `reason`.
async fn wait_schedulable(
    api: &Api<DynamicObject>,
    subset: &str,
    status: &str,
    reason: &str,
) -> DynamicObject {
    let what = format!("subset {subset} Schedulable={status} ({reason})");
    wait_for(&what, SETTLE, || async {
        let u = api.get("web").await?;
        let hit = schedulable(&u, subset).is_some_and(|(s, r, _)| s == status && r == reason);
        Ok(hit.then_some(u))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The live Pods of each subset: `(count, reserved-labelled count)`.
async fn reserved_by_subset(api: &Api<Pod>) -> BTreeMap<String, (i64, i64)> {
    let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let list = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("pods")
        .items;
    for p in list
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let labels = p.labels();
        let subset = labels
            .get(keys::SUBSET_NAME_LABEL)
            .cloned()
            .unwrap_or_default();
        let reserved = labels
            .get(UD_RESERVED_POD_LABEL)
            .is_some_and(|v| v == "true");
        let e = out.entry(subset).or_default();
        e.0 += 1;
        e.1 += i64::from(reserved);
    }
    out
}

/// Each live Pod as the reservation sees it (subset, phase, reserved label, revision, Ready
/// and since when), and the UnitedDeployment's subset statuses: what a failure needs to tell
/// a Pod the controller judged wrongly from one it never looked at again.
async fn explain(api: &Api<Pod>) -> String {
    let mut out = String::new();
    let list = api
        .list(&ListParams::default().labels("app=web"))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    for p in list {
        let labels = p.labels();
        let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
        let status = p.status.clone().unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map(|c| format!("{} since {:?}", c.status, c.last_transition_time))
            .unwrap_or_default();
        out.push_str(&format!(
            "\n  {} subset={} phase={:?} reserved={} revision={} ready={} deleting={}",
            p.name_any(),
            label(keys::SUBSET_NAME_LABEL),
            status.phase,
            label(UD_RESERVED_POD_LABEL),
            label(keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL),
            ready,
            p.metadata.deletion_timestamp.is_some(),
        ));
    }
    let ns = api.namespace().unwrap_or_default().to_owned();
    if let Ok(u) = ud::api(&api.clone().into_client(), &ns).get("web").await {
        out.push_str(&format!("\n  status: {}", u.data["status"]));
    }
    out
}

/// Waits until each subset has `(Pods, reserved Pods)` as given.
async fn wait_reserved(api: &Api<Pod>, want: &[(&str, i64, i64)]) {
    let want: BTreeMap<String, (i64, i64)> = want
        .iter()
        .filter(|(_, n, _)| *n > 0)
        .map(|(s, n, r)| ((*s).to_owned(), (*n, *r)))
        .collect();
    let what = format!("Pods (all, reserved) per subset {want:?}");
    let got = wait_for(&what, SETTLE, || async {
        Ok((reserved_by_subset(api).await == want).then_some(()))
    })
    .await;
    if got.is_err() {
        panic!(
            "{what}: have {:?}{}",
            reserved_by_subset(api).await,
            explain(api).await
        );
    }
}

/// The live Pods of the UnitedDeployment: `(subset, phase, node, ready)`.
async fn pods(api: &Api<Pod>) -> Vec<(String, String, String, bool)> {
    api.list(&ListParams::default().labels("app=web"))
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let subset = p
                .labels()
                .get(keys::SUBSET_NAME_LABEL)
                .cloned()
                .unwrap_or_default();
            let node = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let status = p.status.unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            (subset, status.phase.unwrap_or_default(), node, ready)
        })
        .collect()
}

/// Waits until exactly `n` Pods run, ready on a node, all in `subset`.
async fn wait_running_in(api: &Api<Pod>, subset: &str, n: usize) {
    let what = format!("{n} ready Pods in subset {subset}");
    let got = wait_for(&what, SETTLE, || async {
        let all = pods(api).await;
        let ok = all.len() == n
            && all.iter().all(|(s, phase, node, ready)| {
                s == subset && phase == "Running" && !node.is_empty() && *ready
            });
        Ok(ok.then_some(()))
    })
    .await;
    if got.is_err() {
        panic!("{what}: have {:?}", pods(api).await);
    }
}

async fn scale(api: &Api<DynamicObject>, replicas: i64) {
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"replicas": replicas}})),
    )
    .await
    .expect("scale UnitedDeployment");
}

/// The default Adaptive strategy: the unschedulable subset is marked, shrinks to its ready
/// Pods (none) and the next subset takes its replicas, also when scaled up while marked; the
/// mark recovers after `unschedulableDuration` without moving running Pods back.
#[tokio::test]
async fn unschedulable_subset_hands_its_replicas_to_the_next() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ud-adaptive")
        .await
        .expect("ns");
    let here = kruise_e2e::hostname_term(&client).await;
    create_raw(
        &client,
        &ns.name,
        "web",
        json!({
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": cloneset_template("web", "v1"),
            "topology": {
                "subsets": [
                    {"name": "a", "nodeSelectorTerm": nowhere_term(), "maxReplicas": 2},
                    {"name": "b", "nodeSelectorTerm": here},
                ],
                "scheduleStrategy": {"type": "Adaptive", "adaptive": {
                    "rescheduleCriticalSeconds": 5, "unschedulableDuration": 20}}
            }
        }),
    )
    .await
    .expect("Adaptive is accepted");
    let api = ud::api(&client, &ns.name);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &ns.name);

    // `a` first takes its maximum (2); its Pods cannot schedule, time out, and `a` is marked.
    let u = wait_schedulable(&api, "a", "False", "reschedule").await;
    let (_, _, marked_at) = schedulable(&u, "a").unwrap_or_default();
    assert!(
        schedulable(&u, "b").is_none_or(|(s, _, _)| s == "True"),
        "b stays schedulable: {:?}",
        schedulable(&u, "b")
    );
    ud::wait_split(&client, &ns.name, ud::expect(&[("a", 0), ("b", 3)]), SETTLE).await;
    wait_running_in(&pod_api, "b", 3).await;
    let u = wait_for("status counts 3 ready", SETTLE, || async {
        let u = api.get("web").await?;
        let st = &u.data["status"];
        let ok = st["replicas"] == 3
            && st["readyReplicas"] == 3
            && st["subsetReplicas"] == json!({"a": 0, "b": 3});
        Ok(ok.then_some(u))
    })
    .await
    .expect("status");
    let subsets = u.data["status"]["subsetStatuses"].clone();
    let b = subsets
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "b"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (b["replicas"].clone(), b["readyReplicas"].clone()),
        (json!(3), json!(3)),
        "{subsets}"
    );

    // Scaled up while `a` is marked: all of it goes to `b`.
    scale(&api, 4).await;
    ud::wait_split(&client, &ns.name, ud::expect(&[("a", 0), ("b", 4)]), SETTLE).await;
    wait_running_in(&pod_api, "b", 4).await;

    // After unschedulableDuration the mark recovers; the ready Pods stay in `b`.
    let u = wait_schedulable(&api, "a", "True", "recover").await;
    let (_, _, recovered_at) = schedulable(&u, "a").unwrap_or_default();
    assert!(recovered_at > marked_at, "{marked_at} -> {recovered_at}");
    ud::wait_split(&client, &ns.name, ud::expect(&[("a", 0), ("b", 4)]), SETTLE).await;
    assert_eq!(u.data["status"]["subsetReplicas"], json!({"a": 0, "b": 4}));
}

/// `reserveUnschedulablePods`: `a`'s Pods are kept, labelled reserved, and as many temporary
/// Pods run in `b`; a scale-up goes to `b`; an update reaches every Pod; once `a` can schedule (the node gets its label),
/// its Pods run, stop being reserved after `unschedulableDuration`, and `b`'s go.
#[tokio::test]
async fn reserved_pods_are_covered_by_temporary_ones_until_they_run() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ud-reserve")
        .await
        .expect("ns");
    let here = kruise_e2e::hostname_term(&client).await;
    // A label only this test sets on the node, to let `a` schedule later.
    let key = format!("e2e.kruise.io/{}", ns.name);
    let gate = json!({"matchExpressions": [{"key": key, "operator": "In", "values": ["true"]}]});
    create_raw(
        &client,
        &ns.name,
        "web",
        json!({
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": cloneset_template("web", "v1"),
            "topology": {
                "subsets": [
                    {"name": "a", "nodeSelectorTerm": gate},
                    {"name": "b", "nodeSelectorTerm": here},
                ],
                "scheduleStrategy": {"type": "Adaptive", "adaptive": {
                    "rescheduleCriticalSeconds": 5, "unschedulableDuration": 2,
                    "reserveUnschedulablePods": true}}
            }
        }),
    )
    .await
    .expect("reserving Adaptive is accepted");
    let api = ud::api(&client, &ns.name);
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &ns.name);

    // `a` keeps its 2 Pods, reserved; `b` runs 2 temporary ones.
    wait_schedulable(&api, "a", "False", "reschedule").await;
    wait_reserved(&pod_api, &[("a", 2, 2), ("b", 2, 0)]).await;
    ud::wait_split(&client, &ns.name, ud::expect(&[("a", 2), ("b", 2)]), SETTLE).await;
    let u = wait_for("status leaves the reserved Pods out", SETTLE, || async {
        let u = api.get("web").await?;
        let st = &u.data["status"];
        let ok = st["replicas"] == 2 && st["reservedPods"] == 2 && st["readyReplicas"] == 2;
        Ok(ok.then_some(u))
    })
    .await
    .expect("status");
    let st = &u.data["status"];
    assert_eq!(
        st["labelSelector"],
        format!("app=web,{UD_RESERVED_POD_LABEL}=false"),
        "{st}"
    );
    let a = st["subsetStatuses"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "a"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(a["reservedPods"], 2, "{st}");

    // Scaled up while `a` is unschedulable: `a` keeps 2, `b` runs 3.
    scale(&api, 3).await;
    wait_reserved(&pod_api, &[("a", 2, 2), ("b", 3, 0)]).await;

    // A template change while `a` is unschedulable: every Pod moves to v2 (`a`'s pending
    // ones too, its workload's maxUnavailable covering them), `a`'s new Pods reserved at once.
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"template": cloneset_template("web", "v2")}})),
    )
    .await
    .expect("update the template");
    let v2 = kruise_e2e::image("testapp", "v2");
    let what = format!("every Pod at {v2}");
    let got = wait_for(&what, SETTLE, || async {
        let images: Vec<String> = pod_api
            .list(&ListParams::default().labels("app=web"))
            .await?
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| p.spec.as_ref()?.containers.first()?.image.clone())
            .collect();
        Ok((images.len() == 5 && images.iter().all(|i| *i == v2)).then_some(()))
    })
    .await;
    assert!(
        got.is_ok(),
        "{what}: {:?}",
        reserved_by_subset(&pod_api).await
    );
    wait_reserved(&pod_api, &[("a", 2, 2), ("b", 3, 0)]).await;

    // `a` can schedule: its Pods run, stop being reserved, grow to 3; `b`'s temporary Pods go.
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes
        .list(&Default::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .next()
        .expect("a node")
        .name_any();
    let label = |v: Value| json!({"metadata": {"labels": {key.clone(): v}}});
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(&label(json!("true"))),
        )
        .await
        .expect("label the node");
    wait_reserved(&pod_api, &[("a", 3, 0), ("b", 0, 0)]).await;
    wait_running_in(&pod_api, "a", 3).await;
    ud::wait_split(&client, &ns.name, ud::expect(&[("a", 3), ("b", 0)]), SETTLE).await;
    wait_schedulable(&api, "a", "True", "reschedule").await;
    nodes
        .patch(
            &node,
            &PatchParams::default(),
            &Patch::Merge(&label(Value::Null)),
        )
        .await
        .expect("unlabel the node");
}
