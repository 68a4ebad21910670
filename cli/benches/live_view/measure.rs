//! What the live-view benchmark measures: a CloneSet with 1,000 Pods in mixed in-place states,
//! fed as real `Pod` watch events through `LiveModel::apply` (the event loop's own step), then
//! drawn into a ratatui `TestBackend` again and again. `main.rs` parses the arguments and prints;
//! `tests/live_view_bench.rs` runs this small.

use k8s_openapi::api::core::v1::{Event as K8sEvent, Pod};
use kruise_api::keys::{self, k8s};
use kube::runtime::watcher;
use kubectl_kruise::tui::model::{Input, LiveModel};
use kubectl_kruise::tui::render;
use kubectl_kruise::view::RolloutView;
use kubectl_kruise::watch::Update;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use serde_json::json;
use std::time::{Duration, Instant};

pub const OLD_REV: &str = "web-6b8c9d7f5";
const NEW_REV: &str = "web-7d4f8b9c6";
const SIZES: [(u16, u16); 2] = [(120, 40), (200, 60)];
/// What to measure: `pods` Pods, `iterations` samples per row.
pub struct Args {
    pub pods: usize,
    pub iterations: usize,
}

pub fn cloneset(replicas: usize) -> RolloutView {
    let n = replicas as i64;
    RolloutView::from_json(&json!({
        "apiVersion": keys::APPS_V1BETA1, "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "bench", "generation": 4, "uid": "cs-uid"},
        "spec": {"replicas": n, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "partition": 0, "maxUnavailable": "20%",
            "inPlaceUpdateStrategy": {"gracePeriodSeconds": 30}}}},
        "status": {"observedGeneration": 4, "replicas": n, "readyReplicas": n * 3 / 4,
                   "availableReplicas": n * 3 / 4, "updatedReplicas": n / 2,
                   "updatedReadyReplicas": n / 4,
                   "currentRevision": OLD_REV, "updateRevision": NEW_REV}
    }))
}

/// Pod `i` of the CloneSet, in one of five states: old revision, updated and done, first batch
/// patched with the runtime still on the old image, in its grace period, terminating.
pub fn pod(i: usize, resource_version: u64) -> Result<Pod, serde_json::Error> {
    let state = i % 5;
    let updated = matches!(state, 1..=3);
    let app = if matches!(state, 1 | 2) {
        "127.0.0.1:5000/kruise-rs/testapp:v2"
    } else {
        "127.0.0.1:5000/kruise-rs/testapp:v1"
    };
    // The runtime lags the spec while a batch is in flight.
    let app_status = if state == 2 {
        "127.0.0.1:5000/kruise-rs/testapp:v1"
    } else {
        app
    };
    let in_flight = matches!(state, 2 | 3);
    let mut annotations = serde_json::Map::new();
    if matches!(state, 1 | 2) {
        let mut st = json!({
            "revision": NEW_REV, "updateTimestamp": "2026-01-01T11:59:30Z",
            "lastContainerStatuses": {"app": {"imageID": "sha256:0123456789abcdef"}},
            "updateImages": true,
            "containerBatchesRecord": [{"timestamp": "2026-01-01T11:59:30Z", "containers": ["app"]}]
        });
        if state == 2 {
            st["nextContainerImages"] = json!({"sidecar": "127.0.0.1:5000/kruise-rs/sidecar:v2"});
            st["preCheckBeforeNext"] = json!({"containersRequiredReady": ["app"]});
        }
        annotations.insert(
            keys::INPLACE_UPDATE_STATE_ANNOTATION.into(),
            json!(st.to_string()),
        );
    }
    if state == 3 {
        let grace = json!({"revision": NEW_REV, "containerImages": {"app": "127.0.0.1:5000/kruise-rs/testapp:v2"}, "graceSeconds": 30});
        annotations.insert(
            keys::INPLACE_UPDATE_GRACE_ANNOTATION.into(),
            json!(grace.to_string()),
        );
    }
    let cond = |t: &str, ok: bool| {
        let status = if ok {
            k8s::CONDITION_TRUE
        } else {
            k8s::CONDITION_FALSE
        };
        json!({"type": t, "status": status})
    };
    let mut metadata = json!({
        "name": format!("web-{:05x}", i * 7919 % 0xfffff),
        "namespace": "bench",
        "uid": format!("pod-uid-{i}"),
        "resourceVersion": resource_version.to_string(),
        "labels": {
            "app": "web",
            keys::CONTROLLER_REVISION_HASH_LABEL: if updated { NEW_REV } else { OLD_REV },
            keys::LIFECYCLE_STATE_LABEL: if in_flight { "Updating" } else { "Normal" },
        },
        "annotations": annotations,
        "ownerReferences": [{"apiVersion": keys::APPS_V1BETA1, "kind": "CloneSet",
                             "name": "web", "uid": "cs-uid", "controller": true}],
    });
    if state == 4 {
        metadata["deletionTimestamp"] = json!("2026-01-01T11:59:55Z");
    }
    serde_json::from_value(json!({
        "metadata": metadata,
        "spec": {
            "nodeName": format!("node-{}", i % 7 + 1),
            "containers": [
                {"name": "app", "image": app},
                {"name": "sidecar", "image": "127.0.0.1:5000/kruise-rs/sidecar:v1"},
            ]
        },
        "status": {
            "phase": k8s::POD_RUNNING,
            "conditions": [cond(k8s::POD_READY, !in_flight), cond(keys::INPLACE_UPDATE_READY, !in_flight)],
            "containerStatuses": [
                {"name": "app", "image": app_status, "imageID": "", "ready": !in_flight,
                 "restartCount": if updated { 1 } else { 0 }},
                {"name": "sidecar", "image": "127.0.0.1:5000/kruise-rs/sidecar:v1", "imageID": "",
                 "ready": true, "restartCount": 0},
            ]
        }
    }))
}

fn events(n: usize) -> Result<Vec<K8sEvent>, serde_json::Error> {
    (0..n)
        .map(|i| {
            serde_json::from_value(json!({
                "metadata": {"name": format!("ev-{i}"), "namespace": "bench",
                             "creationTimestamp": "2026-01-01T11:59:00Z"},
                "involvedObject": {"kind": "Pod", "name": format!("web-{:05x}", i * 7919 % 0xfffff)},
                "reason": "Pulled", "type": "Normal",
                "message": "Container image \"127.0.0.1:5000/kruise-rs/testapp:v2\" already present on machine",
                "lastTimestamp": format!("2026-01-01T11:{:02}:{:02}Z", 30 + i % 29, i % 60),
            }))
        })
        .collect()
}

fn pod_input(ev: watcher::Event<Pod>) -> Input {
    Input::Watch(Update::Pod(Box::new(ev)))
}

/// Feeds a full list (Init, one InitApply per item) but not its InitDone, which is the step
/// that swaps the list in and rebuilds the model.
fn list_into(model: &mut LiveModel, pods: &[Pod], events: &[K8sEvent]) {
    let ev = |e: watcher::Event<K8sEvent>| Input::Watch(Update::Event(Box::new(e)));
    model.apply(ev(watcher::Event::Init));
    for e in events {
        model.apply(ev(watcher::Event::InitApply(e.clone())));
    }
    model.apply(ev(watcher::Event::InitDone));
    model.apply(pod_input(watcher::Event::Init));
    for p in pods {
        model.apply(pod_input(watcher::Event::InitApply(p.clone())));
    }
}

struct Stats {
    median: Duration,
    p99: Duration,
    max: Duration,
    n: usize,
}

fn stats(mut v: Vec<Duration>) -> Stats {
    v.sort();
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    Stats {
        median: at(0.5),
        p99: at(0.99),
        max: v[v.len() - 1],
        n: v.len(),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{cores} cores, Linux {}, {} build",
        kernel.trim(),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    )
}

pub fn bench(args: &Args) -> Result<String, String> {
    let n = args.pods;
    let iters = args.iterations;
    let json_err = |e: serde_json::Error| format!("building a test object: {e}");
    let pods: Vec<Pod> = (0..n)
        .map(|i| pod(i, 1))
        .collect::<Result<_, _>>()
        .map_err(json_err)?;
    let evs = events(200).map_err(json_err)?;
    let now: jiff::Timestamp = "2026-01-01T12:00:00Z"
        .parse()
        .map_err(|e| format!("timestamp: {e}"))?;
    let new_model = || {
        let mut m = LiveModel::new("cloneset/web", "bench", now, true);
        m.feeds.name = "web".into();
        m.connected = true;
        m.rollout = Some(cloneset(n));
        m
    };

    // Cold: every Pod parsed (first list, or a restart of the view): the InitDone that swaps
    // the listed Pods in.
    let mut cold = Vec::new();
    for _ in 0..iters.clamp(1, 50) {
        let mut m = new_model();
        list_into(&mut m, &pods, &evs);
        let t = Instant::now();
        m.apply(pod_input(watcher::Event::InitDone));
        cold.push(t.elapsed());
    }
    // Per Pod event: one Pod changed (new resourceVersion), the rest come from the cache.
    let mut model = new_model();
    list_into(&mut model, &pods, &evs);
    model.apply(pod_input(watcher::Event::InitDone));
    let mut warm = Vec::with_capacity(iters);
    for k in 0..iters {
        let p = pod(k % n, 2 + k as u64).map_err(json_err)?;
        let input = pod_input(watcher::Event::Apply(p));
        let t = Instant::now();
        model.apply(input);
        warm.push(t.elapsed());
    }
    let mut rows = vec![
        (
            format!("model from {n} Pod objects, cold (every Pod parsed)"),
            stats(cold),
        ),
        (
            format!("model rebuild per Pod event ({n} Pods, 1 changed)"),
            stats(warm),
        ),
    ];

    for (w, h) in SIZES {
        let mut term =
            Terminal::new(TestBackend::new(w, h)).map_err(|e| format!("terminal: {e}"))?;
        let area = ratatui::layout::Rect::new(0, 0, w, h);
        let mut m = model.clone();
        m.page = render::table_rows(area);
        let down = KeyEvent::new(KeyCode::Down, KeyModifiers::NONE);
        let home = KeyEvent::new(KeyCode::Home, KeyModifiers::NONE);
        let mut frames = Vec::with_capacity(iters);
        for k in 0..iters + 20 {
            // The cursor walks down the list so every frame differs, as while scrolling.
            let key = if m.selected + 1 >= n { home } else { down };
            m.apply(Input::Term(TermEvent::Key(key)));
            let t = Instant::now();
            term.draw(|f| render::render(f, &m))
                .map_err(|e| format!("draw: {e}"))?;
            // The first frames warm caches and allocations.
            if k >= 20 {
                frames.push(t.elapsed());
            }
        }
        rows.push((
            format!("full frame render, {w}x{h}, {n} Pods, colour"),
            stats(frames),
        ));
    }

    let mut out = format!(
        "\n## Live view (`rollout watch`) at {n} Pods, no cluster\n\nMachine: {}. \
         `cargo bench -p kubectl-kruise --bench live_view`: a CloneSet with {n} Pods (old revision, updated, mid-batch, \
         in grace, terminating) fed as Pod watch events through the event loop's `LiveModel::apply`, drawn into a \
         ratatui TestBackend.\n\n| what | median ms | p99 ms | max ms | samples |\n|---|---|---|---|---|\n",
        machine()
    );
    for (label, s) in rows.drain(..) {
        out.push_str(&format!(
            "| {label} | {} | {} | {} | {} |\n",
            ms(s.median),
            ms(s.p99),
            ms(s.max),
            s.n
        ));
    }
    Ok(out)
}
