use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps::v1beta1::{SidecarSet, SidecarSetInjectRevision};
use kube::core::admission::Operation;
use serde_json::Value;

use super::SidecarSetLookup;
use super::validation::{self as validate, validate_set};
use crate::review::{Outcome, Request};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::json;

/// A cluster with these SidecarSets and one stored revision, `mesh-1`, whose proxy image
/// is `e:1`.
struct Cluster(Vec<SidecarSet>);

impl crate::podunavailablebudget::PubLookup for Cluster {}
impl crate::persistentpodstate::PpsLookup for Cluster {}
impl crate::workloadspread::WsLookup for Cluster {}
impl crate::podprobemarker::PpmLookup for Cluster {}
impl crate::statefulset::claims::StorageClassLookup for Cluster {}
impl crate::configuration::scope::ScopeLookup for Cluster {}

impl SidecarSetLookup for Cluster {
    async fn sidecar_sets(&self) -> Result<Vec<std::sync::Arc<SidecarSet>>, String> {
        Ok(self.0.iter().cloned().map(std::sync::Arc::new).collect())
    }

    async fn injection_revision(
        &self,
        _set: &SidecarSet,
        rev: &SidecarSetInjectRevision,
    ) -> Result<Option<ControllerRevision>, String> {
        let found = rev.revision_name.as_deref() == Some("mesh-1")
            || rev.custom_version.as_deref() == Some("blue");
        Ok(found.then(|| ControllerRevision {
            metadata: kube::api::ObjectMeta {
                name: Some("mesh-1".into()),
                ..Default::default()
            },
            data: Some(RawExtension(json!({"spec": {
                "containers": [{"name": "proxy", "image": "e:1"}]}}))),
            revision: 1,
        }))
    }
}

fn set(strategy: Value, revision: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "mesh"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "proxy", "image": "e:2"}],
            "updateStrategy": strategy,
            "injectionStrategy": {"revision": revision}}})
}

fn request(resource: &str, namespace: Option<&str>, object: Value) -> Request {
    Request {
        uid: "u".into(),
        operation: Operation::Create,
        group: String::new(),
        version: "v1".into(),
        kind: String::new(),
        resource: resource.into(),
        sub_resource: None,
        namespace: namespace.map(str::to_owned),
        name: String::new(),
        object: Some(object),
        old_object: None,
        options: None,
        dry_run: false,
        username: "tester".to_owned(),
    }
}

fn message(o: &Outcome) -> String {
    match o {
        Outcome::Deny { message, .. } => message.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_pin_to_a_missing_revision_is_refused_naming_the_field() {
    let cluster = Cluster(Vec::new());
    let missing = set(json!({}), json!({"revisionName": "mesh-9"}));
    let out = validate_set(
        request("sidecarsets", None, missing),
        &cluster,
        &Default::default(),
    )
    .await;
    let m = message(&out);
    assert!(
        m.starts_with("spec.injectionStrategy.revision.revisionName: Not found: \"mesh-9\""),
        "{m}"
    );
    let version = set(json!({}), json!({"customVersion": "green"}));
    let m = message(
        &validate_set(
            request("sidecarsets", None, version),
            &cluster,
            &Default::default(),
        )
        .await,
    );
    assert!(m.contains("customVersion: Not found: \"green\""), "{m}");
    for ok in [
        json!({"revisionName": "mesh-1"}),
        json!({"customVersion": "blue", "policy": "Partial"}),
    ] {
        let out = validate_set(
            request("sidecarsets", None, set(json!({}), ok)),
            &cluster,
            &Default::default(),
        )
        .await;
        assert!(matches!(out, Outcome::Allow), "{out:?}");
    }
}

/// The proxy image the Pod webhook injects into a Pod with these labels.
async fn injected_image(set: &Value, labels: Value) -> String {
    let decoded = validate::decode(set).expect("set");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team", "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "a:1"}]}});
    let out = crate::pod::mutate_pod(
        request("pods", Some("team"), pod.clone()),
        &Cluster(vec![decoded]),
        &kruise_api::features::FeatureGates::default(),
    )
    .await;
    let Outcome::Patch(patch) = out else {
        panic!("expected an injection, got {out:?}");
    };
    let mut after = pod;
    json_patch::patch(&mut after, &patch).expect("patch applies");
    after["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "proxy")
        .and_then(|c| c["image"].as_str())
        .expect("proxy injected")
        .to_owned()
}

#[tokio::test]
async fn partial_injects_the_pinned_revision_only_outside_the_update_selector() {
    let partial = set(
        json!({"selector": {"matchLabels": {"canary": "true"}}}),
        json!({"revisionName": "mesh-1", "policy": "Partial"}),
    );
    assert_eq!(injected_image(&partial, json!({"app": "web"})).await, "e:1");
    assert_eq!(
        injected_image(&partial, json!({"app": "web", "canary": "true"})).await,
        "e:2"
    );
    // Always: the pinned revision for every new Pod.
    let always = set(
        json!({"selector": {"matchLabels": {"canary": "true"}}}),
        json!({"revisionName": "mesh-1"}),
    );
    assert_eq!(
        injected_image(&always, json!({"app": "web", "canary": "true"})).await,
        "e:1"
    );
}

#[test]
fn defaulting_sets_inject_policies_as_upstream() {
    let raw = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "mesh"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "initContainers": [{"name": "init", "image": "b:1"},
                {"name": "first", "image": "b:1", "podInjectPolicy": "BeforeAppContainer"}],
            "containers": [{"name": "proxy", "image": "e:2"},
                {"name": "tail", "image": "e:2", "podInjectPolicy": "AfterAppContainer",
                 "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "x:1"},
                 "shareVolumePolicy": {"type": "enabled"}}]}});
    let Outcome::Patch(patch) = super::defaults::mutate(&request("sidecarsets", None, raw.clone()))
    else {
        panic!("expected a patch");
    };
    let mut stored = raw;
    json_patch::patch(&mut stored, &patch).expect("patch applies");
    let spec = &stored["spec"];
    assert_eq!(
        spec["initContainers"][0]["podInjectPolicy"],
        "AfterAppContainer"
    );
    assert_eq!(
        spec["initContainers"][1]["podInjectPolicy"],
        "BeforeAppContainer"
    );
    assert_eq!(
        spec["containers"][0]["podInjectPolicy"],
        "BeforeAppContainer"
    );
    assert_eq!(
        spec["containers"][1]["podInjectPolicy"],
        "AfterAppContainer"
    );
    assert_eq!(
        spec["initContainers"][0]["upgradeStrategy"]["upgradeType"],
        "ColdUpgrade"
    );
    assert_eq!(
        spec["containers"][0]["shareVolumePolicy"]["type"],
        "disabled"
    );
    assert_eq!(
        spec["containers"][1]["upgradeStrategy"]["upgradeType"],
        "HotUpgrade"
    );
    assert_eq!(
        spec["containers"][1]["shareVolumePolicy"]["type"],
        "enabled"
    );
    // The hashes cover the defaulted containers, as upstream hashes after defaulting.
    let decoded = validate::decode(&stored).expect("decodes");
    let [(key, hash), _] = validate::hash_annotations(&decoded.spec).expect("hashes");
    assert_eq!(
        stored["metadata"]["annotations"][key.as_str()],
        hash.as_str()
    );
}

#[tokio::test]
async fn patch_metadata_without_a_whitelist_is_refused_and_defaults_to_retain() {
    let mut raw = set(json!({}), Value::Null);
    raw["spec"]["patchPodMetadata"] = json!([{"annotations": {"mesh/version": "v1"}}]);
    let m = message(
        &validate_set(
            request("sidecarsets", None, raw.clone()),
            &Cluster(Vec::new()),
            &Default::default(),
        )
        .await,
    );
    assert!(
        m.starts_with(
            "spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found"
        ),
        "{m}"
    );
    let Outcome::Patch(patch) = super::defaults::mutate(&request("sidecarsets", None, raw.clone()))
    else {
        panic!("expected a patch");
    };
    json_patch::patch(&mut raw, &patch).expect("patch applies");
    assert_eq!(raw["spec"]["patchPodMetadata"][0]["patchPolicy"], "Retain");
}
