use k8s_openapi::api::core::v1::Pod;

use super::launch_priority::generate_name;
use super::readiness_gate::inject_readiness_gate;
use super::{MUTATING_ORDER, MutatingHandler, VALIDATING_ORDER, ValidatingHandler, mutate};
use crate::review::admit;
use crate::review::tests::{response, review_body};
use serde_json::{Value, json};

fn pod(owner_api: Option<&str>, containers: Value, annotations: Value) -> Value {
    let owners = match owner_api {
        Some(api) => json!([{"apiVersion": api, "kind": "CloneSet", "name": "cs",
            "uid": "u", "controller": true}]),
        None => json!(null),
    };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "ownerReferences": owners,
            "annotations": annotations},
        "spec": {"containers": containers}})
}

fn run(obj: Value) -> Value {
    let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(obj.clone()), None);
    let resp = response(&admit(&body, mutate));
    assert_eq!(resp["allowed"], true, "{resp}");
    let mut patched = obj;
    if let Some(bytes) = patch_bytes(&resp["patch"]) {
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch");
        json_patch::patch(&mut patched, &patch).expect("patch applies to the raw object");
    }
    patched
}

/// kube-core encodes the patch bytes as a JSON array of numbers (Go's decoder accepts it
/// for `[]byte`).
fn patch_bytes(v: &Value) -> Option<Vec<u8>> {
    v.as_array()?
        .iter()
        .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
        .collect()
}

#[test]
fn readiness_gate_injected_for_kruise_owner() {
    let out = run(pod(
        Some("apps.kruise.io/v1beta1"),
        json!([{"name": "a", "image": "x"}]),
        json!(null),
    ));
    assert_eq!(
        out["spec"]["readinessGates"],
        json!([{"conditionType": "KruisePodReady"}])
    );
}

#[test]
fn readiness_gate_not_injected_for_other_owner() {
    let out = run(pod(
        Some("apps/v1"),
        json!([{"name": "a", "image": "x"}]),
        json!(null),
    ));
    assert!(out["spec"].get("readinessGates").is_none());
    let out = run(pod(None, json!([{"name": "a", "image": "x"}]), json!(null)));
    assert!(out["spec"].get("readinessGates").is_none());
}

#[test]
fn kruise_pod_readiness_gate_injects_into_every_pod() {
    for (owner, for_all, want) in [
        (None, false, false),
        (None, true, true),
        (Some("apps/v1"), true, true),
        (Some("apps.kruise.io/v1beta1"), false, true),
    ] {
        let mut p: Pod = serde_json::from_value(pod(
            owner,
            json!([{"name": "a", "image": "x"}]),
            json!(null),
        ))
        .expect("pod");
        assert_eq!(
            inject_readiness_gate(&mut p, for_all),
            want,
            "{owner:?} for_all={for_all}"
        );
    }
}

#[test]
fn readiness_gate_not_duplicated() {
    let mut p = pod(
        Some("apps.kruise.io/v1alpha1"),
        json!([{"name": "a", "image": "x"}]),
        json!(null),
    );
    p["spec"]["readinessGates"] = json!([{"conditionType": "KruisePodReady"}]);
    let out = run(p);
    assert_eq!(
        out["spec"]["readinessGates"].as_array().map(Vec::len),
        Some(1)
    );
}

fn barrier(c: &Value) -> Option<Value> {
    c["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == "KRUISE_CONTAINER_BARRIER")
        .cloned()
}

#[test]
fn ordered_annotation_injects_descending_barriers() {
    let out = run(pod(
        None,
        json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]),
        json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
    ));
    let cs = out["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        barrier(&cs[0]),
        Some(json!({"name": "KRUISE_CONTAINER_BARRIER",
            "valueFrom": {"configMapKeyRef": {"name": "p-barrier", "key": "p_0"}}}))
    );
    assert_eq!(
        barrier(&cs[1]).map(|b| b["valueFrom"]["configMapKeyRef"]["key"].clone()),
        Some(json!("p_-1"))
    );
}

#[test]
fn priority_env_injects_barriers_keeping_existing_env() {
    let out = run(pod(
        None,
        json!([
            {"name": "a", "image": "x", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "10"}]},
            {"name": "b", "image": "y"}
        ]),
        json!(null),
    ));
    let cs = out["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(cs[0]["env"][0]["name"], "KRUISE_CONTAINER_PRIORITY");
    assert_eq!(
        barrier(&cs[0]).map(|b| b["valueFrom"]["configMapKeyRef"]["key"].clone()),
        Some(json!("p_10"))
    );
    assert_eq!(
        barrier(&cs[1]).map(|b| b["valueFrom"]["configMapKeyRef"]["key"].clone()),
        Some(json!("p_0"))
    );
}

#[test]
fn equal_priorities_or_single_container_inject_nothing() {
    let env = json!([{"name": "KRUISE_CONTAINER_PRIORITY", "value": "5"}]);
    let out = run(pod(
        None,
        json!([{"name": "a", "image": "x", "env": env}, {"name": "b", "image": "y", "env": env}]),
        json!(null),
    ));
    assert!(barrier(&out["spec"]["containers"][0]).is_none());
    let out = run(pod(
        None,
        json!([{"name": "a", "image": "x"}]),
        json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
    ));
    assert!(barrier(&out["spec"]["containers"][0]).is_none());
}

#[test]
fn generate_name_pod_gets_a_name_for_its_barrier() {
    let mut p = pod(
        None,
        json!([{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]),
        json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
    );
    p["metadata"]["name"] = Value::Null;
    p["metadata"]["generateName"] = json!("web-");
    let out = run(p);
    let name = out["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    assert_eq!(
        barrier(&out["spec"]["containers"][0])
            .map(|b| b["valueFrom"]["configMapKeyRef"]["name"].clone()),
        Some(json!(format!("{name}-barrier")))
    );
}

#[test]
fn bad_priority_is_denied_naming_the_container() {
    let p = pod(
        None,
        json!([
            {"name": "a", "image": "x", "env": [{"name": "KRUISE_CONTAINER_PRIORITY", "value": "high"}]},
            {"name": "b", "image": "y"}
        ]),
        json!(null),
    );
    let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(p), None);
    let resp = response(&admit(&body, mutate));
    assert_eq!(resp["allowed"], false);
    assert_eq!(
        resp["status"]["message"],
        "spec.containers[0].env[KRUISE_CONTAINER_PRIORITY]: Invalid value: \"high\": must be an integer"
    );
}

#[test]
fn update_is_ignored() {
    let p = pod(
        Some("apps.kruise.io/v1beta1"),
        json!([{"name": "a"}]),
        json!(null),
    );
    let body = review_body(
        "UPDATE",
        ("", "v1", "Pod"),
        "pods",
        Some(p.clone()),
        Some(p),
    );
    let resp = response(&admit(&body, mutate));
    assert_eq!(resp["allowed"], true);
    assert!(resp.get("patch").is_none());
}

#[test]
fn long_generate_name_is_truncated() {
    let n = generate_name(&"x".repeat(80));
    assert_eq!(n.len(), 63);
}

/// Upstream's `Handle`: readiness gate, WorkloadSpread, SidecarSet, launch priority (which must
/// see the injected sidecars), PodUnavailableBudget, PersistentPodState, enhanced liveness,
/// PodProbeMarker on serverless Pods.
#[test]
fn mutating_handlers_run_in_upstreams_order() {
    assert_eq!(
        MUTATING_ORDER,
        &[
            MutatingHandler::ReadinessGate,
            MutatingHandler::WorkloadSpread,
            MutatingHandler::SidecarSet,
            MutatingHandler::LaunchPriority,
            MutatingHandler::PodUnavailableBudget,
            MutatingHandler::PersistentPodState,
            MutatingHandler::EnhancedLiveness,
            MutatingHandler::PodProbeMarker,
        ]
    );
    let pos = |h| MUTATING_ORDER.iter().position(|x| *x == h);
    assert!(pos(MutatingHandler::SidecarSet) < pos(MutatingHandler::LaunchPriority));
    assert_eq!(
        VALIDATING_ORDER,
        &[
            ValidatingHandler::WorkloadSpread,
            ValidatingHandler::PodUnavailableBudget
        ]
    );
}

/// The launch-priority step runs after the SidecarSet step, so an injected sidecar gets its
/// barrier too (upstream: "sidecarsetMutatingPod must precede
/// containerLaunchPriorityInitialization").
#[test]
fn launch_priority_sees_the_injected_sidecar() {
    let mut set: kruise_api::apps::v1beta1::SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "logs"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "log", "image": "busybox:1"}]}}))
    .expect("set");
    let hashes = crate::sidecarset::validation::hash_annotations(&set.spec).expect("hashes");
    set.metadata.annotations = Some(hashes.into_iter().collect());
    let mut obj = pod(
        None,
        json!([{"name": "a", "image": "x"}]),
        json!({"apps.kruise.io/container-launch-priority": "Ordered"}),
    );
    obj["metadata"]["labels"] = json!({"app": "web"});
    let ctx = super::PodContext {
        sidecars: crate::sidecarset::inject::InjectContext {
            sidecar_sets: vec![std::sync::Arc::new(set)],
            ..Default::default()
        },
        ..Default::default()
    };
    let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(obj.clone()), None);
    let resp = response(&admit(&body, |req| super::mutate_with(req, &ctx)));
    assert_eq!(resp["allowed"], true, "{resp}");
    let bytes = patch_bytes(&resp["patch"]).expect("a patch");
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch");
    json_patch::patch(&mut obj, &patch).expect("patch applies");
    let cs = obj["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = cs.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["log", "a"]);
    assert!(
        cs.iter().all(|c| barrier(c).is_some()),
        "every container, the sidecar too, gets a barrier: {cs:?}"
    );
}

/// `EnhancedLivenessProbe`: the slot runs only with the gate on, and its patch applies to the
/// raw Pod (probe gone, backup annotation added).
#[test]
fn enhanced_liveness_runs_only_with_its_gate() {
    use super::{PodContext, mutate_with};
    let probe = json!({"exec": {"command": ["true"]}, "periodSeconds": 10});
    let obj = pod(
        Some("apps.kruise.io/v1alpha1"),
        json!([{"name": "a", "image": "x", "livenessProbe": probe}]),
        json!({kruise_api::keys::USING_ENHANCED_LIVENESS_ANNOTATION: "true"}),
    );
    let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(obj.clone()), None);
    let admitted = |enhanced_liveness: bool| {
        let ctx = PodContext {
            enhanced_liveness,
            ..PodContext::default()
        };
        let resp = response(&admit(&body, |r| mutate_with(r, &ctx)));
        let mut patched = obj.clone();
        let patch: json_patch::Patch =
            serde_json::from_slice(&patch_bytes(&resp["patch"]).expect("patch")).expect("patch");
        json_patch::patch(&mut patched, &patch).expect("applies");
        patched
    };
    let off = admitted(false);
    assert_eq!(off["spec"]["containers"][0]["livenessProbe"], probe);
    let on = admitted(true);
    assert_eq!(on["spec"]["containers"][0].get("livenessProbe"), None);
    let backup = on["metadata"]["annotations"]
        [kruise_api::keys::CONTAINER_PROBE_CONTEXT_ANNOTATION]
        .as_str()
        .expect("backup annotation");
    assert_eq!(
        serde_json::from_str::<Value>(backup).expect("json"),
        json!([{"name": "a", "livenessProbe": probe}])
    );
}

/// `EnablePodProbeMarkerOnServerless`: the last slot writes the selected markers' probes, and
/// its patch applies to the raw Pod.
#[test]
fn probe_marker_slot_writes_the_selected_markers_probes() {
    use super::{PodContext, mutate_with};
    use kruise_api::keys;
    let marker: kruise_api::apps::v1alpha1::PodProbeMarker = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
        "metadata": {"name": "game", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "probes": [
            {"name": "idle", "containerName": "a", "probe": {"exec": {"command": ["true"]}},
             "podConditionType": "x.io/idle",
             "markerPolicy": [{"state": "Succeeded", "labels": {"idle": "true"}}]}]}}))
    .expect("marker");
    let obj = pod(None, json!([{"name": "a", "image": "x"}]), json!(null));
    let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(obj.clone()), None);
    let ctx = PodContext {
        probe_markers: vec![marker],
        ..PodContext::default()
    };
    let resp = response(&admit(&body, |r| mutate_with(r, &ctx)));
    let mut patched = obj;
    let patch: json_patch::Patch =
        serde_json::from_slice(&patch_bytes(&resp["patch"]).expect("patch")).expect("patch");
    json_patch::patch(&mut patched, &patch).expect("applies");
    let ann = &patched["metadata"]["annotations"];
    assert_eq!(ann[keys::POD_PROBE_MARKER_LIST_ANNOTATION], "game");
    assert_eq!(
        serde_json::from_str::<Value>(
            ann[keys::POD_PROBE_MARKER_ANNOTATION]
                .as_str()
                .expect("set")
        )
        .expect("json"),
        json!([{"name": "idle", "containerName": "a", "probe": {"exec": {"command": ["true"]}},
            "podConditionType": "x.io/idle"}])
    );
}
