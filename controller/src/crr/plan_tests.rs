use super::*;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, PodCondition, PodReadinessGate,
    PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kruise_api::apps::v1beta1::{
    ContainerRecreateRequestContainer, ContainerRecreateRequestContainerContext,
    ContainerRecreateRequestSpec, ContainerRecreateRequestStatus, ContainerRecreateRequestStrategy,
};
use kruise_api::appspub::kruise_pod_ready_condition;

const T0: i64 = 1_700_000_000;

fn ts(s: i64) -> Timestamp {
    Timestamp::from_second(s).expect("ts")
}

fn crr() -> ContainerRecreateRequest {
    let mut c = ContainerRecreateRequest::new(
        "r",
        ContainerRecreateRequestSpec {
            pod_name: "p".into(),
            containers: vec![ContainerRecreateRequestContainer {
                name: "a".into(),
                status_context: Some(ContainerRecreateRequestContainerContext {
                    container_id: "containerd://a1".into(),
                    restart_count: 0,
                }),
                ..Default::default()
            }],
            strategy: Some(ContainerRecreateRequestStrategy::default()),
            ..Default::default()
        },
    );
    c.metadata.namespace = Some("ns".into());
    c.metadata.creation_timestamp = Some(Time(ts(T0)));
    c.metadata.labels = Some(
        [
            (keys::CRR_POD_UID_LABEL.to_string(), "pu".to_string()),
            (keys::CRR_NODE_NAME_LABEL.to_string(), "n1".to_string()),
            (keys::CRR_ACTIVE_LABEL.to_string(), "true".to_string()),
        ]
        .into(),
    );
    c
}

fn phase(
    mut c: ContainerRecreateRequest,
    p: ContainerRecreateRequestPhase,
) -> ContainerRecreateRequest {
    c.status = Some(ContainerRecreateRequestStatus {
        phase: p,
        ..Default::default()
    });
    c
}

fn completed(mut c: ContainerRecreateRequest, at: i64) -> ContainerRecreateRequest {
    c = phase(c, ContainerRecreateRequestPhase::Completed);
    c.status.as_mut().expect("status").completion_time = Some(Time(ts(at)));
    c
}

fn pod(started: Option<(i64, &str, bool)>) -> Pod {
    let mut p = Pod {
        spec: Some(PodSpec {
            node_name: Some("n1".into()),
            containers: vec![k8s_openapi::api::core::v1::Container {
                name: "a".into(),
                ..Default::default()
            }],
            readiness_gates: Some(vec![PodReadinessGate {
                condition_type: keys::KRUISE_POD_READY.into(),
            }]),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "a".into(),
                container_id: Some(started.map_or("containerd://a1", |s| s.1).into()),
                ready: started.is_some_and(|s| s.2),
                restart_count: started.map_or(0, |_| 1),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(ts(started.map_or(T0 - 100, |s| s.0)))),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    p.metadata.uid = Some("pu".into());
    p
}

fn name(s: &Step) -> String {
    match s {
        Step::Admit(_) => "Admit".into(),
        Step::Recreating {
            snapshot,
            acquire_unready,
            requeue,
        } => format!(
            "Recreating snapshot={} acquire={acquire_unready} requeue={}",
            snapshot
                .as_ref()
                .map_or("-".to_string(), |s| s.len().to_string()),
            requeue.as_secs()
        ),
        other => format!("{other:?}"),
    }
}

#[test]
fn next_step_table() {
    let live = pod(None);
    let mut other_uid = pod(None);
    other_uid.metadata.uid = Some("other".into());
    let mut deleting_pod = pod(None);
    deleting_pod.metadata.deletion_timestamp = Some(Time(ts(T0)));
    let restarted = pod(Some((T0 + 5, "containerd://a2", true)));

    let mut with_fin = completed(crr(), T0 + 10);
    with_fin.metadata.finalizers = Some(vec![keys::CRR_UNREADY_ACQUIRED_FINALIZER.into()]);
    let mut deleted = crr();
    deleted.metadata.deletion_timestamp = Some(Time(ts(T0)));
    let mut inactive_done = completed(crr(), T0 + 10);
    inactive_done.labels_mut().remove(keys::CRR_ACTIVE_LABEL);
    let mut ttl_done = inactive_done.clone();
    ttl_done.spec.ttl_seconds_after_finished = Some(60);
    let mut unadmitted = crr();
    unadmitted.metadata.labels = None;
    unadmitted.spec.containers[0].status_context = None;
    let mut deadline = crr();
    deadline.spec.active_deadline_seconds = Some(30);
    let mut grace = phase(crr(), ContainerRecreateRequestPhase::Recreating);
    grace
        .spec
        .strategy
        .as_mut()
        .expect("s")
        .unready_grace_period_seconds = Some(10);
    let mut grace_acked = grace.clone();
    grace_acked.status.as_mut().expect("st").conditions = vec![Condition {
        type_: keys::CRR_CONDITION_PRE_RECREATE_GRACE.into(),
        status: "True".into(),
        last_transition_time: Time(ts(T0)),
        message: String::new(),
        reason: GRACE_REASON.into(),
        observed_generation: None,
    }];
    let mut snap_done = phase(crr(), ContainerRecreateRequestPhase::Recreating);
    snap_done
        .status
        .as_mut()
        .expect("st")
        .container_status_snapshot = snapshot(&snap_done, &restarted, ts(T0));

    type Case<'a> = (
        &'a str,
        ContainerRecreateRequest,
        Option<&'a Pod>,
        i64,
        &'a str,
    );
    let cases: Vec<Case> = vec![
        (
            "completed with finalizer",
            with_fin.clone(),
            Some(&live),
            T0 + 20,
            "Release { remove_key: true }",
        ),
        (
            "completed with finalizer, pod gone",
            with_fin,
            None,
            T0 + 20,
            "Release { remove_key: false }",
        ),
        ("deleted", deleted, Some(&live), T0, "Wait(None)"),
        (
            "completed, still active",
            completed(crr(), T0 + 10),
            Some(&live),
            T0 + 20,
            "DropActiveLabel",
        ),
        (
            "completed, no ttl",
            inactive_done,
            Some(&live),
            T0 + 9999,
            "Wait(None)",
        ),
        (
            "ttl pending",
            ttl_done.clone(),
            None,
            T0 + 40,
            "Wait(Some(30s))",
        ),
        ("ttl passed", ttl_done, None, T0 + 70, "Delete"),
        ("not admitted", unadmitted.clone(), Some(&live), T0, "Admit"),
        (
            "not admitted, no pod",
            unadmitted,
            None,
            T0,
            r#"Complete("spec.podName: Not found: Pod \"p\" not found in namespace \"ns\"")"#,
        ),
        ("pod gone", crr(), None, T0, "Complete(\"pod has gone\")"),
        (
            "pod deleting",
            crr(),
            Some(&deleting_pod),
            T0,
            "Complete(\"pod has gone\")",
        ),
        (
            "pod recreated",
            crr(),
            Some(&other_uid),
            T0,
            "Complete(\"pod has gone\")",
        ),
        (
            "daemon silent, waiting",
            crr(),
            Some(&live),
            T0 + 20,
            "Wait(Some(40s))",
        ),
        (
            "daemon silent too long",
            crr(),
            Some(&live),
            T0 + 60,
            "Complete(\"daemon has not responded for a long time\")",
        ),
        (
            "deadline pending",
            phase(deadline.clone(), ContainerRecreateRequestPhase::Pending),
            Some(&live),
            T0 + 20,
            "Wait(Some(10s))",
        ),
        (
            "deadline passed",
            phase(deadline, ContainerRecreateRequestPhase::Recreating),
            Some(&live),
            T0 + 30,
            "Complete(\"recreating has exceeded the activeDeadlineSeconds\")",
        ),
        (
            "recreating, old container",
            phase(crr(), ContainerRecreateRequestPhase::Recreating),
            Some(&live),
            T0 + 1,
            "Recreating snapshot=- acquire=false requeue=3",
        ),
        (
            "recreating, new container",
            phase(crr(), ContainerRecreateRequestPhase::Recreating),
            Some(&restarted),
            T0 + 6,
            "Recreating snapshot=1 acquire=false requeue=3",
        ),
        (
            "recreating, snapshot current",
            snap_done.clone(),
            Some(&restarted),
            T0 + 6,
            "Recreating snapshot=- acquire=false requeue=3",
        ),
        (
            "recreating, never overwrite with empty",
            snap_done,
            Some(&live),
            T0 + 6,
            "Recreating snapshot=- acquire=false requeue=3",
        ),
        (
            "unready grace wanted",
            grace,
            Some(&live),
            T0 + 1,
            "Recreating snapshot=- acquire=true requeue=3",
        ),
        (
            "unready grace acknowledged",
            grace_acked,
            Some(&live),
            T0 + 1,
            "Recreating snapshot=- acquire=false requeue=3",
        ),
    ];
    for (what, c, p, now, want) in cases {
        assert_eq!(name(&next_step(&c, p, ts(now))), want, "{what}");
    }
}

#[test]
fn snapshot_takes_only_new_containers() {
    let c = crr();
    assert!(snapshot(&c, &pod(None), ts(T0)).is_empty());
    let s = snapshot(&c, &pod(Some((T0 + 5, "containerd://a2", true))), ts(T0));
    assert_eq!(
        s,
        vec![ContainerRecreateRequestSyncContainerStatus {
            name: "a".into(),
            ready: true,
            restart_count: 1,
            container_id: "containerd://a2".into(),
        }]
    );
}

#[test]
fn readiness_key_add_and_remove() {
    let c = crr();
    let key = readiness_key(&c);
    assert_eq!(key.user_agent, keys::READINESS_USER_AGENT_CRR);
    assert_eq!(key.key, "ns/r");
    let mut p = pod(None);
    // No condition yet: adding creates it False.
    let cond = kruise_pod_ready_condition(&p, &key, true, ts(T0))
        .expect("ok")
        .expect("changed");
    assert_eq!(cond.status, "False");
    assert_eq!(
        cond.message.as_deref(),
        Some(r#"[{"userAgent":"ContainerRecreateRequest","key":"ns/r"}]"#)
    );
    p.status.as_mut().expect("st").conditions = Some(vec![cond]);
    assert_eq!(
        kruise_pod_ready_condition(&p, &key, true, ts(T0)).expect("ok"),
        None
    );
    // Another writer holds a key too: removing ours keeps it False.
    let other = PodReadinessMessage::new(
        keys::READINESS_USER_AGENT_LIFECYCLE,
        keys::READINESS_KEY_PRE_UPDATE_HOOK,
    );
    let both = kruise_pod_ready_condition(&p, &other, true, ts(T0))
        .expect("ok")
        .expect("changed");
    p.status.as_mut().expect("st").conditions = Some(vec![both]);
    let after = kruise_pod_ready_condition(&p, &key, false, ts(T0 + 1))
        .expect("ok")
        .expect("changed");
    assert_eq!(after.status, "False");
    p.status.as_mut().expect("st").conditions = Some(vec![after]);
    let last = kruise_pod_ready_condition(&p, &other, false, ts(T0 + 2))
        .expect("ok")
        .expect("changed");
    assert_eq!(
        (last.status.as_str(), last.message.as_deref()),
        ("True", Some("[]"))
    );
    // Removing a key that is not there changes nothing.
    p.status.as_mut().expect("st").conditions = Some(vec![last]);
    assert_eq!(
        kruise_pod_ready_condition(&p, &key, false, ts(T0)).expect("ok"),
        None
    );
}

/// Upstream's `addNotReadyKey` writes nothing when the key is already listed, even on a True
/// condition; the old CRR copy flipped such a condition to False.
#[test]
fn held_key_on_a_true_condition_writes_nothing() {
    let c = crr();
    let key = readiness_key(&c);
    let mut p = pod(None);
    p.status.as_mut().expect("st").conditions = Some(vec![PodCondition {
        type_: keys::KRUISE_POD_READY.into(),
        status: k8s::CONDITION_TRUE.into(),
        message: Some(kruise_api::appspub::dump_readiness_messages(
            std::slice::from_ref(&key),
        )),
        ..Default::default()
    }]);
    assert_eq!(
        kruise_pod_ready_condition(&p, &key, true, ts(T0)).expect("ok"),
        None
    );
    // Without the KruisePodReady gate there is nothing to hold.
    p.spec.as_mut().expect("spec").readiness_gates = None;
    assert_eq!(
        kruise_pod_ready_condition(&p, &key, true, ts(T0)).expect("ok"),
        None
    );
}
