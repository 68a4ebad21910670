//! What one in-place write costs the manager's heap to diff: the bytes allocated by the
//! engine's part-wise patch against a diff of the two whole Pods as JSON (what it did before).
//! Its own test binary, with one test, so that the counting allocator sees nothing else.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::Pod;
use kruise_manager::inplace::apply::guarded_patch;
use serde_json::json;

/// Bytes allocated so far (frees not subtracted: the cost of a call is what it asked for).
static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

struct Counter;

// SAFETY: forwards to the system allocator unchanged; the counter never affects the memory.
unsafe impl GlobalAlloc for Counter {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc`/`realloc` above with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        // SAFETY: the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counter = Counter;

fn allocated_by<T>(f: impl FnOnce() -> T) -> (usize, T) {
    let before = ALLOCATED.load(Ordering::Relaxed);
    let out = f();
    (ALLOCATED.load(Ordering::Relaxed) - before, out)
}

/// A Pod as a CloneSet of a real application has it (two containers with env, probes, mounts
/// and resources; volumes; statuses), already slimmed like the cache's.
fn typical_pod() -> Pod {
    let env: Vec<_> = (0..8)
        .map(|i| json!({"name": format!("ENV_{i}"), "value": format!("value-{i}")}))
        .collect();
    let container = |name: &str| {
        json!({"name": name, "image": format!("registry.example/{name}:v1"),
            "env": env,
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}, {"name": "data", "mountPath": "/data"}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"})
    };
    let status = |name: &str| {
        json!({"name": name, "image": format!("registry.example/{name}:v1"),
            "imageID": format!("registry.example/{name}@sha256:{}", "a".repeat(64)),
            "containerID": format!("containerd://{}", "b".repeat(64)),
            "ready": true, "started": true, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-12-01T00:00:00Z"}}})
    };
    let conditions: Vec<_> = [
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
        "InPlaceUpdateReady",
    ]
    .iter()
    .map(|t| json!({"type": t, "status": "True", "lastTransitionTime": "2026-12-01T00:00:00Z"}))
    .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "web-abcde", "namespace": "default", "uid": "u-1", "resourceVersion": "12345",
            "generateName": "web-", "creationTimestamp": "2026-12-01T00:00:00Z",
            "labels": {"app": "web", "controller-revision-hash": "web-7c9f", "apps.kruise.io/pod-template-hash": "7c9f",
                       "lifecycle.apps.kruise.io/state": "Normal"},
            "annotations": {"lifecycle.apps.kruise.io/timestamp": "2026-12-01T00:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                                 "uid": "cs-1", "controller": true, "blockOwnerDeletion": true}]},
        "spec": {"containers": [container("app"), container("sidecar")],
            "volumes": [{"name": "config", "configMap": {"name": "web-config"}}, {"name": "data", "emptyDir": {}}],
            "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
            "nodeName": "node-1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
        "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.88.0.7", "qosClass": "Burstable",
            "startTime": "2026-12-01T00:00:00Z",
            "conditions": conditions,
            "containerStatuses": [status("app"), status("sidecar")]}
    }))
    .expect("pod")
}

#[test]
fn a_write_serializes_only_what_it_changes() {
    let before = typical_pod();
    // What an in-place update writes: a label, the state annotation, one image.
    let mut update = before.clone();
    update
        .metadata
        .labels
        .get_or_insert_default()
        .insert("controller-revision-hash".into(), "web-5d8b".into());
    update.metadata.annotations.get_or_insert_default().insert(
        "apps.kruise.io/inplace-update-state".into(),
        "{\"revision\":\"web-5d8b\"}".into(),
    );
    if let Some(spec) = update.spec.as_mut() {
        spec.containers[0].image = Some("registry.example/app:v2".into());
    }
    // What marking it ready writes: one condition.
    let mut ready = before.clone();
    if let Some(c) = ready
        .status
        .as_mut()
        .and_then(|s| s.conditions.as_mut())
        .and_then(|c| c.last_mut())
    {
        c.status = "False".into();
    }
    for (what, after) in [("update", update), ("mark ready", ready)] {
        let (whole, whole_patch) = allocated_by(|| {
            let a = serde_json::to_value(&before).expect("json");
            let b = serde_json::to_value(&after).expect("json");
            json_patch::diff(&a, &b)
        });
        let (mut b, mut a) = (before.clone(), after.clone());
        let (ours, patch) = allocated_by(|| guarded_patch(&mut b, &mut a).expect("serializes"));
        let patch = patch.expect("a change");
        // The guard comes first; the rest is the whole diff's operations.
        assert_eq!(patch.0.len(), whole_patch.0.len() + 1, "{what}");
        eprintln!(
            "{what}: whole-Pod diff allocates {whole} B, the part-wise patch {ours} B ({:.2}x)",
            ours as f64 / whole as f64
        );
        assert!(
            ours * 2 < whole,
            "{what}: the part-wise patch allocated {ours} B, not half the whole diff's {whole} B"
        );
    }
}
