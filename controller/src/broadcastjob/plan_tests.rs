use super::*;
use proptest::prelude::*;
use serde_json::{Value, json};

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("ts")
}

fn job(spec: Value, status: Value) -> BroadcastJob {
    let mut spec = spec;
    if spec.get("template").is_none() {
        spec["template"] = json!({"spec": {"containers": [{"name": "c", "image": "i"}],
            "restartPolicy": "Never"}});
    }
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
        "metadata": {"name": "bj", "namespace": "ns", "uid": "u1"},
        "spec": spec, "status": status,
    }))
    .expect("job")
}

fn node(name: &str, extra: Value) -> Node {
    let mut v = json!({"metadata": {"name": name, "labels": {"pool": "a"}},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}});
    if let Some(spec) = extra.get("spec") {
        v["spec"] = spec.clone();
    }
    if let Some(labels) = extra.get("labels") {
        v["metadata"]["labels"] = labels.clone();
    }
    serde_json::from_value(v).expect("node")
}

fn pod(name: &str, node: &str, phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}],
            "restartPolicy": "Never"},
        "status": {"phase": phase},
    }))
    .expect("pod")
}

fn restarting(name: &str, node: &str, policy: &str, restarts: i32) -> Pod {
    let mut p = pod(name, node, "Running");
    p.spec.as_mut().expect("spec").restart_policy = Some(policy.to_owned());
    p.status.as_mut().expect("status").container_statuses = Some(vec![
        serde_json::from_value(
            json!({"name": "c", "image": "i", "imageID": "", "ready": false,
            "restartCount": restarts}),
        )
        .expect("cs"),
    ]);
    p
}

fn three_nodes() -> Vec<Node> {
    ["n1", "n2", "n3"]
        .iter()
        .map(|n| node(n, json!({})))
        .collect()
}

fn run(j: &BroadcastJob, pods: &[Pod], nodes: &[Node], now: Timestamp) -> Plan {
    let pods: Vec<&Pod> = pods.iter().collect();
    let nodes: Vec<&Node> = nodes.iter().collect();
    match step(j, &pods, &nodes, now).expect("step") {
        Step::Sync(p) => p,
        other => panic!("expected a sync, got {other:?}"),
    }
}

fn reasons(p: &Plan) -> Vec<&'static str> {
    p.events.iter().map(|e| e.reason).collect()
}

#[test]
fn fits_table() {
    let spec = |v: Value| -> PodSpec {
        let mut v = v;
        if v.get("containers").is_none() {
            v["containers"] = json!([{"name": "c", "image": "i"}]);
        }
        serde_json::from_value(v).expect("spec")
    };
    let plain = node("n1", json!({}));
    let tainted = node(
        "n1",
        json!({"spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
    );
    let prefer = node(
        "n1",
        json!({"spec": {"taints": [{"key": "k", "effect": "PreferNoSchedule"}]}}),
    );
    let no_exec = node(
        "n1",
        json!({"spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}}),
    );
    let cordoned = node("n1", json!({"spec": {"unschedulable": true}}));
    let cases: Vec<(&str, PodSpec, &Node, bool, Option<&str>)> = vec![
        ("plain", spec(json!({})), &plain, true, None),
        (
            "selector matches",
            spec(json!({"nodeSelector": {"pool": "a"}})),
            &plain,
            true,
            None,
        ),
        (
            "selector misses",
            spec(json!({"nodeSelector": {"pool": "b"}})),
            &plain,
            true,
            Some("node(s) didn't match Pod's node affinity/selector"),
        ),
        (
            "affinity NotIn",
            spec(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["a"]}]}]}}}}),
            ),
            &plain,
            true,
            Some("node(s) didn't match Pod's node affinity/selector"),
        ),
        (
            "untolerated NoSchedule",
            spec(json!({})),
            &tainted,
            true,
            Some("node(s) had taint {k: v}, that the pod didn't tolerate"),
        ),
        (
            "tolerated NoSchedule",
            spec(json!({"tolerations": [{"key": "k", "operator": "Equal", "value": "v"}]})),
            &tainted,
            true,
            None,
        ),
        (
            "PreferNoSchedule is ignored",
            spec(json!({})),
            &prefer,
            true,
            None,
        ),
        (
            "untolerated NoExecute",
            spec(json!({})),
            &no_exec,
            true,
            Some("node(s) had taint {k: }, that the pod didn't tolerate"),
        ),
        (
            "cordoned",
            spec(json!({})),
            &cordoned,
            true,
            Some("node(s) were unschedulable"),
        ),
        (
            "cordoned, tolerated",
            spec(
                json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable",
            "operator": "Exists", "effect": "NoSchedule"}]}),
            ),
            &cordoned,
            true,
            None,
        ),
        (
            "requests fit",
            spec(json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "1500m", "memory": "4Gi"}}}]})),
            &plain,
            true,
            None,
        ),
        (
            "cpu too big",
            spec(json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "2100m"}}}]})),
            &plain,
            true,
            Some("Insufficient cpu"),
        ),
        (
            "summed over containers",
            spec(json!({"containers": [
            {"name": "a", "image": "i", "resources": {"requests": {"memory": "3Gi"}}},
            {"name": "b", "image": "i", "resources": {"requests": {"memory": "2Gi"}}}]})),
            &plain,
            true,
            Some("Insufficient memory"),
        ),
        (
            "extended resource missing",
            spec(json!({"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"example.com/gpu": "1"}}}]})),
            &plain,
            true,
            Some("Insufficient example.com/gpu"),
        ),
        (
            "bound elsewhere",
            spec(json!({"nodeName": "n9"})),
            &plain,
            true,
            Some("node(s) didn't match the requested node name"),
        ),
        (
            "template nodeName ignored",
            spec(json!({"nodeName": "n9"})),
            &plain,
            false,
            None,
        ),
    ];
    for (what, s, n, check_name, want) in cases {
        let got = fits(&s, n, check_name).err();
        assert_eq!(got.as_deref(), want, "{what}");
    }
}

#[test]
fn fresh_job_creates_a_pod_per_node_and_starts() {
    let j = job(json!({}), json!(null));
    let p = run(&j, &[], &three_nodes(), ts(0));
    assert_eq!(p.create_on, ["n1", "n2", "n3"]);
    assert_eq!(p.status.phase, BroadcastJobPhase::Running);
    assert_eq!((p.status.desired, p.status.active), (3, 3));
    assert_eq!(p.status.start_time, Some(Time(ts(0))));
    assert!(p.delete.is_empty() && p.events.is_empty());
}

#[test]
fn parallelism_caps_pods_in_flight() {
    for (par, running, want) in [
        (json!(2), 0, 2),
        (json!(2), 1, 1),
        (json!(2), 2, 0),
        (json!("50%"), 0, 2), // 1.5 rounds up
        (json!("34%"), 0, 2),
        (json!(0), 0, 0),
    ] {
        let j = job(json!({"parallelism": par}), json!(null));
        let pods: Vec<Pod> = (0..running)
            .map(|i| pod(&format!("p{i}"), &format!("n{}", i + 1), "Running"))
            .collect();
        let p = run(&j, &pods, &three_nodes(), ts(0));
        assert_eq!(
            p.create_on.len(),
            want,
            "parallelism {par} with {running} running"
        );
        assert_eq!(p.status.active, running + want as i32);
        assert!(
            p.create_on
                .iter()
                .all(|n| !pods.iter().any(|x| podutil::node_name(x) == n))
        );
    }
    // More active than allowed: a Warning, no creation.
    let j = job(json!({"parallelism": 1}), json!(null));
    let pods = [pod("a", "n1", "Running"), pod("b", "n2", "Running")];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert!(p.create_on.is_empty());
    assert_eq!(reasons(&p), [keys::BROADCASTJOB_REASON_TOO_MANY_ACTIVE]);
}

#[test]
fn always_completes_when_every_desired_node_is_done() {
    let j = job(
        json!({"completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 30}}),
        json!(null),
    );
    let pods = [
        pod("a", "n1", "Succeeded"),
        pod("b", "n2", "Succeeded"),
        pod("c", "n3", "Running"),
    ];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Running);
    assert!(p.status.conditions.is_empty());
    let pods = [
        pod("a", "n1", "Succeeded"),
        pod("b", "n2", "Succeeded"),
        pod("c", "n3", "Succeeded"),
    ];
    let p = run(&j, &pods, &three_nodes(), ts(5));
    assert_eq!(p.status.phase, BroadcastJobPhase::Completed);
    assert_eq!(
        (p.status.succeeded, p.status.active, p.status.failed),
        (3, 0, 0)
    );
    let c = &p.status.conditions[0];
    assert_eq!(
        (c.type_, c.status.as_str(), c.reason.as_deref()),
        (JobConditionType::Complete, "True", Some("Complete"))
    );
    assert_eq!(
        c.message.as_deref(),
        Some("Job completed, 3 pods succeeded, 0 pods failed")
    );
    assert_eq!(p.status.completion_time, Some(Time(ts(5))));
    assert_eq!(reasons(&p), [keys::BROADCASTJOB_REASON_JOB_COMPLETE]);
    assert_eq!(
        p.events[0].message,
        "Job ns/bj is completed, 3 pods succeeded, 0 pods failed"
    );
    assert_eq!(p.requeue, Some(Duration::from_secs(31)));
    // No node to run on: pending, never complete.
    let p = run(&j, &[], &[], ts(5));
    assert_eq!(
        (p.status.phase, p.status.desired),
        (BroadcastJobPhase::Running, 0)
    );
}

#[test]
fn never_keeps_running_and_serves_new_nodes() {
    let j = job(json!({"completionPolicy": {"type": "Never"}}), json!(null));
    let pods = [pod("a", "n1", "Succeeded"), pod("b", "n2", "Succeeded")];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert_eq!(p.create_on, ["n3"]);
    let pods = [
        pod("a", "n1", "Succeeded"),
        pod("b", "n2", "Succeeded"),
        pod("c", "n3", "Succeeded"),
    ];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Running);
    assert!(p.status.conditions.is_empty() && p.create_on.is_empty());
}

#[test]
fn failfast_fails_the_job_and_deletes_active_pods() {
    let j = job(json!({"failurePolicy": {"type": "FailFast"}}), json!(null));
    let pods = [
        pod("a", "n1", "Failed"),
        pod("b", "n2", "Running"),
        pod("c", "n3", "Succeeded"),
    ];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Failed);
    assert_eq!(p.delete, [("b".to_owned(), true)]);
    assert!(p.create_on.is_empty());
    // Upstream counts the deleted active Pod as failed.
    assert_eq!(
        (p.status.failed, p.status.active, p.status.succeeded),
        (2, 0, 1)
    );
    let c = &p.status.conditions[0];
    assert_eq!(
        (c.type_, c.reason.as_deref()),
        (JobConditionType::Failed, Some("Failed"))
    );
    assert_eq!(
        c.message.as_deref(),
        Some(keys::BROADCASTJOB_MESSAGE_FAILED_POD)
    );
    assert_eq!(reasons(&p), [keys::BROADCASTJOB_REASON_FAILED_POD]);
    assert_eq!(
        p.events[0].message,
        "failure policy is FailurePolicyTypeFailFast and failed pod is found: 1 pods succeeded, 2 pods failed"
    );
    // Default policy is FailFast too.
    let p = run(
        &job(json!({}), json!(null)),
        &pods[..1],
        &three_nodes(),
        ts(0),
    );
    assert_eq!(p.status.phase, BroadcastJobPhase::Failed);
    // A failed Never job stays failed and only counts.
    let j = job(
        json!({"completionPolicy": {"type": "Never"}}),
        json!({"phase": "failed"}),
    );
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert!(p.create_on.is_empty() && p.delete.is_empty() && p.events.is_empty());
    assert_eq!(p.status.phase, BroadcastJobPhase::Failed);
}

#[test]
fn continue_goes_on_past_failures() {
    let j = job(json!({"failurePolicy": {"type": "Continue"}}), json!(null));
    let pods = [pod("a", "n1", "Failed")];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Running);
    assert_eq!(p.create_on, ["n2", "n3"]);
    let pods = [
        pod("a", "n1", "Failed"),
        pod("b", "n2", "Succeeded"),
        pod("c", "n3", "Succeeded"),
    ];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Completed);
    assert_eq!(
        p.status.conditions[0].message.as_deref(),
        Some("Job completed, 2 pods succeeded, 1 pods failed")
    );
}

#[test]
fn pause_policy_stops_new_pods_with_one_event() {
    let j = job(
        json!({"failurePolicy": {"type": "Pause"}, "parallelism": 1}),
        json!(null),
    );
    let pods = [pod("a", "n1", "Failed")];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Paused);
    assert!(p.create_on.is_empty());
    assert_eq!(reasons(&p), [keys::BROADCASTJOB_REASON_PAUSED]);
    // Already paused: no Event again, no Continue.
    let j2 = job(
        json!({"failurePolicy": {"type": "Pause"}, "parallelism": 1}),
        serde_json::to_value(&p.status).expect("st"),
    );
    let p2 = run(&j2, &pods, &three_nodes(), ts(1));
    assert_eq!(p2.status.phase, BroadcastJobPhase::Paused);
    assert!(p2.events.is_empty() && p2.create_on.is_empty());
    // The failed Pod deleted: the job goes on.
    let p3 = run(&j2, &[], &three_nodes(), ts(2));
    assert_eq!(p3.status.phase, BroadcastJobPhase::Running);
    assert_eq!(reasons(&p3), [keys::BROADCASTJOB_REASON_CONTINUE]);
    assert_eq!(p3.create_on, ["n1"]);
}

#[test]
fn paused_spec_stops_and_resumes() {
    let j = job(
        json!({"paused": true}),
        json!({"phase": "running", "startTime": "2023-11-14T22:13:20Z"}),
    );
    let p = run(&j, &[pod("a", "n1", "Running")], &three_nodes(), ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Paused);
    assert_eq!((p.status.active, p.status.desired), (1, 3));
    assert!(p.create_on.is_empty() && p.events.is_empty());
    let j = job(json!({}), json!({"phase": "paused"}));
    let p = run(&j, &[pod("a", "n1", "Running")], &three_nodes(), ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Running);
    assert_eq!(reasons(&p), [keys::BROADCASTJOB_REASON_CONTINUE]);
    assert_eq!(p.create_on, ["n2", "n3"]);
}

#[test]
fn restart_limit_counts_on_failure_restarts() {
    let nodes = three_nodes();
    for (policy, restarts, limit, failed) in [
        ("OnFailure", 3, 2, true),
        ("OnFailure", 3, 3, false),
        ("OnFailure", 1, 0, true),
        ("Never", 9, 0, false),
    ] {
        let j = job(
            json!({"failurePolicy": {"type": "Continue", "restartLimit": limit}}),
            json!(null),
        );
        let pods = [restarting("a", "n1", policy, restarts)];
        let p = run(&j, &pods, &nodes, ts(0));
        assert_eq!(
            p.status.failed == 1,
            failed,
            "{policy} {restarts} > {limit}"
        );
        assert_eq!(p.status.active, if failed { 2 } else { 3 });
    }
    // Under FailFast the over-limit Pod fails the job.
    let j = job(json!({"failurePolicy": {"restartLimit": 1}}), json!(null));
    let p = run(&j, &[restarting("a", "n1", "OnFailure", 2)], &nodes, ts(0));
    assert_eq!(p.status.phase, BroadcastJobPhase::Failed);
}

#[test]
fn active_deadline_fails_an_always_job() {
    let start = json!({"phase": "running", "startTime": "2023-11-14T22:13:20Z"}); // ts(0)
    let j = job(
        json!({"completionPolicy": {"type": "Always", "activeDeadlineSeconds": 60}}),
        start.clone(),
    );
    let pods = [pod("a", "n1", "Running")];
    let p = run(&j, &pods, &three_nodes(), ts(20));
    assert_eq!(p.status.phase, BroadcastJobPhase::Running);
    assert_eq!(p.requeue, Some(Duration::from_secs(40)));
    let p = run(&j, &pods, &three_nodes(), ts(60));
    assert_eq!(p.status.phase, BroadcastJobPhase::Failed);
    assert_eq!(p.delete, [("a".to_owned(), true)]);
    assert_eq!(reasons(&p), [keys::BROADCASTJOB_REASON_DEADLINE_EXCEEDED]);
    assert_eq!(
        p.status.conditions[0].message.as_deref(),
        Some("Job ns/bj was active longer than specified deadline")
    );
}

#[test]
fn finished_job_is_deleted_after_its_ttl() {
    let done = json!({"phase": "completed", "completionTime": "2023-11-14T22:13:20Z",
        "conditions": [{"type": "Complete", "status": "True"}]});
    let j = job(
        json!({"completionPolicy": {"type": "Always", "ttlSecondsAfterFinished": 30}}),
        done.clone(),
    );
    let at = |secs| step(&j, &[], &[], ts(secs)).expect("step");
    assert_eq!(
        at(10),
        Step::Finished {
            delete: false,
            requeue: Some(Duration::from_secs(20))
        }
    );
    assert_eq!(
        at(30),
        Step::Finished {
            delete: true,
            requeue: None
        }
    );
    let keep = job(json!({}), done);
    assert_eq!(
        step(&keep, &[], &[], ts(999)).expect("step"),
        Step::Finished {
            delete: false,
            requeue: None
        }
    );
}

#[test]
fn pods_whose_node_stopped_fitting_are_deleted() {
    let mut nodes = three_nodes();
    nodes[0] = node(
        "n1",
        json!({"spec": {"taints": [{"key": "k", "effect": "NoExecute"}]}}),
    );
    let j = job(json!({"failurePolicy": {"type": "Continue"}}), json!(null));
    let pods = [pod("a", "n1", "Running"), pod("b", "n2", "Running")];
    let p = run(&j, &pods, &nodes, ts(0));
    assert_eq!(p.delete, [("a".to_owned(), true)]);
    assert_eq!(p.status.desired, 2);
    assert_eq!(p.create_on, ["n3"]);
    assert_eq!((p.status.active, p.status.failed), (2, 1));
}

#[test]
fn two_pods_on_one_node_are_reported() {
    let j = job(json!({}), json!(null));
    let pods = [pod("a", "n1", "Running"), pod("b", "n1", "Running")];
    let p = run(&j, &pods, &three_nodes(), ts(0));
    assert_eq!(reasons(&p), [keys::BROADCASTJOB_REASON_DUPLICATE_POD]);
    assert_eq!(p.create_on, ["n2", "n3"]);
}

proptest! {
    /// Whatever the nodes, Pods and parallelism: Pods are only created on fitting nodes that
    /// have none, never more than the parallelism leaves room for, and the status adds up.
    #[test]
    fn creations_respect_fitness_and_parallelism(
        shape in prop::collection::vec((any::<bool>(), 0u8..4), 0..12),
        par in 0i32..8,
        tolerate in any::<bool>(),
    ) {
        let nodes: Vec<Node> = shape.iter().enumerate().map(|(i, (tainted, _))| {
            let name = format!("n{i:02}");
            if *tainted {
                node(&name, json!({"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}))
            } else {
                node(&name, json!({}))
            }
        }).collect();
        let phases = ["", "Running", "Succeeded", "Failed"];
        let pods: Vec<Pod> = shape.iter().enumerate().filter(|(_, (_, ph))| *ph > 0)
            .map(|(i, (_, ph))| {
                let mut p = pod(&format!("p{i}"), &format!("n{i:02}"), phases[*ph as usize]);
                if tolerate {
                    p.spec.as_mut().expect("spec").tolerations =
                        Some(vec![serde_json::from_value(json!({"operator": "Exists"})).expect("t")]);
                }
                p
            })
            .collect();
        let mut spec = json!({"parallelism": par, "failurePolicy": {"type": "Continue"}});
        if tolerate {
            spec["template"] = json!({"spec": {"containers": [{"name": "c", "image": "i"}],
                "restartPolicy": "Never", "tolerations": [{"operator": "Exists"}]}});
        }
        let j = job(spec, json!(null));
        let p = run(&j, &pods, &nodes, ts(0));
        let active_before = pods.iter().filter(|p| podutil::is_active(p)).count() as i32;
        let deleted_active = p.delete.iter().filter(|(_, a)| *a).count() as i32;
        prop_assert!(p.create_on.len() as i32 <= (par - (active_before - deleted_active)).max(0));
        for n in &p.create_on {
            let idx: usize = n[1..].parse().expect("index");
            prop_assert!(tolerate || !shape[idx].0, "created on untolerated {}", n);
            prop_assert!(!pods.iter().any(|x| podutil::node_name(x) == n), "second Pod on {}", n);
        }
        prop_assert_eq!(p.status.active, active_before - deleted_active + p.create_on.len() as i32);
        let fitting = shape.iter().filter(|(t, _)| tolerate || !*t).count() as i32;
        prop_assert_eq!(p.status.desired, fitting);
    }
}
