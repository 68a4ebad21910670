use super::*;
use serde_json::{Value, json};

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("ts")
}

fn job(spec: Value, status: Value) -> EphemeralJob {
    let mut spec = spec;
    if spec.get("selector").is_none() {
        spec["selector"] = json!({"matchLabels": {"app": "a"}});
    }
    if spec.get("template").is_none() {
        spec["template"] = json!({"ephemeralContainers": [{"name": "dbg", "image": "i"}]});
    }
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "EphemeralJob",
        "metadata": {"name": "ej", "namespace": "ns", "uid": "u1"},
        "spec": spec, "status": status,
    }))
    .expect("job")
}

/// A running Pod labelled app=a created at `age` seconds; `eph`: its ephemeral containers,
/// `statuses`: their statuses.
fn pod(name: &str, age: i64, eph: Value, statuses: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "labels": {"app": "a"},
            "creationTimestamp": Time(ts(age))},
        "spec": {"containers": [{"name": "main", "image": "i"}], "ephemeralContainers": eph},
        "status": {"phase": "Running", "ephemeralContainerStatuses": statuses},
    }))
    .expect("pod")
}

fn ours() -> Value {
    json!([{"name": "dbg", "image": "i", "env": [{"name": keys::EPHEMERALJOB_ID_ENV, "value": "u1"}]}])
}

fn st(state: Value) -> Value {
    json!([{"name": "dbg", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
        "state": state}])
}

fn running() -> Value {
    st(json!({"running": {"startedAt": Time(ts(1))}}))
}

fn exited(code: i32) -> Value {
    st(json!({"terminated": {"exitCode": code, "finishedAt": Time(ts(2))}}))
}

#[test]
fn container_states_follow_upstream() {
    let cs = |state: Value| -> ContainerStatus {
        serde_json::from_value(
            json!({"name": "dbg", "image": "i", "imageID": "", "ready": false,
            "restartCount": 0, "state": state}),
        )
        .expect("cs")
    };
    let cases = [
        (
            json!({"terminated": {"exitCode": 0, "finishedAt": Time(ts(1))}}),
            PodState::Succeeded,
        ),
        (
            json!({"terminated": {"exitCode": 128, "reason": "StartError"}}),
            PodState::Failed,
        ),
        (json!({"running": {}}), PodState::Running),
        (
            json!({"waiting": {"reason": "ContainerCreating"}}),
            PodState::Waiting,
        ),
        (
            json!({"waiting": {"reason": "RunContainerError"}}),
            PodState::Failed,
        ),
        (json!({}), PodState::Unknown),
    ];
    for (state, want) in cases {
        assert_eq!(container_state(&cs(state.clone())), want, "{state}");
    }
}

#[test]
fn targets_are_selected_active_oldest_first_capped_by_replicas() {
    let j = job(json!({"replicas": 2}), json!(null));
    let old = pod("old", 1, json!(null), json!(null));
    let mid = pod("mid", 2, json!(null), json!(null));
    let new = pod("new", 3, json!(null), json!(null));
    let mut other = pod("other", 0, json!(null), json!(null));
    other.metadata.labels = Some([("app".to_owned(), "b".to_owned())].into());
    let mut done = pod("done", 0, json!(null), json!(null));
    done.status.as_mut().expect("status").phase = Some("Succeeded".into());
    let mut elsewhere = pod("elsewhere", 0, json!(null), json!(null));
    elsewhere.metadata.namespace = Some("other".into());
    let pods = [&new, &other, &done, &mid, &elsewhere, &old];
    let t = targets(&j, &pods);
    let names: Vec<&str> = t.pods.iter().map(|p| podutil::name(p)).collect();
    assert_eq!(names, ["old", "mid"]);
    assert!(t.conflicts.is_empty());
}

#[test]
fn a_name_taken_by_another_container_is_a_conflict_not_a_target() {
    let j = job(
        json!({"template": {"ephemeralContainers": [{"name": "main", "image": "i"}]}}),
        json!(null),
    );
    let p = pod("p", 1, json!(null), json!(null));
    let t = targets(&j, &[&p]);
    assert!(t.pods.is_empty());
    assert_eq!(
        t.conflicts,
        [Conflict {
            pod: "p".into(),
            container: "main".into(),
            list: "containers"
        }]
    );
    // Another job's ephemeral container of the same name (upstream `existDuplicatedEphemeralContainer`).
    let j = job(json!({}), json!(null));
    let theirs = json!([{"name": "dbg", "image": "i", "env": [{"name": keys::EPHEMERALJOB_ID_ENV, "value": "u2"}]}]);
    let p = pod("p", 1, theirs, json!(null));
    let t = targets(&j, &[&p]);
    assert_eq!(t.conflicts[0].list, "ephemeralContainers");
    // Our own container is no conflict.
    let p = pod("p", 1, ours(), running());
    assert_eq!(targets(&j, &[&p]).pods.len(), 1);
}

#[test]
fn parallelism_caps_injected_containers_not_yet_ended() {
    let j = job(json!({"parallelism": 2}), json!(null));
    let a = pod(
        "a",
        1,
        ours(),
        st(json!({"waiting": {"reason": "PodInitializing"}})),
    );
    let b = pod("b", 2, json!(null), json!(null));
    let c = pod("c", 3, json!(null), json!(null));
    let d = pod("d", 4, json!(null), json!(null));
    let p = plan(&j, &[&a, &b, &c, &d], ts(10));
    assert_eq!(
        p.inject,
        ["b"],
        "a waiting container counts against parallelism"
    );
    let a = pod("a", 1, ours(), exited(0));
    let p = plan(&j, &[&a, &b, &c, &d], ts(10));
    assert_eq!(p.inject, ["b", "c"]);
    // Unset: one at a time.
    let j = job(json!({}), json!(null));
    assert_eq!(plan(&j, &[&a, &b, &c, &d], ts(10)).inject, ["b"]);
}

#[test]
fn phases_follow_the_targets() {
    let j = job(json!({}), json!(null));
    let ok = pod("ok", 1, ours(), exited(0));
    let bad = pod("bad", 2, ours(), exited(1));
    let run = pod("run", 3, ours(), running());
    let fresh = pod("fresh", 4, json!(null), json!(null));

    let p = plan(&j, &[], ts(10));
    assert_eq!(p.status.phase, EphemeralJobPhase::Waiting);
    assert!(
        p.status
            .conditions
            .iter()
            .any(|c| c.type_ == Cond::MatchedEmpty)
    );
    assert_eq!(p.status.start_time, Some(Time(ts(10))));
    assert_eq!(p.status.conditions[0].type_, Cond::Initialized);

    let p = plan(&j, &[&ok, &run, &fresh], ts(10));
    assert_eq!(p.status.phase, EphemeralJobPhase::Running);
    assert_eq!(
        (
            p.status.matches,
            p.status.succeeded,
            p.status.running,
            p.status.waiting,
            p.status.failed
        ),
        (3, 1, 1, 0, 0)
    );
    assert!(p.inject.is_empty(), "one in flight at parallelism 1");
    assert_eq!(p.status.completion_time, None);

    let p = plan(&j, &[&ok], ts(10));
    assert_eq!(p.status.phase, EphemeralJobPhase::Succeeded);
    assert_eq!(p.status.completion_time, Some(Time(ts(10))));

    let p = plan(&j, &[&ok, &bad], ts(10));
    assert_eq!(p.status.phase, EphemeralJobPhase::Failed);
    assert!(p.status.completion_time.is_some());
    let failed = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == Cond::JobFailed)
        .expect("JobFailed");
    assert_eq!(failed.reason.as_deref(), Some(reasons::CREATE_FAILED));

    let p = plan(&j, &[&fresh], ts(10));
    assert_eq!(p.status.phase, EphemeralJobPhase::Unknown);
    assert_eq!(p.inject, ["fresh"]);
}

#[test]
fn paused_injects_nothing_and_says_so() {
    let j = job(json!({"paused": true}), json!(null));
    let fresh = pod("fresh", 1, json!(null), json!(null));
    let p = plan(&j, &[&fresh], ts(10));
    assert_eq!(p.status.phase, EphemeralJobPhase::Paused);
    assert!(p.inject.is_empty());
}

#[test]
fn the_deadline_fails_an_unfinished_job() {
    let started = json!({"startTime": Time(ts(0)), "phase": "Running"});
    let j = job(json!({"activeDeadlineSeconds": 20}), started);
    let run = pod("run", 1, ours(), running());
    let p = plan(&j, &[&run], ts(5));
    assert_eq!(p.status.phase, EphemeralJobPhase::Running);
    assert_eq!(p.requeue, Some(Duration::from_secs(15)));
    let p = plan(&j, &[&run], ts(20));
    assert_eq!(p.status.phase, EphemeralJobPhase::Failed);
    assert_eq!(p.status.completion_time, Some(Time(ts(20))));
    let c = p
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == Cond::JobFailed)
        .expect("JobFailed");
    assert_eq!(c.reason.as_deref(), Some(reasons::DEADLINE_EXCEEDED));
    assert_eq!(
        c.message.as_deref(),
        Some("EphemeralJob ns/ej was active longer than specified deadline")
    );
    assert!(p.inject.is_empty());
}

#[test]
fn conditions_keep_their_time_while_unchanged() {
    let j = job(json!({}), json!(null));
    let first = plan(&j, &[], ts(10)).status;
    let j = job(json!({}), serde_json::to_value(&first).expect("status"));
    let again = plan(&j, &[], ts(20)).status;
    assert_eq!(first, again, "a second reconcile writes nothing");
}

#[test]
fn ttl_counts_from_completion_with_upstream_default() {
    let j = job(json!({"ttlSecondsAfterFinished": 5}), json!(null));
    assert_eq!(ttl(&j, ts(0), ts(2)), Ttl::Wait(Duration::from_secs(3)));
    assert_eq!(ttl(&j, ts(0), ts(5)), Ttl::Delete);
    let j = job(json!({}), json!(null));
    assert_eq!(ttl(&j, ts(0), ts(0)), Ttl::Wait(Duration::from_secs(1800)));
}

#[test]
fn an_empty_template_is_an_error() {
    let j = job(
        json!({"template": {"ephemeralContainers": []}}),
        json!(null),
    );
    let fresh = pod("fresh", 1, json!(null), json!(null));
    let p = plan(&j, &[&fresh], ts(1));
    assert_eq!(p.status.phase, EphemeralJobPhase::Error);
    assert!(p.inject.is_empty());
}
