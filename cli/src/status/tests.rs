use super::*;
use serde_json::json;

fn cs(spec_extra: serde_json::Value, status: serde_json::Value, generation: i64) -> RolloutView {
    let mut rolling = json!({"podUpdatePolicy": "InPlaceIfPossible"});
    if let (Some(r), Some(e)) = (rolling.as_object_mut(), spec_extra.as_object()) {
        for (k, v) in e {
            r.insert(k.clone(), v.clone());
        }
    }
    RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "default", "generation": generation},
        "spec": {"replicas": 10, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}},
        "status": status,
    }))
}

fn st(observed: i64, updated: i64, updated_ready: i64) -> serde_json::Value {
    json!({"observedGeneration": observed, "replicas": 10, "readyReplicas": 10, "availableReplicas": 10,
           "updatedReplicas": updated, "updatedReadyReplicas": updated_ready,
           "currentRevision": "web-1", "updateRevision": "web-2"})
}

#[test]
fn decision_table() {
    let none = PodSummary::default();
    let busy = PodSummary {
        in_place_updating: vec!["web-abcde".into(), "web-fghij".into()],
        ..Default::default()
    };
    let failed = {
        let mut s = st(2, 4, 4);
        s["conditions"] = json!([{"type": "FailedUpdate", "status": "True", "reason": "InPlaceOnly", "message": "cannot update in place"}]);
        s
    };
    let cases: Vec<(&str, RolloutView, &PodSummary, Outcome, &str)> = vec![
        (
            "stale observedGeneration",
            cs(json!({}), st(1, 10, 10), 2),
            &none,
            Outcome::Progressing,
            "observe generation 2",
        ),
        (
            "done",
            cs(json!({}), st(2, 10, 10), 2),
            &none,
            Outcome::Complete,
            "successfully rolled out",
        ),
        (
            "updated but not ready",
            cs(json!({}), st(2, 10, 8), 2),
            &none,
            Outcome::Progressing,
            "8 of 10 updated pods ready",
        ),
        (
            "not all updated",
            cs(json!({}), st(2, 6, 6), 2),
            &none,
            Outcome::Progressing,
            "6 of 10 expected",
        ),
        (
            "paused midway",
            cs(json!({"paused": true}), st(2, 6, 6), 2),
            &none,
            Outcome::Paused,
            "paused with 6 of 10",
        ),
        (
            "paused but already done",
            cs(json!({"paused": true}), st(2, 10, 10), 2),
            &none,
            Outcome::Complete,
            "successfully",
        ),
        (
            "partition int reached",
            cs(json!({"partition": 3}), st(2, 7, 7), 2),
            &none,
            Outcome::Complete,
            "partition 3 keeps 3",
        ),
        (
            "partition percent reached",
            cs(json!({"partition": "30%"}), st(2, 7, 7), 2),
            &none,
            Outcome::Complete,
            "partition 30% keeps 3",
        ),
        (
            "partition not ready",
            cs(json!({"partition": "30%"}), st(2, 7, 5), 2),
            &none,
            Outcome::Progressing,
            "5 of 7",
        ),
        (
            "partition 99% still moves one",
            cs(json!({"partition": "99%"}), st(2, 0, 0), 2),
            &none,
            Outcome::Progressing,
            "0 of 1",
        ),
        (
            "in-place pods still busy",
            cs(json!({}), st(2, 10, 10), 2),
            &busy,
            Outcome::Progressing,
            "web-abcde and 1 more",
        ),
        (
            "failed update",
            cs(json!({}), failed, 2),
            &none,
            Outcome::Failed,
            "cannot update in place",
        ),
    ];
    for (name, view, pods, outcome, needle) in cases {
        let got = decide(&view, pods);
        assert_eq!(got.outcome, outcome, "{name}: {got:?}");
        assert!(
            got.message.contains(needle),
            "{name}: {:?} lacks {needle:?}",
            got.message
        );
    }
}

fn check(name: &str, view: &RolloutView, pods: &PodSummary, outcome: Outcome, needle: &str) {
    let got = decide(view, pods);
    assert_eq!(got.outcome, outcome, "{name}: {got:?}");
    assert!(
        got.message.contains(needle),
        "{name}: {:?} lacks {needle:?}",
        got.message
    );
}

fn asts(rolling: serde_json::Value, status: serde_json::Value) -> RolloutView {
    RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default", "generation": 2},
        "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}},
        "status": status,
    }))
}

/// Advanced StatefulSet: partition 1 of 3 is done once ordinals 2 and 1 are updated and
/// ready and neither is mid in-place update; ordinal 0 is kept.
#[test]
fn asts_decisions() {
    let none = PodSummary::default();
    let st = |updated: i64, updated_ready: i64, replicas: i64| {
        json!({"observedGeneration": 2, "replicas": replicas, "readyReplicas": 3, "availableReplicas": 3,
               "updatedReplicas": updated, "updatedReadyReplicas": updated_ready,
               "currentRevision": "web-a", "updateRevision": "web-b"})
    };
    let part = json!({"podUpdatePolicy": "InPlaceIfPossible", "partition": 1});
    let v = asts(part.clone(), st(2, 2, 3));
    assert_eq!(v.kind, crate::view::workload::Kind::AdvancedStatefulSet);
    assert_eq!(v.pod_update_policy, "InPlaceIfPossible");
    check(
        "partitioned",
        &v,
        &none,
        Outcome::Complete,
        "2 of 3 pods updated (partition 1 keeps 1)",
    );
    let busy = PodSummary {
        in_place_updating: vec!["web-1".into()],
        ..Default::default()
    };
    check(
        "ordinal 1 mid update",
        &v,
        &busy,
        Outcome::Progressing,
        "in-place update still running on web-1",
    );
    check(
        "one left",
        &asts(part.clone(), st(1, 1, 3)),
        &none,
        Outcome::Progressing,
        "1 of 2 expected",
    );
    check(
        "not ready",
        &asts(part, st(2, 1, 3)),
        &none,
        Outcome::Progressing,
        "1 of 2 updated pods ready",
    );
    check(
        "paused",
        &asts(json!({"paused": true}), st(1, 1, 3)),
        &none,
        Outcome::Paused,
        "paused with 1 of 3",
    );
    check(
        "full",
        &asts(json!({}), st(3, 3, 3)),
        &none,
        Outcome::Complete,
        "asts \"web\" successfully rolled out",
    );
    check(
        "scale-down leftover",
        &asts(json!({}), st(3, 3, 4)),
        &none,
        Outcome::Progressing,
        "1 extra pods",
    );
}

/// apps/v1 StatefulSet, as kubectl's status viewer: all Pods ready, the partition reached,
/// and without a partition the current revision caught up.
#[test]
fn native_statefulset_decisions() {
    let none = PodSummary::default();
    let sts = |strategy: serde_json::Value, status: serde_json::Value| {
        RolloutView::from_json(&json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "default", "generation": 3},
            "spec": {"replicas": 3, "updateStrategy": strategy}, "status": status}))
    };
    let st = |ready: i64, updated: i64, current: &str| {
        json!({"observedGeneration": 3, "replicas": 3, "readyReplicas": ready, "availableReplicas": ready,
               "updatedReplicas": updated, "currentRevision": current, "updateRevision": "db-2"})
    };
    let rolling = json!({"type": "RollingUpdate"});
    let v = sts(rolling.clone(), st(3, 3, "db-2"));
    assert_eq!(v.kind, crate::view::workload::Kind::StatefulSet);
    assert_eq!(v.updated_ready_replicas, None);
    check(
        "done",
        &v,
        &none,
        Outcome::Complete,
        "statefulset \"db\" successfully rolled out",
    );
    check(
        "revision lag",
        &sts(rolling.clone(), st(3, 3, "db-1")),
        &none,
        Outcome::Progressing,
        "current revision is still db-1",
    );
    check(
        "unready old pod",
        &sts(rolling, st(2, 3, "db-2")),
        &none,
        Outcome::Progressing,
        "2 of 3",
    );
    let part = json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}});
    check(
        "partitioned",
        &sts(part.clone(), st(3, 1, "db-1")),
        &none,
        Outcome::Complete,
        "partition 2 keeps 2",
    );
    check(
        "partition waits",
        &sts(part, st(3, 0, "db-1")),
        &none,
        Outcome::Progressing,
        "0 of 1 expected",
    );
    check(
        "OnDelete",
        &sts(json!({"type": "OnDelete"}), st(3, 0, "db-1")),
        &none,
        Outcome::Progressing,
        "only pods you delete",
    );
}

/// DaemonSets count nodes: desired, updated and available scheduled Pods; the Advanced
/// one adds a partition of nodes kept and a pause.
#[test]
fn daemonset_decisions() {
    let none = PodSummary::default();
    let ds = |api: &str, rolling: serde_json::Value, updated: i64, available: i64| {
        RolloutView::from_json(&json!({
            "apiVersion": api, "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default", "generation": 5},
            "spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}},
            "status": {"observedGeneration": 5, "desiredNumberScheduled": 20, "currentNumberScheduled": 20,
                       "numberReady": available, "numberAvailable": available,
                       "updatedNumberScheduled": updated, "daemonSetHash": "6d4b9c"}}))
    };
    let native = ds("apps/v1", json!({}), 20, 20);
    assert_eq!(native.kind, crate::view::workload::Kind::DaemonSet);
    assert_eq!(native.replicas, 20);
    assert_eq!(native.max_unavailable_pods(), 1);
    check(
        "native done",
        &native,
        &none,
        Outcome::Complete,
        "daemonset \"agent\" successfully rolled out",
    );
    check(
        "native updating",
        &ds("apps/v1", json!({}), 12, 19),
        &none,
        Outcome::Progressing,
        "12 of 20 expected",
    );
    check(
        "native unavailable",
        &ds("apps/v1", json!({}), 20, 19),
        &none,
        Outcome::Progressing,
        "19 of 20",
    );
    let ads = |rolling, u, a| ds("apps.kruise.io/v1alpha1", rolling, u, a);
    let part =
        json!({"rollingUpdateType": "InPlaceIfPossible", "partition": 5, "maxUnavailable": 3});
    let v = ads(part.clone(), 15, 20);
    assert_eq!(v.kind, crate::view::workload::Kind::AdvancedDaemonSet);
    assert_eq!(v.update_revision, "6d4b9c");
    assert_eq!(v.max_unavailable_pods(), 3);
    check(
        "ads partitioned",
        &v,
        &none,
        Outcome::Complete,
        "15 of 20 pods updated (partition 5 keeps 5)",
    );
    check(
        "ads moving",
        &ads(part.clone(), 10, 20),
        &none,
        Outcome::Progressing,
        "10 of 15 expected",
    );
    let busy = PodSummary {
        in_place_updating: vec!["agent-x".into()],
        ..Default::default()
    };
    check("ads in place", &v, &busy, Outcome::Progressing, "agent-x");
    check(
        "ads paused",
        &ads(json!({"paused": true}), 10, 20),
        &none,
        Outcome::Paused,
        "10 of 20",
    );
    // Partitioned scaling: partition 15 of 20 nodes leaves 15 nodes without a Pod.
    let held = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default", "generation": 5},
        "spec": {"scaleStrategy": {"partitionedScaling": true},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 15}}},
        "status": {"observedGeneration": 5, "desiredNumberScheduled": 20, "currentNumberScheduled": 5,
                   "numberReady": 5, "numberAvailable": 5, "updatedNumberScheduled": 5,
                   "updateRevision": "6d4b9c"}}));
    check(
        "ads partitioned scaling",
        &held,
        &none,
        Outcome::Complete,
        "5 of 20 nodes have a pod (15 held by partition 15)",
    );
}

/// SidecarSet: done when every matched Pod past the partition runs the latest sidecar.
#[test]
fn sidecarset_decisions() {
    let none = PodSummary::default();
    let sc = |strategy: serde_json::Value, status: serde_json::Value| {
        RolloutView::from_json(&json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "proxy", "generation": 2},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "updateStrategy": strategy,
                     "containers": [{"name": "envoy", "image": "envoy:2"}]},
            "status": status}))
    };
    let st = |matched: i64, updated: i64, updated_ready: i64| {
        json!({"observedGeneration": 2, "matchedPods": matched, "updatedPods": updated,
               "readyPods": matched, "updatedReadyPods": updated_ready, "latestRevision": "abc"})
    };
    let v = sc(json!({}), st(4, 4, 4));
    assert_eq!(v.kind, crate::view::workload::Kind::SidecarSet);
    assert_eq!(v.list_selector().ok(), Some("app=web"));
    check(
        "done",
        &v,
        &none,
        Outcome::Complete,
        "sidecarset \"proxy\" successfully rolled out",
    );
    check(
        "upgrading",
        &sc(json!({}), st(4, 2, 2)),
        &none,
        Outcome::Progressing,
        "2 of 4 expected",
    );
    check(
        "restarting",
        &sc(json!({}), st(4, 4, 3)),
        &none,
        Outcome::Progressing,
        "3 of 4 updated pods ready",
    );
    check(
        "partition",
        &sc(json!({"partition": 1}), st(4, 3, 3)),
        &none,
        Outcome::Complete,
        "partition 1 keeps 1",
    );
    check(
        "paused",
        &sc(json!({"paused": true}), st(4, 1, 1)),
        &none,
        Outcome::Paused,
        "1 of 4",
    );
    let stale = RolloutView {
        observed_generation: 1,
        ..v.clone()
    };
    check(
        "stale",
        &stale,
        &none,
        Outcome::Progressing,
        "observe generation 2",
    );
    assert_eq!(
        v.strategy_patch(json!({"paused": true})),
        json!({"spec": {"updateStrategy": {"paused": true}}})
    );
}

#[test]
fn deployment_decisions() {
    let dep = |status: serde_json::Value| {
        RolloutView::from_json(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "api", "namespace": "default", "generation": 4},
            "spec": {"replicas": 3}, "status": status}))
    };
    let none = PodSummary::default();
    let ok = dep(
        json!({"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
    );
    assert_eq!(decide(&ok, &none).outcome, Outcome::Complete);
    let old = dep(
        json!({"observedGeneration": 4, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
    );
    assert!(
        decide(&old, &none)
            .message
            .contains("1 old pods pending termination")
    );
    let dead = dep(
        json!({"observedGeneration": 4, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
    );
    assert_eq!(decide(&dead, &none).outcome, Outcome::Failed);
}

#[test]
fn exit_codes() {
    assert_eq!(exit_code(Outcome::Complete, false, true), 0);
    assert_eq!(exit_code(Outcome::Paused, false, true), exit::PAUSED);
    assert_eq!(exit_code(Outcome::Paused, true, true), 0);
    assert_eq!(exit_code(Outcome::Failed, true, true), exit::FAILED);
    assert_eq!(exit_code(Outcome::TimedOut, false, true), exit::TIMEOUT);
    assert_eq!(
        exit_code(Outcome::Progressing, false, false),
        exit::PROGRESSING
    );
}

#[test]
fn json_schema_is_stable() {
    let v = cs(json!({"partition": "30%"}), st(2, 7, 7), 2);
    let pods = PodSummary::default();
    let mut r = StatusReport::new(&v, &pods, &decide(&v, &pods));
    r.done = true;
    r.exit_code = Some(0);
    let got = serde_json::to_value(&r).unwrap();
    let want = json!({
        "schemaVersion": 1, "kind": "CloneSet", "apiVersion": "apps.kruise.io/v1beta1",
        "namespace": "default", "name": "web", "outcome": "Complete", "done": true, "exitCode": 0,
        "message": "partitioned rollout complete: 7 of 10 pods updated (partition 30% keeps 3)",
        "generation": 2, "observedGeneration": 2, "replicas": 10, "partition": "30%", "paused": false,
        "expectedUpdatedReplicas": 7, "updatedReplicas": 7, "updatedReadyReplicas": 7,
        "readyReplicas": 10, "availableReplicas": 10, "currentRevision": "web-1", "updateRevision": "web-2",
        "podsUpdatingInPlace": []
    });
    assert_eq!(got, want);
}
