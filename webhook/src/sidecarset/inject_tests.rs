use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::keys;
use kruise_api::sidecarset as wire;

use super::inject::*;
use serde_json::{Value, json};

fn set(name: &str, spec: Value) -> SidecarSet {
    let mut s: SidecarSet = serde_json::from_value(json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": name}, "spec": spec}))
    .expect("set");
    let [(k1, v1), (k2, v2)] = super::validation::hash_annotations(&s.spec).expect("hashes");
    s.metadata.annotations = Some(BTreeMap::from([(k1, v1), (k2, v2)]));
    s
}

fn pod(labels: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "team-a",
        "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "app:1",
            "env": [{"name": "TZ", "value": "UTC"}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}]}}))
    .expect("pod")
}

fn web_set() -> SidecarSet {
    set(
        "logs",
        json!({"selector": {"matchLabels": {"app": "web"}},
        "containers": [
            {"name": "before", "image": "busybox:1",
             "volumeMounts": [{"name": "logs", "mountPath": "/logs"}],
             "transferEnv": [{"sourceContainerName": "main", "envName": "TZ"}]},
            {"name": "after", "image": "busybox:1", "podInjectPolicy": "AfterAppContainer",
             "shareVolumePolicy": {"type": "enabled"}}],
        "initContainers": [{"name": "setup", "image": "busybox:1"}],
        "volumes": [{"name": "logs", "emptyDir": {}}, {"name": "data", "hostPath": {"path": "/x"}}],
        "imagePullSecrets": [{"name": "reg"}],
        "patchPodMetadata": [{"annotations": {"team": "platform"}}]}),
    )
}

fn now() -> Time {
    Time(jiff::Timestamp::from_second(1_700_000_000).expect("ts"))
}

#[test]
fn injects_in_upstream_order() {
    let ctx = InjectContext {
        sidecar_sets: vec![Arc::new(web_set())],
        ..Default::default()
    };
    let mut p = pod(json!({"app": "web"}));
    assert!(inject(&mut p, &ctx, &now()).expect("inject"));
    let spec = p.spec.as_ref().expect("spec");
    let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["before", "main", "after"]);
    let before = &spec.containers[0];
    let env: Vec<(&str, Option<&str>)> = before
        .env
        .iter()
        .flatten()
        .map(|e| (e.name.as_str(), e.value.as_deref()))
        .collect();
    assert_eq!(env, [("IS_INJECTED", Some("true")), ("TZ", Some("UTC"))]);
    // Shared mounts: the app's /data shows up in the sidecar that asked for it.
    let after_mounts: Vec<&str> = spec.containers[2]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    assert_eq!(after_mounts, ["/data"]);
    // The Pod's own "data" volume wins over the SidecarSet's; "logs" is added.
    let vols: Vec<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(vols, ["data", "logs"]);
    assert!(spec.volumes.as_ref().expect("v")[0].empty_dir.is_some());
    let inits: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(inits, ["setup"]);
    assert_eq!(
        spec.image_pull_secrets.as_ref().expect("secrets")[0].name,
        "reg"
    );
    let ann = p.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(ann[keys::SIDECARSET_INJECTED_LIST_ANNOTATION], "logs");
    assert_eq!(ann["team"], "platform");
    let hashes = wire::parse_hash_annotation(
        keys::SIDECARSET_HASH_ANNOTATION,
        &ann[keys::SIDECARSET_HASH_ANNOTATION],
    )
    .expect("hash annotation");
    let set = web_set();
    let want =
        set.metadata.annotations.as_ref().expect("a")[keys::SIDECARSET_HASH_ANNOTATION].clone();
    assert_eq!(hashes["logs"].hash, want);
    assert_eq!(hashes["logs"].sidecar_list, ["after", "before"]);
}

#[test]
fn non_matching_and_paused_are_untouched() {
    let mut paused = web_set();
    paused.spec.injection_strategy.paused = true;
    for (ctx, labels) in [
        (
            InjectContext {
                sidecar_sets: vec![Arc::new(web_set())],
                ..Default::default()
            },
            json!({"app": "db"}),
        ),
        (
            InjectContext {
                sidecar_sets: vec![Arc::new(paused)],
                ..Default::default()
            },
            json!({"app": "web"}),
        ),
    ] {
        let mut p = pod(labels);
        let before = p.clone();
        assert!(!inject(&mut p, &ctx, &now()).expect("inject"));
        assert_eq!(p, before);
    }
}

#[test]
fn hot_upgrade_injects_a_pair() {
    let s = set(
        "proxy",
        json!({"selector": {"matchLabels": {"app": "web"}},
        "containers": [{"name": "envoy", "image": "envoy:1",
            "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]}),
    );
    let ctx = InjectContext {
        sidecar_sets: vec![Arc::new(s)],
        ..Default::default()
    };
    let mut p = pod(json!({"app": "web"}));
    assert!(inject(&mut p, &ctx, &now()).expect("inject"));
    let spec = p.spec.as_ref().expect("spec");
    let got: Vec<(&str, Option<&str>)> = spec
        .containers
        .iter()
        .map(|c| (c.name.as_str(), c.image.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("envoy-1", Some("envoy:1")),
            ("envoy-2", Some("empty:1")),
            ("main", Some("app:1"))
        ]
    );
    let ann = p.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(
        ann[keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION],
        r#"{"envoy":"envoy-1"}"#
    );
    assert_eq!(ann["version.sidecarset.kruise.io/envoy-1"], "1");
}

#[test]
fn init_containers_follow_their_inject_policy() {
    let s = set(
        "inits",
        json!({"selector": {"matchLabels": {"app": "web"}},
        "containers": [{"name": "proxy", "image": "e:1"}],
        "initContainers": [
            {"name": "early", "image": "busybox:1", "podInjectPolicy": "BeforeAppContainer"},
            {"name": "late", "image": "busybox:1"}]}),
    );
    let ctx = InjectContext {
        sidecar_sets: vec![Arc::new(s)],
        ..Default::default()
    };
    let mut p = pod(json!({"app": "web"}));
    p.spec.as_mut().expect("spec").init_containers = Some(vec![
        serde_json::from_value(json!({"name": "own", "image": "app:1"})).expect("container"),
    ]);
    assert!(inject(&mut p, &ctx, &now()).expect("inject"));
    let names: Vec<String> = p
        .spec
        .expect("spec")
        .init_containers
        .expect("inits")
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["early", "own", "late"]);
}
