//! Snapshot tests of the live view: a scripted rollout drawn at 80×24 and 160×40.

use super::model::{EventRow, LiveModel};
use super::render::render;
use crate::view::{ContainerView, InPlaceProgress, PodView, RolloutView};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

const NOW: &str = "2026-01-01T12:00:00Z";

fn ts(s: &str) -> jiff::Timestamp {
    s.parse().expect("timestamp")
}

fn cloneset(
    partition: serde_json::Value,
    paused: bool,
    updated: i64,
    updated_ready: i64,
) -> RolloutView {
    cloneset_of(10, partition, paused, updated, updated_ready)
}

fn cloneset_of(
    replicas: i64,
    partition: serde_json::Value,
    paused: bool,
    updated: i64,
    ready: i64,
) -> RolloutView {
    let updated_ready = ready;
    RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "shop", "generation": 4, "uid": "u1"},
        "spec": {"replicas": replicas, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "partition": partition, "paused": paused,
            "maxUnavailable": "20%", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 30}}}},
        "status": {"observedGeneration": 4, "replicas": replicas, "readyReplicas": replicas - (updated - updated_ready),
                   "availableReplicas": replicas - (updated - updated_ready), "updatedReplicas": updated,
                   "updatedReadyReplicas": updated_ready,
                   "currentRevision": "web-6b8c9d7f5", "updateRevision": "web-7d4f8b9c6"}
    }))
}

fn container(name: &str, spec: &str, status: &str) -> ContainerView {
    ContainerView {
        name: name.into(),
        spec_image: spec.into(),
        status_image: status.into(),
        ready: true,
        restarts: 0,
        waiting: None,
        resources: String::new(),
    }
}

/// A pod at the old revision, or an updated one that finished.
fn pod(i: usize, updated: bool) -> PodView {
    let (rev, app) = if updated {
        ("web-7d4f8b9c6", "nginx:1.27")
    } else {
        ("web-6b8c9d7f5", "nginx:1.25")
    };
    PodView {
        name: format!("web-{:05}", i * 7919 % 100000),
        node: format!("node-{}", i % 3 + 1),
        phase: "Running".into(),
        revision: rev.into(),
        lifecycle: "Normal".into(),
        ready: true,
        inplace_ready: Some(true),
        restarts: if updated { 1 } else { 0 },
        containers: vec![
            container("app", app, &format!("docker.io/library/{app}")),
            container("log", "busybox:1.36", "docker.io/library/busybox:1.36"),
        ],
        inplace: updated.then(|| InPlaceProgress {
            revision: rev.into(),
            update_timestamp: Some(ts("2026-01-01T11:58:00Z")),
            done_batches: vec![vec!["app".into()]],
            ..Default::default()
        }),
        terminating: false,
        uid: format!("uid-{i}"),
        owner: String::new(),
        namespace: "shop".into(),
        sidecar_hashes: Default::default(),
        budget: None,
        labels: [("app".to_owned(), "web".to_owned())].into_iter().collect(),
        conditions: Default::default(),
        spread: None,
    }
}

/// A pod in its grace period: labels already say new revision, spec not yet patched.
fn pod_in_grace(i: usize) -> PodView {
    let mut p = pod(i, false);
    p.revision = "web-7d4f8b9c6".into();
    p.lifecycle = "Updating".into();
    p.inplace_ready = Some(false);
    p.ready = false;
    p.inplace = Some(InPlaceProgress {
        revision: "web-7d4f8b9c6".into(),
        update_timestamp: Some(ts("2026-01-01T11:59:48Z")),
        grace_seconds: 30,
        pending_images: [("app".to_string(), "nginx:1.27".to_string())].into(),
        ..Default::default()
    });
    p
}

/// A pod whose first batch (app) was patched and whose runtime still reports the old image.
fn pod_mid_batch(i: usize) -> PodView {
    let mut p = pod(i, true);
    p.lifecycle = "Updating".into();
    p.inplace_ready = Some(false);
    p.ready = false;
    p.containers[0].status_image = "docker.io/library/nginx:1.25".into();
    p.containers[1].spec_image = "busybox:1.36".into();
    p.inplace = Some(InPlaceProgress {
        revision: "web-7d4f8b9c6".into(),
        update_timestamp: Some(ts("2026-01-01T11:59:30Z")),
        done_batches: vec![vec!["app".into()]],
        next_batch: vec!["log".into()],
        waiting_on: vec!["app".into()],
        grace_seconds: 0,
        pending_images: [("log".to_string(), "busybox:1.37".to_string())].into(),
    });
    p
}

fn events() -> Vec<EventRow> {
    vec![
        EventRow {
            time: Some(ts("2026-01-01T11:59:48Z")),
            type_: "Normal".into(),
            reason: "SuccessfulUpdatePodInPlace".into(),
            object: "cloneset/web".into(),
            message: "successfully update pod web-23757 in-place (revision web-7d4f8b9c6)".into(),
        },
        EventRow {
            time: Some(ts("2026-01-01T11:59:30Z")),
            type_: "Normal".into(),
            reason: "Pulled".into(),
            object: "pod/web-15838".into(),
            message: "Container image \"nginx:1.27\" already present on machine".into(),
        },
    ]
}

fn model(rollout: RolloutView, pods: Vec<PodView>, events: Vec<EventRow>) -> LiveModel {
    let mut m = LiveModel::new("cloneset/web", "shop", ts(NOW), false);
    m.connected = true;
    m.rollout = Some(rollout);
    m.set_pods(pods);
    m.events = events;
    m
}

fn draw(m: &LiveModel, w: u16, h: u16) -> String {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
    term.draw(|f| render(f, m)).expect("draw");
    term.backend().to_string()
}

fn scripted() -> Vec<(&'static str, LiveModel)> {
    let before = model(
        cloneset(json!(0), false, 0, 0),
        (0..10).map(|i| pod(i, false)).collect(),
        vec![],
    );
    let mut mid_pods: Vec<PodView> = (0..10).map(|i| pod(i, i < 3)).collect();
    mid_pods[3] = pod_mid_batch(3);
    mid_pods[4] = pod_in_grace(4);
    let mut mid = model(cloneset(json!(0), false, 5, 3), mid_pods, events());
    // Put the cursor on the pod in its grace period.
    mid.selected = mid
        .visible()
        .iter()
        .position(|p| p.name == pod_in_grace(4).name)
        .unwrap_or(0);
    let partitioned = model(
        cloneset(json!("30%"), false, 7, 7),
        (0..10).map(|i| pod(i, i < 7)).collect(),
        events(),
    );
    let paused = model(
        cloneset(json!(0), true, 4, 4),
        (0..10).map(|i| pod(i, i < 4)).collect(),
        events(),
    );
    let finished = model(
        cloneset(json!(0), false, 10, 10),
        (0..10).map(|i| pod(i, true)).collect(),
        events(),
    );
    vec![
        ("before", before),
        ("mid_batch_grace", mid),
        ("partitioned", partitioned),
        ("paused", paused),
        ("finished", finished),
    ]
}

#[test]
fn live_view_snapshots() {
    for (name, m) in scripted() {
        insta::assert_snapshot!(format!("{name}_80x24"), draw(&m, 80, 24));
        insta::assert_snapshot!(format!("{name}_160x40"), draw(&m, 160, 40));
    }
}

#[test]
fn thousand_pods_render_only_the_window() {
    let pods: Vec<PodView> = (0..1000)
        .map(|i| {
            if i % 4 == 0 {
                pod_mid_batch(i)
            } else {
                pod(i, i % 2 == 0)
            }
        })
        .collect();
    let mut m = model(cloneset_of(1000, json!(0), false, 500, 250), pods, events());
    m.page = super::render::table_rows(ratatui::layout::Rect::new(0, 0, 80, 24));
    // Jump to the middle as PgDn presses would.
    m.selected = 500;
    m.offset = m.window(m.page).0;
    let screen = draw(&m, 80, 24);
    assert!(screen.contains("501/1000"), "{screen}");
    insta::assert_snapshot!("thousand_pods_80x24", screen);
}

#[test]
fn help_overlay_and_filter() {
    let (_, mut m) = scripted().remove(1);
    m.show_help = true;
    insta::assert_snapshot!("help_80x24", draw(&m, 80, 24));
    m.show_help = false;
    m.filter = "node-2".into();
    m.selected = 0;
    let screen = draw(&m, 80, 24);
    assert!(screen.contains("filter \"node-2\""), "{screen}");
    assert!(!screen.contains("node-1 "), "{screen}");
}

#[test]
fn grace_countdown_moves_with_time() {
    let (_, mut m) = scripted().remove(1);
    assert!(draw(&m, 160, 40).contains("18s left (of 30s)"));
    m.now = ts("2026-01-01T12:00:10Z");
    assert!(draw(&m, 160, 40).contains(" 8s left (of 30s)"));
}

#[test]
fn colour_is_optional() {
    let (_, mut m) = scripted().remove(1);
    let mut term = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
    term.draw(|f| render(f, &m)).expect("draw");
    let plain_has_colour = term
        .backend()
        .buffer()
        .content()
        .iter()
        .any(|c| c.fg != ratatui::style::Color::Reset);
    assert!(
        !plain_has_colour,
        "no-color mode must not set foreground colours"
    );
    m.color = true;
    term.draw(|f| render(f, &m)).expect("draw");
    assert!(
        term.backend()
            .buffer()
            .content()
            .iter()
            .any(|c| c.fg != ratatui::style::Color::Reset)
    );
}

/// The header row of the pod table.
fn table_header(screen: &str) -> String {
    screen
        .lines()
        .find(|l| l.contains("NAME") && l.contains("IMAGES"))
        .unwrap_or_default()
        .to_string()
}

/// The table row of the named pod.
fn row_of(screen: &str, pod: &str) -> String {
    screen
        .lines()
        .find(|l| l.trim_start_matches('"').starts_with(pod))
        .unwrap_or_default()
        .to_string()
}

/// A Pod as the API returns it during its grace period: labels already on the update revision,
/// the grace annotation holding the new image, spec and runtime still on the old one. The live
/// view must show it pending (old → new, time left), not done.
#[test]
fn pod_in_grace_shows_pending_image_with_time_left() {
    let state = json!({"revision": "web-7d4f8b9c6", "updateTimestamp": "2026-01-01T11:59:48Z",
        "lastContainerStatuses": {"app": {"imageID": "sha256:old"}}})
    .to_string();
    let grace = json!({"revision": "web-7d4f8b9c6", "containerImages": {"app": "nginx:1.27"},
        "graceSeconds": 30})
    .to_string();
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-graced", "uid": "g1",
            "labels": {"controller-revision-hash": "web-7d4f8b9c6", "lifecycle.apps.kruise.io/state": "Updating"},
            "annotations": {"apps.kruise.io/inplace-update-state": state, "apps.kruise.io/inplace-update-grace": grace}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx:1.25"}]},
        "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "InPlaceUpdateReady", "status": "False"}],
            "containerStatuses": [{"name": "app", "image": "docker.io/library/nginx:1.25", "imageID": "sha256:old",
                "ready": true, "restartCount": 0}]}
    }))
    .expect("pod");
    let mut m = model(
        cloneset(json!(0), false, 1, 0),
        vec![PodView::from_pod(&pod)],
        vec![],
    );
    for (w, h, cell) in [
        (80, 24, "app=1.25→1.27⧗18s"),
        (160, 40, "app=nginx:1.25→1.27⧗18s"),
    ] {
        let row = row_of(&draw(&m, w, h), "web-graced");
        assert!(row.contains(cell), "{w}x{h}: pending with time left: {row}");
        assert!(!row.contains('✓'), "{w}x{h}: not shown as done: {row}");
    }
    m.now = ts("2026-01-01T12:00:10Z");
    let row = row_of(&draw(&m, 160, 40), "web-graced");
    assert!(row.contains("app=nginx:1.25→1.27⧗8s"), "{row}");
}

/// The 80- and 160-column legends of the image column say the same thing.
#[test]
fn image_legend_is_the_same_at_both_widths() {
    let (_, m) = scripted().remove(1);
    let narrow = table_header(&draw(&m, 80, 24));
    let wide = table_header(&draw(&m, 160, 40));
    assert!(narrow.contains("✓ok ⧗pending"), "{narrow}");
    assert!(
        wide.contains("✓ ok: runs the spec image · ⧗ pending: old→new"),
        "{wide}"
    );
    assert!(
        !narrow.contains("new") && !narrow.contains("old"),
        "{narrow}"
    );
}

/// `--exit-when-done` leaves with `rollout status`'s codes: 1 for a failed rollout (4 is only
/// `--timeout`, which the view does not have), 3 paused, 0 complete.
#[test]
fn exit_when_done_codes() {
    use crate::error::exit;
    let failed = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "shop", "generation": 4, "uid": "u1"},
        "spec": {"replicas": 2, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceOnly"}}},
        "status": {"observedGeneration": 4, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 0,
            "currentRevision": "web-6b8c9d7f5", "updateRevision": "web-7d4f8b9c6",
            "conditions": [{"type": "FailedUpdate", "status": "True",
                "message": "pod web-00000 cannot be updated in place"}]}
    }));
    let m = model(failed, (0..2).map(|i| pod(i, false)).collect(), vec![]);
    assert_eq!(super::final_exit_code(&m), Some(exit::FAILED));
    let (_, paused) = scripted().remove(3);
    assert_eq!(super::final_exit_code(&paused), Some(exit::PAUSED));
    let (_, finished) = scripted().remove(4);
    assert_eq!(super::final_exit_code(&finished), Some(exit::OK));
    let (_, mid) = scripted().remove(1);
    assert_eq!(super::final_exit_code(&mid), None);
}

/// An Advanced StatefulSet of `replicas` Pods `web-0`…, partition `partition`, with the Pods
/// from `partition` up updated in place.
fn asts_model(replicas: usize, partition: usize) -> LiveModel {
    let updated = (replicas - partition) as i64;
    let view = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "shop", "generation": 2, "uid": "u1"},
        "spec": {"replicas": replicas, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "partition": partition}}},
        "status": {"observedGeneration": 2, "replicas": replicas, "readyReplicas": replicas,
                   "availableReplicas": replicas, "updatedReplicas": updated, "updatedReadyReplicas": updated,
                   "currentRevision": "web-6b8c9d7f5", "updateRevision": "web-7d4f8b9c6"}
    }));
    // Given out of order: the view sorts by ordinal, not by name (web-10 after web-9).
    let pods = (0..replicas)
        .rev()
        .map(|o| {
            let mut p = pod(o, o >= partition);
            p.name = format!("web-{o}");
            p
        })
        .collect();
    let mut m = model(view, pods, vec![]);
    m.target = "asts/web".into();
    m
}

/// The live view of an Advanced StatefulSet lists Pods by ordinal and draws the partition line
/// between the kept ordinals and the updated ones.
#[test]
fn asts_rows_by_ordinal_with_the_partition_line() {
    let m = asts_model(12, 3);
    let names: Vec<&str> = m.pods.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names[..4], ["web-0", "web-1", "web-2", "web-3"]);
    assert_eq!(names[11], "web-11");
    for (w, h) in [(80, 24), (160, 40)] {
        let screen = draw(&m, w, h);
        let lines: Vec<&str> = screen.lines().collect();
        let at = |needle: &str| {
            lines
                .iter()
                .position(|l| l.trim_start_matches('"').starts_with(needle))
                .unwrap_or_else(|| panic!("{w}x{h}: no row {needle}: {screen}"))
        };
        let rule = lines
            .iter()
            .position(|l| l.trim_start_matches('"').starts_with("── partition 3 "))
            .unwrap_or_else(|| panic!("{w}x{h}: no partition line: {screen}"));
        assert_eq!(at("web-2 ") + 1, rule, "{w}x{h}: line right after web-2");
        assert_eq!(
            rule + 1,
            at("web-3 "),
            "{w}x{h}: web-3 right after the line"
        );
        assert!(screen.contains("partitioned rollout complete"), "{screen}");
    }
    assert!(draw(&m, 160, 40).contains("ordinals below 3 kept, from 3 up updated"));
    insta::assert_snapshot!("asts_partitioned_80x24", draw(&m, 80, 24));
    // A new set with a partition: every Pod already runs the update revision.
    let mut fresh = asts_model(3, 1);
    if let Some(r) = fresh.rollout.as_mut() {
        r.updated_replicas = 3;
    }
    let screen = draw(&fresh, 120, 40);
    assert!(
        screen.contains("updated 3/3 (partition keeps 1)"),
        "{screen}"
    );
    // No partition, no line.
    let full = asts_model(3, 0);
    assert!(!draw(&full, 160, 40).contains("ordinals below"));
    // kind's node names and one container (as the e2e suite runs there): the partition line
    // keeps its label, and from 120 columns the NODE column grows to name nodes whole.
    let mut kind = asts_model(3, 1);
    for p in &mut kind.pods {
        p.node = "kruise-rs-control-plane".into();
        p.containers.truncate(1);
    }
    for (w, h) in [(80, 24), (120, 40)] {
        let screen = draw(&kind, w, h);
        assert!(
            screen
                .lines()
                .any(|l| l.trim_start_matches('"').starts_with("── partition 1 ")),
            "{screen}"
        );
        let row = row_of(&screen, "web-1");
        let cells: Vec<&str> = row.trim_matches('"').split_whitespace().collect();
        // At 80 columns two images leave too little room: the node may be cut, the row holds.
        assert!(
            cells
                .get(1)
                .is_some_and(|n| n.starts_with("kruise-rs-control")),
            "{screen}"
        );
        assert!(
            cells.get(2).is_some_and(|r| r.starts_with("7d4f8b9")),
            "{screen}"
        );
        if w >= 120 {
            assert_eq!(cells.get(1), Some(&"kruise-rs-control-plane"), "{screen}");
        }
    }
}

/// An Advanced DaemonSet: one row per node, ordered by node name.
#[test]
fn ads_one_row_per_node() {
    let view = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "shop", "generation": 3, "uid": "u1"},
        "spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 2}}},
        "status": {"observedGeneration": 3, "desiredNumberScheduled": 4, "currentNumberScheduled": 4,
                   "numberReady": 4, "numberAvailable": 4, "updatedNumberScheduled": 2,
                   "daemonSetHash": "7d4f8b9c6"}
    }));
    let pods: Vec<PodView> = ["worker-d01", "worker-b01", "worker-a01", "worker-c01"]
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let mut p = pod(i, i % 2 == 0);
            p.node = node.to_string();
            p.name = format!("agent-{}", ["x1", "x2", "x3", "x4"][i]);
            p
        })
        .collect();
    let mut m = model(view, pods, vec![]);
    m.target = "ads/agent".into();
    let nodes: Vec<&str> = m.pods.iter().map(|p| p.node.as_str()).collect();
    assert_eq!(
        nodes,
        ["worker-a01", "worker-b01", "worker-c01", "worker-d01"]
    );
    // The node is what tells the rows apart: named in full at 80 columns too.
    let narrow = draw(&m, 80, 24);
    for (name, node) in [("agent-x3", "worker-a01"), ("agent-x1", "worker-d01")] {
        assert!(row_of(&narrow, name).contains(node), "{narrow}");
    }
    assert!(
        !narrow.contains("updated-ready"),
        "not reported by DaemonSets: {narrow}"
    );
    assert!(
        !narrow.contains("current "),
        "no current revision reported: {narrow}"
    );
    let screen = draw(&m, 160, 40);
    assert!(screen.contains("updated 2/4"), "{screen}");
    assert!(screen.contains("InPlaceIfPossible"), "{screen}");
    insta::assert_snapshot!("ads_160x40", screen);
}

/// kind names its nodes after the cluster (`kruise-rs-control-plane`): the NODE column grows to
/// name them whole, at 80 columns too, without cutting the image cell of a one-container Pod.
#[test]
fn ads_long_node_names_shown_whole() {
    let view = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "e2e", "generation": 2, "uid": "u1"},
        "spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "rollingUpdateType": "InPlaceIfPossible"}}},
        "status": {"observedGeneration": 2, "desiredNumberScheduled": 2, "currentNumberScheduled": 2,
                   "numberReady": 2, "numberAvailable": 2, "updatedNumberScheduled": 2,
                   "daemonSetHash": "7d4f8b9c6"}
    }));
    let nodes = ["kruise-rs-control-plane", "kruise-rs-worker"];
    let pods: Vec<PodView> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let mut p = pod(i, true);
            p.node = node.to_string();
            p.name = format!("agent-{}", ["k2x9q", "p7w4z"][i]);
            p.containers = vec![container(
                "app",
                "localhost:5000/testapp:v2",
                "localhost:5000/testapp:v2",
            )];
            p
        })
        .collect();
    let mut m = model(view, pods, vec![]);
    m.target = "ads/agent".into();
    for (w, h) in [(80, 24), (120, 40)] {
        let screen = draw(&m, w, h);
        for pod in &m.pods {
            let cells: Vec<String> = row_of(&screen, &pod.name)
                .trim_matches('"')
                .split_whitespace()
                .map(str::to_string)
                .collect();
            assert_eq!(cells.get(1), Some(&pod.node), "{screen}");
            assert_eq!(
                cells.last().map(String::as_str),
                Some("app=testapp:v2✓"),
                "{screen}"
            );
        }
    }
    // Short node names leave the columns as they were.
    let mut short = m.clone();
    for p in &mut short.pods {
        p.node = "n1".into();
    }
    assert!(table_header(&draw(&short, 80, 24)).contains("READY"));
}

/// A SidecarSet: its matched Pods, which sidecar version each runs (the hash it records, `*`
/// once it is the set's, the image with ✓ or ⧗), and the workload that owns each Pod.
#[test]
fn sidecarset_shows_sidecar_version_and_owner() {
    let view = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "log", "generation": 2, "uid": "s1",
            "annotations": {"kruise.io/sidecarset-hash": "v2hashxxxxxxxx"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "containers": [{"name": "log", "image": "busybox:1.37"}],
                 "updateStrategy": {"maxUnavailable": 1}},
        "status": {"observedGeneration": 2, "matchedPods": 3, "updatedPods": 2, "readyPods": 3,
                   "updatedReadyPods": 1}
    }));
    assert_eq!(view.update_revision, "v2hashxxxxxxxx");
    let mut pods: Vec<PodView> = (0..4).map(|i| pod(i, false)).collect();
    // Upgraded and running the new image.
    pods[0].containers[1] = container("log", "busybox:1.37", "docker.io/library/busybox:1.37");
    pods[0].owner = "CloneSet/web".into();
    pods[0].sidecar_hashes = [("log".to_string(), "v2hashxxxxxxxx".to_string())].into();
    // Not upgraded yet.
    pods[1].owner = "ReplicaSet/api-5d9f".into();
    pods[1].sidecar_hashes = [("log".to_string(), "v1hashyyyyyyyy".to_string())].into();
    // Patched to the new image; the runtime still runs the old one.
    pods[2].containers[1] = container("log", "busybox:1.37", "docker.io/library/busybox:1.36");
    // What a resourcesPolicy computed for the sidecar.
    pods[2].containers[1].resources = "requests cpu=75m limits cpu=300m".into();
    pods[2].owner = "CloneSet/web".into();
    pods[2].sidecar_hashes = [("log".to_string(), "v2hashxxxxxxxx".to_string())].into();
    pods.truncate(3);
    let names: Vec<String> = pods.iter().map(|p| p.name.clone()).collect();
    let mut m = model(view, pods, vec![]);
    m.target = "sidecarset/log".into();
    let screen = draw(&m, 160, 40);
    assert!(table_header(&screen).contains("OWNER"), "{screen}");
    assert!(screen.contains("cluster-scoped"), "{screen}");
    assert!(!screen.contains("ns shop"), "{screen}");
    assert!(screen.contains("update v2hashxxxx"), "{screen}");
    let row = row_of(&screen, &names[0]);
    assert!(
        row.contains("CloneSet/web")
            && row.contains("v2hashxxxx*")
            && row.contains("log=busybox:1.37✓"),
        "{row}"
    );
    let row = row_of(&screen, &names[1]);
    assert!(
        row.contains("ReplicaSet/api-5d9f")
            && row.contains("v1hashyyyy ")
            && row.contains("log=busybox:1.36✓"),
        "{row}"
    );
    let row = row_of(&screen, &names[2]);
    assert!(
        row.contains("v2hashxxxx*") && row.contains("log=busybox:1.36→1.37⧗"),
        "{row}"
    );
    // The detail panel of the Pod mid-upgrade names its owner, version and restarting sidecar.
    m.selected = 2;
    let detail = draw(&m, 160, 40);
    for want in [
        "owner: CloneSet/web",
        "sidecar version v2hashxxxx (the set's)",
        "log: restarting into busybox:1.37 · requests cpu=75m limits cpu=300m",
    ] {
        assert!(detail.contains(want), "{want}: {detail}");
    }
    m.selected = 1;
    assert!(
        draw(&m, 160, 40).contains("sidecar version v1hashyyyy (the set is at v2hashxxxx)"),
        "not upgraded yet"
    );
    m.selected = 0;
    insta::assert_snapshot!("sidecarset_160x40", screen);
    let narrow = draw(&m, 80, 24);
    assert!(
        row_of(&narrow, &names[0]).contains("CloneSet/web"),
        "{narrow}"
    );
}

/// The pod watch keeps only the Pods the SidecarSet injected, and names their namespace when
/// they come from several.
#[test]
fn sidecarset_pods_are_the_injected_ones() {
    use crate::watch::Update;
    use kube::runtime::watcher::Event;
    let view = RolloutView::from_json(&json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "log", "generation": 1, "uid": "s1",
            "annotations": {"kruise.io/sidecarset-hash": "h1"}},
        "spec": {"containers": [{"name": "log", "image": "busybox:1.37"}]},
        "status": {"observedGeneration": 1, "matchedPods": 2, "updatedPods": 2}
    }));
    let mut m = LiveModel::new("sidecarset/log", "default", ts(NOW), false);
    m.rollout = Some(view);
    let hash = json!({"log": {"updateTimestamp": "2026-01-01T00:00:00Z", "hash": "h1",
        "sidecarSetName": "log", "sidecarList": ["log"]}})
    .to_string();
    let pod = |ns: &str, name: &str, injected: bool| -> k8s_openapi::api::core::v1::Pod {
        let annotations = if injected {
            json!({"kruise.io/sidecarset-hash": hash})
        } else {
            json!({})
        };
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns,
            "resourceVersion": "1", "annotations": annotations}}))
        .expect("pod")
    };
    let ev = |e| super::model::Input::Watch(Update::Pod(Box::new(e)));
    m.apply(ev(Event::Init));
    for p in [
        pod("a", "web-1", true),
        pod("b", "web-1", true),
        pod("c", "web-2", false),
    ] {
        m.apply(ev(Event::InitApply(p)));
    }
    m.apply(ev(Event::InitDone));
    let shown: Vec<(&str, &str)> = m
        .pods
        .iter()
        .map(|p| (p.namespace.as_str(), p.name.as_str()))
        .collect();
    assert_eq!(shown, [("a", "web-1"), ("b", "web-1")]);
    let screen = draw(&m, 120, 40);
    assert!(!row_of(&screen, "a/web-1").is_empty(), "{screen}");
    assert!(!row_of(&screen, "b/web-1").is_empty(), "{screen}");
}

#[test]
fn a_pods_persisted_node_is_shown_in_its_detail() {
    let (_, mut m) = scripted().remove(0);
    let name = m.selected_pod().map(|p| p.name.clone()).expect("a pod");
    let node = m.selected_pod().map(|p| p.node.clone()).expect("a pod");
    assert!(!draw(&m, 160, 40).contains("persisted node"));
    let changed = m.apply(super::model::Input::Persisted(
        [(name.clone(), node.clone())].into_iter().collect(),
    ));
    assert!(changed);
    assert!(draw(&m, 160, 40).contains(&format!("persisted node: {node}")));
    m.apply(super::model::Input::Persisted(
        [(name, "node-9".to_owned())].into_iter().collect(),
    ));
    assert!(draw(&m, 160, 40).contains(&format!("persisted node: node-9 (now on {node})")));
}

#[test]
fn recorded_nodes_come_from_the_state_targeting_the_set() {
    let pps: kruise_api::apps::v1alpha1::PersistentPodState =
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "web"}},
            "status": {"observedGeneration": 1, "podStates": {"web-0": {"nodeName": "node-1"}}},
        }))
        .expect("pps");
    let target = |name: &str| kruise_api::policy::v1alpha1::TargetReference {
        api_version: "apps.kruise.io/v1beta1".into(),
        kind: "StatefulSet".into(),
        name: name.into(),
    };
    let nodes = super::persisted::recorded_nodes(std::slice::from_ref(&pps), &target("web"));
    assert_eq!(nodes.get("web-0").map(String::as_str), Some("node-1"));
    assert!(super::persisted::recorded_nodes(&[pps], &target("db")).is_empty());
}

#[test]
fn a_pods_probe_marks_are_shown_in_its_row_and_detail() {
    use kruise_api::apps::v1alpha1::PodProbeMarker;
    let (_, mut m) = scripted().remove(0);
    let name = m.selected_pod().map(|p| p.name.clone()).expect("a pod");
    let marker: PodProbeMarker = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
        "metadata": {"name": "game", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "probes": [
            {"name": "idle", "containerName": "app", "probe": {"exec": {"command": ["true"]}},
                "podConditionType": "game.io/idle"},
            {"name": "role", "containerName": "app", "probe": {"exec": {"command": ["true"]}},
                "markerPolicy": [{"state": "Succeeded", "labels": {"role": "primary"}},
                    {"state": "Failed", "labels": {"role": "secondary"}}]},
        ]},
    }))
    .expect("marker");
    let other: PodProbeMarker = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "probes": [
            {"name": "lag", "containerName": "db", "probe": {"exec": {"command": ["true"]}},
                "podConditionType": "db.io/lag"}]},
    }))
    .expect("marker");
    assert!(!draw(&m, 160, 40).contains("probes:"));
    let rules = super::probes::rules(&[marker, other]);
    assert!(m.apply(super::model::Input::Probes(rules.clone())));
    assert!(!m.apply(super::model::Input::Probes(rules)), "unchanged");
    // Not probed yet: neither the condition nor a state's labels.
    let screen = draw(&m, 160, 40);
    assert!(row_of(&screen, &name).contains("· idle? role?"), "{screen}");
    assert!(
        screen.contains("probes: idle Unknown · role Unknown"),
        "{screen}"
    );
    assert!(
        !screen.contains("lag"),
        "the db marker does not select web: {screen}"
    );

    // The manager marked it: the condition for one probe, the Failed labels for the other.
    let mut pods = m.pods.clone();
    let pod = pods.iter_mut().find(|p| p.name == name).expect("pod");
    pod.conditions.insert(
        "game.io/idle".into(),
        crate::view::PodConditionView {
            status: "True".into(),
            since: Some(m.now - jiff::SignedDuration::from_secs(30)),
        },
    );
    pod.labels.insert("role".into(), "secondary".into());
    m.set_pods(pods);
    let screen = draw(&m, 160, 40);
    assert!(row_of(&screen, &name).contains("· idle✓ role✗"), "{screen}");
    assert!(
        screen.contains("probes: idle Succeeded 30s · role Failed"),
        "{screen}"
    );
}

/// A Pod placed by a WorkloadSpread shows its subset in its row and the spread in its detail;
/// the annotation is read as the webhook writes it.
#[test]
fn a_pods_workloadspread_subset_is_shown_in_its_row_and_detail() {
    let (_, mut m) = scripted().remove(0);
    let name = m.selected_pod().map(|p| p.name.clone()).expect("a pod");
    assert!(!draw(&m, 160, 40).contains("workloadspread:"));
    let annotated: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {
            kruise_api::keys::MATCHED_WORKLOADSPREAD_ANNOTATION: r#"{"name":"spread","subset":"zone-a"}"#}},
    }))
    .expect("pod");
    let spread = crate::view::PodView::from_pod(&annotated).spread;
    assert_eq!(
        spread
            .as_ref()
            .map(|s| (s.name.as_str(), s.subset.as_str())),
        Some(("spread", "zone-a"))
    );
    let mut pods = m.pods.clone();
    pods.iter_mut()
        .find(|p| p.name == name)
        .expect("pod")
        .spread = spread;
    m.set_pods(pods);
    let screen = draw(&m, 160, 40);
    assert!(row_of(&screen, &name).contains("· @zone-a"), "{screen}");
    assert!(
        screen.contains("workloadspread: spread, subset zone-a"),
        "{screen}"
    );
}
