use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{PersistentPodState, PodState};
use serde_json::json;

use super::plan::{Workload, next_status, pods_to_record, state_of};

fn pps(retention: Option<&str>, states: &[(&str, &str)]) -> PersistentPodState {
    let pod_states: BTreeMap<_, _> = states
        .iter()
        .map(|(pod, node)| {
            (
                pod.to_string(),
                json!({"nodeName": node, "nodeTopologyLabels": {"kubernetes.io/hostname": node}}),
            )
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
        "metadata": {"name": "web", "namespace": "ns", "generation": 3},
        "spec": {
            "targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "web"},
            "requiredPersistentTopology": {"nodeTopologyKeys": ["kubernetes.io/hostname"]},
            "persistentPodAnnotations": [{"key": "ip"}],
            "persistentPodStateRetentionPolicy": retention,
        },
        "status": {"observedGeneration": 1, "podStates": pod_states},
    }))
    .expect("pps")
}

fn pod(name: &str, node: &str, ready: bool) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "annotations": {"ip": "10.0.0.1", "other": "x"}},
            "spec": {"containers": [], "nodeName": node},
            "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        }))
        .expect("pod"),
    )
}

fn workload(replicas: i32) -> Workload {
    Workload {
        uid: "u".into(),
        replicas,
        start: 0,
        reserved: Vec::new(),
    }
}

#[test]
fn only_ready_pods_with_a_missing_or_moved_state_are_recorded() {
    let p = pps(None, &[("web-0", "n1"), ("web-1", "n1")]);
    let pods = vec![
        pod("web-0", "n1", true),  // recorded, but its annotation is not yet
        pod("web-1", "n2", true),  // moved
        pod("web-2", "n1", false), // not ready
        pod("web-3", "n1", true),  // new
    ];
    let names: Vec<_> = pods_to_record(&p, &pods)
        .into_iter()
        .map(|(p, n)| (p.metadata.name.clone().unwrap_or_default(), n))
        .collect();
    assert_eq!(
        names,
        vec![
            ("web-0".to_owned(), "n1"),
            ("web-1".to_owned(), "n2"),
            ("web-3".to_owned(), "n1")
        ]
    );
    // Once recorded with its annotation, web-0 is current.
    let labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_owned(), "n1".to_owned()),
        ("unrelated".to_owned(), "x".to_owned()),
    ]);
    let state = state_of(&p.spec, &pods[0], "n1", &labels);
    assert_eq!(
        state,
        PodState {
            node_name: "n1".into(),
            node_topology_labels: BTreeMap::from([(
                "kubernetes.io/hostname".to_owned(),
                "n1".to_owned()
            )]),
            annotations: BTreeMap::from([("ip".to_owned(), "10.0.0.1".to_owned())]),
        }
    );
    let mut p2 = p.clone();
    p2.status = Some(next_status(
        &p,
        Some(&workload(4)),
        &pods,
        BTreeMap::from([("web-0".to_owned(), state)]),
    ));
    assert!(pods_to_record(&p2, &pods[..1]).is_empty());
}

#[test]
fn scaled_away_states_are_dropped_when_scaled_and_kept_when_deleted() {
    let states = [("web-0", "n1"), ("web-1", "n1"), ("web-2", "n1")];
    // Scaled to 1; web-2's Pod still exists (being deleted): kept until it is gone.
    let pods = vec![pod("web-0", "n1", true), pod("web-2", "n1", true)];
    let s = next_status(
        &pps(None, &states),
        Some(&workload(1)),
        &pods,
        BTreeMap::new(),
    );
    assert_eq!(s.observed_generation, 3);
    assert_eq!(
        s.pod_states.keys().collect::<Vec<_>>(),
        vec!["web-0", "web-2"]
    );
    let s = next_status(
        &pps(Some("WhenDeleted"), &states),
        Some(&workload(1)),
        &pods,
        BTreeMap::new(),
    );
    assert_eq!(s.pod_states.len(), 3);
    // The workload gone: nothing kept, whatever the policy.
    let s = next_status(
        &pps(Some("WhenDeleted"), &states),
        None,
        &pods,
        BTreeMap::new(),
    );
    assert!(s.pod_states.is_empty());
}

#[test]
fn a_generated_spec_is_rewritten_only_when_its_annotations_change() {
    use super::plan::{generation_keys, regenerate};
    use kruise_api::keys;
    let mut ann = BTreeMap::from([
        (
            keys::PPS_AUTO_GENERATE_ANNOTATION.to_owned(),
            "true".to_owned(),
        ),
        (
            keys::PPS_REQUIRED_TOPOLOGY_ANNOTATION.to_owned(),
            "kubernetes.io/os".to_owned(),
        ),
        ("unrelated".to_owned(), "1".to_owned()),
    ]);
    let first = generation_keys(&ann);
    assert!(regenerate(None, &first), "first seen since start");
    assert!(!regenerate(Some(&first), &first));
    // Another annotation (or any other change of the StatefulSet) is no reason.
    ann.insert("unrelated".to_owned(), "2".to_owned());
    assert!(!regenerate(Some(&first), &generation_keys(&ann)));
    for key in [
        keys::PPS_AUTO_GENERATE_ANNOTATION,
        keys::PPS_REQUIRED_TOPOLOGY_ANNOTATION,
        keys::PPS_PREFERRED_TOPOLOGY_ANNOTATION,
        keys::PPS_PERSISTENT_POD_ANNOTATIONS_ANNOTATION,
    ] {
        let mut changed = ann.clone();
        changed.insert(key.to_owned(), "x".to_owned());
        assert!(
            regenerate(Some(&first), &generation_keys(&changed)),
            "{key}"
        );
    }
    ann.remove(keys::PPS_REQUIRED_TOPOLOGY_ANNOTATION);
    assert!(regenerate(Some(&first), &generation_keys(&ann)), "removed");
}
