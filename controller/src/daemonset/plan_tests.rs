use super::*;
use serde_json::json;

fn node(name: &str, labels: serde_json::Value) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("node")
}

/// A Pod at `hash`; `ready` makes it Running, Ready and InPlaceUpdateReady.
fn pod(name: &str, hash: &str, ready: bool) -> Pod {
    let status = if ready { "True" } else { "False" };
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"controller-revision-hash": hash},
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
    .expect("pod")
}

const RUN: Placement = Placement {
    should_run: true,
    should_continue_running: true,
};

fn lim(unavailable: usize, surge: usize, partition: usize) -> Limits {
    Limits {
        max_unavailable: unavailable,
        max_surge: surge,
        partition,
        burst: 250,
        creation_partition: None,
    }
}

fn now() -> Timestamp {
    "2026-01-02T00:00:00Z".parse().expect("ts")
}

/// 20 nodes n00..n19, each with one ready Pod at `old`; node i has label `pool=a` when `pool(i)`.
fn cluster(pool: impl Fn(usize) -> bool) -> (Vec<Node>, Vec<Pod>) {
    let nodes = (0..20)
        .map(|i| {
            node(
                &format!("n{i:02}"),
                if pool(i) {
                    json!({"pool": "a"})
                } else {
                    json!({})
                },
            )
        })
        .collect();
    let pods = (0..20)
        .map(|i| pod(&format!("p{i:02}"), "old", true))
        .collect();
    (nodes, pods)
}

fn views<'a>(nodes: &'a [Node], pods: &'a [Pod]) -> Vec<NodePods<'a>> {
    nodes
        .iter()
        .zip(pods)
        .map(|(n, p)| NodePods {
            node: n,
            placement: RUN,
            pods: vec![p],
        })
        .collect()
}

fn rolling() -> kruise_api::apps::v1beta1::RollingUpdateDaemonSet {
    Default::default()
}

#[test]
fn placement_creates_on_empty_nodes_and_deletes_misplaced() {
    let (n1, n2, n3) = (
        node("a", json!({})),
        node("b", json!({})),
        node("c", json!({})),
    );
    let (pb, pc, gone) = (
        pod("pb", "h", true),
        pod("pc", "h", true),
        pod("px", "h", true),
    );
    let nodes = [
        NodePods {
            node: &n1,
            placement: RUN,
            pods: vec![],
        },
        NodePods {
            node: &n2,
            placement: RUN,
            pods: vec![&pb],
        },
        NodePods {
            node: &n3,
            placement: Placement {
                should_run: false,
                should_continue_running: false,
            },
            pods: vec![&pc],
        },
    ];
    let p = plan(
        &nodes,
        &[&gone],
        "h",
        &lim(1, 0, 0),
        Some(&rolling()),
        0,
        now(),
    );
    assert_eq!(p.create_on, ["a"]);
    assert_eq!(p.delete, ["px", "pc"]);
    assert!(
        p.replace.is_empty(),
        "no update while placement is unsettled"
    );
}

#[test]
fn no_schedule_taint_keeps_the_pod_but_creates_none() {
    let n = node("a", json!({}));
    let keep = Placement {
        should_run: false,
        should_continue_running: true,
    };
    let existing = pod("p", "h", true);
    let with_pod = [NodePods {
        node: &n,
        placement: keep,
        pods: vec![&existing],
    }];
    assert_eq!(
        plan(&with_pod, &[], "h", &lim(1, 0, 0), None, 0, now()),
        Plan::default()
    );
    let empty = [NodePods {
        node: &n,
        placement: keep,
        pods: vec![],
    }];
    assert_eq!(
        plan(&empty, &[], "h", &lim(1, 0, 0), None, 0, now()),
        Plan::default()
    );
}

#[test]
fn terminating_pod_blocks_its_replacement_and_duplicates_go() {
    let n = node("a", json!({}));
    let mut dying = pod("old", "h", true);
    dying.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let nodes = [NodePods {
        node: &n,
        placement: RUN,
        pods: vec![&dying],
    }];
    assert_eq!(
        plan(&nodes, &[], "h", &lim(1, 0, 0), None, 0, now()),
        Plan::default()
    );
    let (a, mut b) = (pod("a1", "h", true), pod("a2", "h", true));
    b.metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let nodes = [NodePods {
        node: &n,
        placement: RUN,
        pods: vec![&b, &a],
    }];
    assert_eq!(
        plan(&nodes, &[], "h", &lim(1, 0, 0), None, 0, now()).delete,
        ["a2"],
        "the oldest stays"
    );
}

#[test]
fn max_unavailable_bounds_replacements() {
    let (nodes, mut pods) = cluster(|_| true);
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(3, 0, 0), Some(&rolling()), 0, now());
    assert_eq!(p.replace.len(), 3);
    // Two nodes already run an unready new Pod: one slot is left.
    pods[0] = pod("p00", "new", false);
    pods[1] = pod("p01", "new", false);
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(3, 0, 0), Some(&rolling()), 0, now());
    assert_eq!(p.replace.len(), 1);
    // An unavailable old Pod is replaced even past the budget.
    pods[2] = pod("p02", "old", false);
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(2, 0, 0), Some(&rolling()), 0, now());
    assert_eq!(p.replace, ["p02"]);
}

/// Upstream's budget, which ours once undercut: an unavailable old Pod's replacement does not use
/// it up, and nodes the partition or selector keep out of the update do not count against it.
#[test]
fn max_unavailable_budget_is_upstreams() {
    let (nodes, mut pods) = cluster(|i| i % 4 == 0);
    // One node already runs an unready new Pod, one has an unavailable old Pod: maxUnavailable
    // 3 leaves room for two more besides that old Pod's replacement.
    pods[0] = pod("p00", "new", false);
    pods[1] = pod("p01", "old", false);
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(3, 0, 0), Some(&rolling()), 0, now());
    assert_eq!(p.replace.len(), 3, "{:?}", p.replace);
    assert!(p.replace.iter().any(|n| n == "p01"), "{:?}", p.replace);
    // With the selector pool=a (nodes 0, 4, 8, 12, 16), the unavailable old Pod on node 1 is
    // outside the update: neither replaced nor counted. Node 0's unready new Pod counts.
    let mut ru = rolling();
    ru.selector = Some(serde_json::from_value(json!({"matchLabels": {"pool": "a"}})).expect("sel"));
    let p = plan(&v, &[], "new", &lim(3, 0, 0), Some(&ru), 0, now());
    let mut got = p.replace.clone();
    got.sort();
    assert_eq!(got, ["p12", "p16"], "reverse name order, as upstream");
    // Partition 18 of 20: two nodes may run the new revision, node 0 (updated already, its
    // unready Pod uses one slot of 2) and the last by name. Node 1's unavailable old Pod is
    // outside and takes nothing.
    let p = plan(&v, &[], "new", &lim(2, 0, 18), Some(&rolling()), 0, now());
    assert_eq!(p.replace, ["p19"]);
}

#[test]
fn partition_keeps_that_many_old_pods() {
    let (nodes, mut pods) = cluster(|_| true);
    for (i, p) in pods.iter_mut().enumerate().take(14) {
        *p = pod(&format!("p{i:02}"), "new", true);
    }
    let v = views(&nodes, &pods);
    // 14 updated, partition 5: one more may update.
    let p = plan(&v, &[], "new", &lim(3, 0, 5), Some(&rolling()), 0, now());
    assert_eq!(p.replace.len(), 1);
    pods[14] = pod("p14", "new", true);
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(3, 0, 5), Some(&rolling()), 0, now());
    assert!(p.replace.is_empty(), "15 of 20 updated with partition 5");
}

#[test]
fn rolling_selector_limits_nodes() {
    let (nodes, pods) = cluster(|i| i % 4 == 0);
    let v = views(&nodes, &pods);
    let mut ru = rolling();
    ru.selector = Some(serde_json::from_value(json!({"matchLabels": {"pool": "a"}})).expect("sel"));
    let p = plan(&v, &[], "new", &lim(20, 0, 0), Some(&ru), 0, now());
    let mut got = p.replace.clone();
    got.sort();
    assert_eq!(got, ["p00", "p04", "p08", "p12", "p16"]);
}

#[test]
fn paused_and_on_delete_update_nothing() {
    let (nodes, pods) = cluster(|_| true);
    let v = views(&nodes, &pods);
    let mut ru = rolling();
    ru.paused = Some(true);
    assert!(
        plan(&v, &[], "new", &lim(3, 0, 0), Some(&ru), 0, now())
            .replace
            .is_empty()
    );
    assert!(
        plan(&v, &[], "new", &lim(3, 0, 0), None, 0, now())
            .replace
            .is_empty()
    );
}

#[test]
fn surge_creates_beside_old_then_deletes_old_when_new_is_available() {
    let (nodes, pods) = cluster(|_| true);
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(0, 1, 0), Some(&rolling()), 0, now());
    assert_eq!(p.create_on.len(), 1, "one surge Pod at a time");
    assert!(
        p.delete.is_empty() && p.replace.is_empty(),
        "no old Pod goes first"
    );
    let node = p.create_on[0].clone();
    let idx = nodes
        .iter()
        .position(|n| n.metadata.name.as_deref() == Some(&node))
        .expect("node");
    // The new Pod is not ready yet: nothing more happens.
    let unready = pod("fresh", "new", false);
    let mut v = views(&nodes, &pods);
    v[idx].pods.push(&unready);
    let p = plan(&v, &[], "new", &lim(0, 1, 0), Some(&rolling()), 0, now());
    assert_eq!(p, Plan::default());
    // Ready: the old one on that node is deleted.
    let ready = pod("fresh", "new", true);
    let mut v = views(&nodes, &pods);
    v[idx].pods.push(&ready);
    let p = plan(&v, &[], "new", &lim(0, 1, 0), Some(&rolling()), 0, now());
    assert_eq!(p.delete, [format!("p{idx:02}")]);
}

#[test]
fn limits_resolve_percentages_and_defaults() {
    let ds = |ru: serde_json::Value, burst: serde_json::Value| -> DaemonSet {
        let mut spec =
            json!({"selector": {}, "template": {}, "updateStrategy": {"rollingUpdate": ru}});
        if !burst.is_null() {
            spec["burstReplicas"] = burst;
        }
        serde_json::from_value(
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "d"}, "spec": spec}),
        )
        .expect("ds")
    };
    assert_eq!(limits(&ds(json!({}), json!(null)), 20), Ok(lim(1, 0, 0)));
    let l = limits(
        &ds(
            json!({"maxUnavailable": "10%", "partition": "25%"}),
            json!("5%"),
        ),
        20,
    )
    .expect("ok");
    assert_eq!((l.max_unavailable, l.partition, l.burst), (2, 5, 1));
    assert_eq!(
        limits(
            &ds(json!({"rollingUpdateType": "Surging"}), json!(null)),
            20
        ),
        Ok(lim(0, 1, 0))
    );
    assert_eq!(
        limits(
            &ds(json!({"maxUnavailable": 0, "maxSurge": 0}), json!(null)),
            3
        ),
        Ok(lim(1, 0, 0))
    );
    let err = limits(&ds(json!({"maxSurge": "lots"}), json!(null)), 3).expect_err("bad");
    assert!(
        err.to_string()
            .contains("updateStrategy.rollingUpdate.maxSurge"),
        "{err}"
    );
}

/// `p` held by the preDelete hook (lifecycle state PreparingDelete).
fn pre_deleting(mut p: Pod) -> Pod {
    p.metadata.labels.get_or_insert_default().insert(
        kruise_api::keys::LIFECYCLE_STATE_LABEL.into(),
        "PreparingDelete".into(),
    );
    p
}

#[test]
fn a_pre_deleting_pod_is_deleted_and_counts_as_no_pod() {
    let (nodes, mut pods) = cluster(|_| true);
    // Node 19, first in upstream's reverse name order, holds its old Pod for the hook.
    pods[19] = pre_deleting(pod("p19", "old", true));
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(3, 0, 0), Some(&rolling()), 0, now());
    assert_eq!(p.delete, ["p19"], "deleted once its hook lets go");
    assert!(p.create_on.is_empty(), "without surge no Pod beside it");
    // It takes one of the 3 slots, is not picked again, and does not hold up the others.
    assert_eq!(p.replace, ["p18", "p17"]);
}

#[test]
fn a_pre_deleting_new_pod_uses_the_budget() {
    let (nodes, mut pods) = cluster(|_| true);
    pods[0] = pre_deleting(pod("p00", "new", true));
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(2, 0, 0), Some(&rolling()), 0, now());
    assert_eq!(p.delete, ["p00"]);
    assert_eq!(p.replace, ["p19"]);
}

#[test]
fn surge_starts_a_new_pod_beside_a_pre_deleting_one() {
    let (nodes, mut pods) = cluster(|_| true);
    pods[3] = pre_deleting(pod("p03", "old", true));
    let v = views(&nodes, &pods);
    let p = plan(&v, &[], "new", &lim(0, 1, 0), Some(&rolling()), 0, now());
    assert_eq!(p.delete, ["p03"]);
    assert_eq!(p.create_on, ["n03"], "the node is not left without a Pod");
    // Its new Pod is available: the held old Pod is only the manage loop's, and the surge
    // budget moves on to the next node.
    let ready = pod("fresh", "new", true);
    let mut v = views(&nodes, &pods);
    v[3].pods.push(&ready);
    let p = plan(&v, &[], "new", &lim(0, 1, 0), Some(&rolling()), 0, now());
    assert_eq!(p.delete, ["p03"]);
    assert_eq!(p.create_on, ["n19"]);
}

/// (name, new Pods, desired, partition, progressive, nodes needing a Pod, nodes that get one now)
type Case = (
    &'static str,
    usize,
    usize,
    usize,
    bool,
    Vec<String>,
    Vec<String>,
);

/// Upstream's `TestGetMaxCreateNum` table.
#[test]
fn partitioned_scaling_holds_creations_to_desired_minus_partition() {
    let ns =
        |r: std::ops::Range<usize>| -> Vec<String> { r.map(|i| format!("node-{i}")).collect() };
    let list = |v: &[&str]| -> Vec<String> { v.iter().map(|s| s.to_string()).collect() };
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("all new", 10, 10, 0, false, vec![], vec![]),
        ("create step1: partition=10", 0, 10, 10, true, ns(0..10), vec![]),
        ("create step2: partition=9", 0, 10, 9, true, ns(0..10), ns(0..1)),
        ("create step3: partition=5", 1, 10, 5, true, ns(1..10), ns(1..5)),
        ("create step4: 2 new nodes", 5, 12, 5, true, ns(5..12), list(&["node-10", "node-11"])),
        ("create step5: 3 nodes gone", 4, 9, 5, true,
            list(&["node-5", "node-6", "node-7", "node-9", "node-10"]), vec![]),
        ("create step6: partition=0", 4, 9, 0, true,
            list(&["node-5", "node-6", "node-7", "node-9", "node-10"]),
            list(&["node-10", "node-5", "node-6", "node-7", "node-9"])),
        ("create step7: 3 new nodes", 9, 12, 0, true, ns(12..15), ns(12..15)),
        ("update step1: partition=10", 0, 10, 10, false, vec![], vec![]),
        ("update step3: a Pod replaced", 0, 10, 9, false, ns(1..2), ns(1..2)),
        ("update step5: Pods replaced", 1, 10, 5, false, ns(2..6), ns(2..6)),
        ("update step6: 2 new nodes", 5, 12, 5, false, ns(11..13), ns(11..13)),
        ("update step7: Pods replaced", 7, 12, 0, false, ns(6..11),
            list(&["node-10", "node-6", "node-7", "node-8", "node-9"])),
        ("selector step2: partition=15", 0, 20, 15, true, ns(11..21), ns(11..16)),
        ("selector step3: partition=10", 5, 20, 10, true, ns(16..21), ns(16..21)),
        ("bad 1: partition too large", 10, 10, 100, false, vec![], vec![]),
        ("bad 2: partition too large at creation", 5, 10, 100, true, ns(5..11), vec![]),
        ("bad 3: an old Pod deleted by hand", 5, 10, 5, false, ns(6..7), ns(6..7)),
    ];
    for (name, new, desired, partition, progressive, needing, want) in cases {
        let got = nodes_needing_pods(new, desired, progressive.then_some(partition), needing);
        assert_eq!(got, want, "{name}");
    }
}

fn ds_with(spec_extra: serde_json::Value, desired_last: i32) -> DaemonSet {
    let mut ds = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
        "metadata": {"name": "d"},
        "spec": {"selector": {}, "template": {}},
        "status": {"desiredNumberScheduled": desired_last, "currentNumberScheduled": 0,
                   "numberMisscheduled": 0, "numberReady": 0, "updatedNumberScheduled": 0,
                   "updateRevision": ""}});
    if let Some(extra) = spec_extra.as_object() {
        for (k, v) in extra {
            ds["spec"][k] = v.clone();
        }
    }
    serde_json::from_value(ds).expect("ds")
}

#[test]
fn creation_is_held_back_only_with_partitioned_scaling_and_a_partition() {
    let progressive = json!({"partitionedScaling": true});
    let ru = |p: serde_json::Value| json!({"rollingUpdate": {"partition": p}});
    let held = |extra: serde_json::Value, last: i32| {
        limits(&ds_with(extra, last), 10)
            .expect("ok")
            .creation_partition
    };
    assert_eq!(held(json!({"updateStrategy": ru(json!(3))}), 0), None);
    assert_eq!(
        held(
            json!({"scaleStrategy": {"partitionedScaling": false}, "updateStrategy": ru(json!(3))}),
            0
        ),
        None
    );
    assert_eq!(
        held(json!({"scaleStrategy": progressive}), 0),
        None,
        "no partition"
    );
    let with =
        |p: serde_json::Value| json!({"scaleStrategy": progressive, "updateStrategy": ru(p)});
    assert_eq!(held(with(json!(0)), 0), None);
    assert_eq!(held(with(json!(3)), 0), Some(3));
    // A percentage is of the last status's desired number, rounded down.
    assert_eq!(held(with(json!("50%")), 0), None);
    assert_eq!(held(with(json!("25%")), 10), Some(2));
    let on_delete = json!({"scaleStrategy": progressive,
        "updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 3}}});
    assert_eq!(held(on_delete, 0), None);
}

#[test]
fn progressive_creation_creates_in_name_order_then_lets_the_update_run() {
    let (nodes, _) = cluster(|_| false);
    let nodes = &nodes[..4];
    let newp = pod("p-new", "new", true);
    let oldp = pod("p-old", "old", true);
    // n00 holds a new Pod, n01 an old one, n02 and n03 none: desired 4, partition 2.
    let v: Vec<NodePods<'_>> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| NodePods {
            node: n,
            placement: RUN,
            pods: match i {
                0 => vec![&newp],
                1 => vec![&oldp],
                _ => vec![],
            },
        })
        .collect();
    let mut l = lim(1, 0, 2);
    l.creation_partition = Some(2);
    let p = plan(&v, &[], "new", &l, Some(&rolling()), 0, now());
    assert_eq!(p.create_on, ["n02"], "4 - 1 new - 2 = one more Pod");
    l.creation_partition = Some(3);
    let p = plan(&v, &[], "new", &l, Some(&rolling()), 0, now());
    assert!(p.create_on.is_empty());
    assert!(
        p.replace.is_empty(),
        "the update still keeps the partition's old Pods"
    );
    l.creation_partition = None;
    let p = plan(&v, &[], "new", &l, Some(&rolling()), 0, now());
    assert_eq!(p.create_on, ["n02", "n03"]);
}
