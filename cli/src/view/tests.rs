use super::*;

#[test]
fn image_normalisation() {
    assert_eq!(normalize_image("nginx"), "docker.io/library/nginx:latest");
    assert_eq!(
        normalize_image("nginx:1.25"),
        "docker.io/library/nginx:1.25"
    );
    assert_eq!(
        normalize_image("bitnami/nginx:1"),
        "docker.io/bitnami/nginx:1"
    );
    assert_eq!(
        normalize_image("127.0.0.1:5000/busybox"),
        "127.0.0.1:5000/busybox:latest"
    );
    assert_eq!(normalize_image("localhost/x:2"), "localhost/x:2");
    assert_eq!(
        normalize_image("ghcr.io/a/b@sha256:ab"),
        "ghcr.io/a/b@sha256:ab"
    );
}

#[test]
fn v1alpha1_and_v1beta1_read_the_same() {
    let alpha = json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "ns", "generation": 3},
        "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
                 "updateStrategy": {"type": "InPlaceIfPossible", "partition": "30%", "paused": true, "maxUnavailable": 2}},
        "status": {"observedGeneration": 3, "updatedReplicas": 7, "updatedReadyReplicas": 6,
                   "updateRevision": "web-2", "currentRevision": "web-1"}
    });
    let beta = json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "ns", "generation": 3},
        "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": "30%", "paused": true, "maxUnavailable": 2}}},
        "status": {"observedGeneration": 3, "updatedReplicas": 7, "updatedReadyReplicas": 6,
                   "updateRevision": "web-2", "currentRevision": "web-1"}
    });
    let a = RolloutView::from_json(&alpha);
    let b = RolloutView::from_json(&beta);
    assert_eq!(a.layout, Layout::Flat);
    assert_eq!(b.layout, Layout::Nested);
    for v in [&a, &b] {
        assert_eq!(v.pod_update_policy, "InPlaceIfPossible");
        assert!(v.paused);
        assert_eq!(v.expected_updated(), 7);
        assert_eq!(v.max_unavailable_pods(), 2);
        assert_eq!(v.list_selector().ok(), Some("app=web"));
    }
    assert_eq!(
        a.paused_patch(false),
        json!({"spec": {"updateStrategy": {"paused": false}}})
    );
    assert_eq!(
        b.paused_patch(false),
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": false}}}})
    );
}

/// Kubernetes' string form (upstream `LabelSelectorAsSelector(...).String()`): every
/// requirement sorted by key, values sorted; an unknown operator leaves no selector rather
/// than a broader one (the copy this replaced dropped the requirement).
#[test]
fn selector_string_table() {
    let cases: Vec<(Value, Option<&str>)> = vec![
        (Value::Null, Some("")),
        (json!({}), Some("")),
        (
            json!({"matchLabels": {"tier": "1", "app": "web"}}),
            Some("app=web,tier=1"),
        ),
        (
            json!({"matchLabels": {"zone": "a"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["2", "1"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "app", "operator": "Exists"},
                {"key": "old", "operator": "DoesNotExist"},
            ]}),
            Some("app,env notin (prod),!old,tier in (1,2),zone=a"),
        ),
        (
            json!({"matchLabels": {"app": "web"}, "matchExpressions": [
                {"key": "x", "operator": "Bogus", "values": ["1"]},
            ]}),
            None,
        ),
        (json!({"matchLabels": {"app": 1}}), None),
    ];
    for (sel, want) in cases {
        let got = selector_string((!sel.is_null()).then_some(&sel));
        assert_eq!(got.as_deref(), want, "{sel}");
    }
}

#[test]
fn list_selector_prefers_status_and_refuses_unknown_operators() {
    let obj = |status: Value| {
        json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Is"}]}},
            "status": status,
        })
    };
    let written = RolloutView::from_json(&obj(json!({"labelSelector": "app=web"})));
    assert_eq!(written.list_selector().ok(), Some("app=web"));
    let unwritten = RolloutView::from_json(&obj(json!({})));
    assert_eq!(unwritten.selector, None);
    let err = unwritten.list_selector().err().map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("cloneset \"web\"")),
        "{err:?}"
    );
}

/// Upstream `EqualToRevisionHash`: equal names, or equal short hashes.
#[test]
fn is_updated_table() {
    let cases = [
        ("web-2", "web-2", true),
        ("2", "web-2", true),
        ("web-2", "2", true),
        ("other-2", "web-2", true),
        ("web-1", "web-2", false),
        ("", "web-2", false),
        ("web-2", "", false),
        ("", "", false),
    ];
    for (pod_rev, update, want) in cases {
        let p = PodView {
            revision: pod_rev.into(),
            ..Default::default()
        };
        assert_eq!(p.is_updated(update), want, "{pod_rev:?} vs {update:?}");
    }
}

#[test]
fn pod_revision_falls_back_to_the_template_hash() {
    let pod = |labels: Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels}})).expect("pod")
    };
    let cases = [
        (
            json!({"controller-revision-hash": "web-2", "pod-template-hash": "2"}),
            "web-2",
        ),
        (json!({"pod-template-hash": "7d4f8b9c6"}), "7d4f8b9c6"),
        (json!({}), ""),
    ];
    for (labels, want) in cases {
        assert_eq!(
            PodView::from_pod(&pod(labels.clone())).revision,
            want,
            "{labels}"
        );
    }
}

/// Any of the four state and grace keys marks the pod as mid-update, readable or not.
#[test]
fn in_place_annotations_old_and_new_keys() {
    let state = json!({"revision": "web-2", "updateTimestamp": "2026-01-01T00:00:00Z",
        "lastContainerStatuses": null})
    .to_string();
    let cases = [
        (json!({}), None),
        (json!({"other": "x"}), None),
        (
            json!({"apps.kruise.io/inplace-update-state": state}),
            Some("web-2"),
        ),
        (json!({"inplace-update-state": state}), Some("web-2")),
        (
            json!({"apps.kruise.io/inplace-update-state": "{"}),
            Some(""),
        ),
        (
            json!({"apps.kruise.io/inplace-update-grace": "{"}),
            Some(""),
        ),
        (json!({"inplace-update-grace": "{"}), Some("")),
    ];
    for (annotations, want) in cases {
        let a: BTreeMap<String, String> =
            serde_json::from_value(annotations.clone()).expect("annotations");
        assert_eq!(
            parse_inplace(&a).map(|p| p.revision).as_deref(),
            want,
            "{annotations}"
        );
    }
}

#[test]
fn grace_left_counts_down() {
    let p = InPlaceProgress {
        update_timestamp: Some("2026-01-01T00:00:00Z".parse().unwrap()),
        grace_seconds: 30,
        ..Default::default()
    };
    assert_eq!(
        p.grace_left("2026-01-01T00:00:12Z".parse().unwrap()),
        Some(18)
    );
    assert_eq!(
        p.grace_left("2026-01-01T00:01:00Z".parse().unwrap()),
        Some(0)
    );
}

fn pod_json(annotations: Value, inplace_ready: &str, status_image: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-abcde", "uid": "p1",
            "labels": {"controller-revision-hash": "web-2", "lifecycle.apps.kruise.io/state": "Updating"},
            "annotations": annotations},
        "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "log", "image": "busybox:1"}]},
        "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}, {"type": "InPlaceUpdateReady", "status": inplace_ready}],
            "containerStatuses": [
                {"name": "app", "image": status_image, "imageID": "x", "ready": true, "restartCount": 1},
                {"name": "log", "image": "docker.io/library/busybox:1", "imageID": "y", "ready": true, "restartCount": 0}]}
    }))
    .unwrap()
}

#[test]
fn pods_mid_in_place_update_are_detected() {
    let state = json!({"revision": "web-2", "updateTimestamp": "2026-01-01T00:00:00Z", "lastContainerStatuses": {"app": {"imageID": "old"}},
        "containerBatchesRecord": [{"timestamp": "2026-01-01T00:00:00Z", "containers": ["app"]}]}).to_string();
    let with_next = json!({"revision": "web-2", "updateTimestamp": "2026-01-01T00:00:00Z", "lastContainerStatuses": null,
        "nextContainerImages": {"log": "busybox:2"}, "preCheckBeforeNext": {"containersRequiredReady": ["app"]},
        "containerBatchesRecord": [{"timestamp": "2026-01-01T00:00:00Z", "containers": ["app"]}]}).to_string();
    let grace =
        json!({"revision": "web-2", "containerImages": {"app": "nginx:1.27"}, "graceSeconds": 30})
            .to_string();

    // Done: runtime reports the new image and InPlaceUpdateReady is True.
    let done = PodView::from_pod(&pod_json(
        json!({"apps.kruise.io/inplace-update-state": state}),
        "True",
        "docker.io/library/nginx:1.27",
    ));
    assert_eq!(
        done.inplace.as_ref().map(|i| i.done_batches.clone()),
        Some(vec![vec!["app".to_string()]])
    );
    assert!(!done.in_place_in_progress());
    assert!(done.is_updated("web-2"));
    assert_eq!(done.lifecycle, "Updating");
    assert_eq!(done.restarts, 1);

    // Runtime still on the old image.
    let old = PodView::from_pod(&pod_json(
        json!({"apps.kruise.io/inplace-update-state": state}),
        "True",
        "docker.io/library/nginx:1.25",
    ));
    assert!(old.in_place_in_progress());
    assert!(!old.containers[0].runtime_has_spec_image());

    // A later batch is pending.
    let next = PodView::from_pod(&pod_json(
        json!({"apps.kruise.io/inplace-update-state": with_next}),
        "True",
        "docker.io/library/nginx:1.27",
    ));
    let ip = next.inplace.clone().unwrap();
    assert_eq!(
        ip.pending_images,
        BTreeMap::from([("log".to_string(), "busybox:2".to_string())])
    );
    assert_eq!(
        (ip.next_batch, ip.waiting_on),
        (vec!["log".to_string()], vec!["app".to_string()])
    );
    assert!(next.in_place_in_progress());

    // Grace period pending (legacy un-prefixed key), and InPlaceUpdateReady False.
    let g = PodView::from_pod(&pod_json(
        json!({"inplace-update-grace": grace}),
        "True",
        "docker.io/library/nginx:1.27",
    ));
    assert_eq!(g.inplace.as_ref().map(|i| i.grace_seconds), Some(30));
    assert_eq!(
        g.inplace.as_ref().map(|i| i.pending_images.clone()),
        Some(BTreeMap::from([(
            "app".to_string(),
            "nginx:1.27".to_string()
        )]))
    );
    assert!(g.in_place_in_progress());
    let nr = PodView::from_pod(&pod_json(
        json!({"apps.kruise.io/inplace-update-state": state}),
        "False",
        "docker.io/library/nginx:1.27",
    ));
    assert!(nr.in_place_in_progress());

    // No annotations: never counted as in progress.
    let plain = PodView::from_pod(&pod_json(json!({}), "True", "docker.io/library/nginx:1.25"));
    assert!(plain.inplace.is_none() && !plain.in_place_in_progress());
}
