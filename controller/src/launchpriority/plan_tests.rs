use super::*;
use k8s_openapi::api::core::v1::Container;
use kruise_api::keys;
use serde_json::{Value, json};

fn container(name: &str, key: Option<&str>) -> Value {
    let env = match key {
        Some(k) => json!([{"name": keys::ENV_CONTAINER_BARRIER, "valueFrom":
            {"configMapKeyRef": {"name": "p-barrier", "key": k}}}]),
        None => json!([]),
    };
    json!({"name": name, "image": "i", "env": env})
}

fn pod(containers: Value, ready: &[&str], annotations: Value, cond: Option<&str>) -> Pod {
    let statuses: Vec<Value> = containers
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let n = c["name"].as_str().unwrap_or_default();
            json!({"name": n, "ready": ready.contains(&n), "restartCount": 0,
                "image": "i", "imageID": ""})
        })
        .collect();
    let conditions = match cond {
        Some(s) => json!([{"type": k8s::CONTAINERS_READY, "status": s}]),
        None => json!([]),
    };
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": {"containers": containers},
        "status": {"containerStatuses": statuses, "conditions": conditions}
    }))
    .expect("pod")
}

fn two() -> Value {
    json!([
        container("app", Some("p_10")),
        container("sidecar", Some("p_1"))
    ])
}

#[test]
fn names() {
    assert_eq!(barrier_name("web-abcde"), "web-abcde-barrier");
    assert_eq!(barrier_key(-2), "p_-2");
}

/// The priority is read as upstream's `GetContainerPriority` does (see
/// `kruise_api::appspub::launch_priority`): a barrier key that does not parse counts as 0
/// instead of being ignored, so the pod is still released.
#[test]
fn priority_from_the_barrier_key() {
    let c: Container = serde_json::from_value(container("a", Some("p_-3"))).expect("c");
    assert_eq!(barrier_priority(&c), Some(-3));
    let c: Container = serde_json::from_value(container("a", Some("x_1"))).expect("c");
    assert_eq!(barrier_priority(&c), Some(1));
    let c: Container = serde_json::from_value(container("a", Some("p_x"))).expect("c");
    assert_eq!(barrier_priority(&c), Some(0));
    let c: Container = serde_json::from_value(container("a", None)).expect("c");
    assert_eq!(barrier_priority(&c), None);
    let bad = json!([
        container("app", Some("p_10")),
        container("odd", Some("p_x"))
    ]);
    assert_eq!(pending_priorities(&pod(bad, &[], json!({}), None)), [0, 10]);
}

#[test]
fn pending_skips_ready_and_unbarriered_containers() {
    let cs = json!([
        container("app", Some("p_10")),
        container("sidecar", Some("p_1")),
        container("plain", None)
    ]);
    assert_eq!(
        pending_priorities(&pod(cs.clone(), &[], json!({}), None)),
        [1, 10]
    );
    assert_eq!(pending_priorities(&pod(cs, &["app"], json!({}), None)), [1]);
}

#[test]
fn reconcile_filter() {
    assert!(wants_reconcile(&pod(two(), &[], json!({}), Some("False"))));
    assert!(!wants_reconcile(&pod(two(), &[], json!({}), Some("True"))));
    let done = json!({keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED_ANNOTATION: "true"});
    assert!(!wants_reconcile(&pod(two(), &[], done, None)));
    assert!(!wants_reconcile(&pod(
        two(),
        &["app", "sidecar"],
        json!({}),
        None
    )));
    let plain = json!([container("a", None), container("b", None)]);
    assert!(!wants_reconcile(&pod(plain, &[], json!({}), None)));
}

#[test]
fn releases_highest_first_then_completes() {
    let has = |keys: &'static [&'static str]| move |k: &str| keys.contains(&k);
    assert_eq!(
        next_step(&[1, 10], has(&[])),
        Step::Release {
            key: "p_10".into(),
            then_complete: false
        }
    );
    assert_eq!(next_step(&[1, 10], has(&["p_10"])), Step::Wait);
    // app became ready: only the sidecar waits, and releasing it is the last step.
    assert_eq!(
        next_step(&[1], has(&["p_10"])),
        Step::Release {
            key: "p_1".into(),
            then_complete: true
        }
    );
    assert_eq!(next_step(&[1], has(&["p_10", "p_1"])), Step::Complete);
    assert_eq!(next_step(&[], has(&[])), Step::Complete);
}

#[test]
fn equal_priorities_release_together() {
    let none = |_: &str| false;
    assert_eq!(
        next_step(&[5, 5], none),
        Step::Release {
            key: "p_5".into(),
            then_complete: true
        }
    );
}
