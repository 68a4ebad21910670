use kruise_api::apps::v1beta1::{CloneSet, ContainerRecreateRequest};
use kruise_api::keys;
use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::*;

/// What the conversion webhook answers for `obj` converted to `desired`: the response object
/// of a ConversionReview, as the API server would receive it.
fn webhook(obj: &Value, desired: &str) -> Value {
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "1", "desiredAPIVersion": desired, "objects": [obj]},
    });
    let body = serde_json::to_vec(&review).expect("review");
    let out: Value =
        serde_json::from_slice(&kruise_webhook::handle_conversion(&body)).expect("response");
    assert_eq!(out["response"]["result"]["status"], "Success", "{out}");
    out["response"]["convertedObjects"][0].clone()
}

fn dynamic(obj: &Value) -> DynamicObject {
    serde_json::from_value(obj.clone()).expect("dynamic object")
}

/// A v1alpha1 CloneSet with every part the conversion maps, a status and server metadata.
fn alpha_cloneset() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "cs", "namespace": "ns", "uid": "u-1", "resourceVersion": "42",
            "generation": 3,
            "labels": {"app": "a", keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL: "true"},
            "annotations": {keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION: "2"},
            "managedFields": [{"manager": "kubectl", "operation": "Apply",
                "apiVersion": "apps.kruise.io/v1alpha1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {}}}]},
        "spec": {"replicas": 5, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}},
                "spec": {"containers": [{"name": "c", "image": "img:1"}]}},
            "updateStrategy": {"type": "InPlaceIfPossible", "partition": 1, "maxUnavailable": "20%",
                "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}},
            "scaleStrategy": {"disablePVCReuse": true, "podsToDelete": ["p-1"]}},
        "status": {"observedGeneration": 3, "replicas": 5, "readyReplicas": 4,
            "availableReplicas": 4, "updatedReplicas": 2, "updatedReadyReplicas": 2,
            "updatedAvailableReplicas": 2, "expectedUpdatedReplicas": 4,
            "updateRevision": "cs-2", "currentRevision": "cs-1", "collisionCount": 0,
            "labelSelector": "app=a",
            "conditions": [{"type": "FailedScale", "status": "False",
                "lastTransitionTime": "2026-01-02T03:04:05Z", "reason": "r", "message": "m"}]},
    })
}

/// The object the webhook returns, decoded as the controller's type, is the one the
/// controller now builds in process from the stored object.
#[test]
fn cloneset_read_at_v1alpha1_is_what_the_webhook_returns() {
    let stored = of::<CloneSet>();
    assert!(stored.converts(), "CloneSets are stored as v1alpha1");
    assert_eq!(stored.resource().version, keys::VERSION_V1ALPHA1);
    let alpha = alpha_cloneset();
    let from_webhook: CloneSet =
        serde_json::from_value(webhook(&alpha, "apps.kruise.io/v1beta1")).expect("typed");
    let here = stored.served(&dynamic(&alpha)).expect("converted");
    assert_eq!(here, from_webhook);
    // The parts a reconcile relies on survive: identity, version to conflict on, status.
    assert_eq!(here.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(here.metadata.uid.as_deref(), Some("u-1"));
    assert_eq!(here.metadata.generation, Some(3));
    assert_eq!(here.metadata.managed_fields.as_ref().map(Vec::len), Some(1));
    let status = here.status.as_ref().expect("status");
    assert_eq!((status.replicas, status.updated_ready_replicas), (5, 2));
    assert_eq!(status.update_revision, "cs-2");
    assert_eq!(status.conditions.len(), 1);
    // Back to the stored version as the webhook would take it there (the typed object leaves
    // `enablePVCReuse: false` out, so the conversion keeps a record of it either way).
    let back = stored.stored(&here).expect("back");
    let typed = serde_json::to_value(&here).expect("json");
    assert_eq!(
        serde_json::to_value(&back).expect("json"),
        webhook(&typed, "apps.kruise.io/v1alpha1")
    );
}

/// A status change is a status patch whose JSON is the same at v1alpha1 (both versions have one
/// status), and nothing else.
#[test]
fn cloneset_status_change_is_one_status_patch() {
    let stored = of::<CloneSet>();
    let before = stored
        .served(&dynamic(&alpha_cloneset()))
        .expect("converted");
    let mut after = before.clone();
    if let Some(s) = after.status.as_mut() {
        s.updated_replicas = 5;
    }
    let p = stored.patches(&before, &after).expect("patches");
    assert_eq!(p.status, Some(json!({"status": {"updatedReplicas": 5}})));
    assert_eq!(p.object, None);
}

fn alpha_crr() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest",
        "metadata": {"name": "r", "namespace": "ns", "uid": "u-2", "resourceVersion": "7",
            "finalizers": [keys::CRR_UNREADY_ACQUIRED_FINALIZER],
            "labels": {keys::CRR_ACTIVE_LABEL: "true"},
            "annotations": {
                keys::CRR_SYNC_CONTAINER_STATUSES_ANNOTATION:
                    "[{\"name\":\"c\",\"ready\":true,\"restartCount\":1,\"containerID\":\"containerd://1\"}]",
                keys::CRR_UNREADY_ACQUIRED_FINALIZER: "2026-01-02T03:04:05Z"}},
        "spec": {"podName": "p", "containers": [{"name": "c"}],
            "strategy": {"failurePolicy": "Fail", "unreadyGracePeriodSeconds": 3},
            "ttlSecondsAfterFinished": 60},
        "status": {"phase": "Recreating",
            "containerRecreateStates": [{"name": "c", "phase": "Recreating"}]},
    })
}

/// v1alpha1's annotations are v1beta1's status fields, in process as through the webhook.
#[test]
fn crr_read_at_v1alpha1_is_what_the_webhook_returns() {
    let stored = of::<ContainerRecreateRequest>();
    assert!(stored.converts(), "requests are stored as v1alpha1");
    let alpha = alpha_crr();
    let from_webhook: ContainerRecreateRequest =
        serde_json::from_value(webhook(&alpha, "apps.kruise.io/v1beta1")).expect("typed");
    let here = stored.served(&dynamic(&alpha)).expect("converted");
    assert_eq!(here, from_webhook);
    let status = here.status.as_ref().expect("status");
    assert_eq!(status.container_status_snapshot.len(), 1);
    assert_eq!(status.container_status_snapshot[0].restart_count, 1);
    assert_eq!(status.conditions.len(), 1);
    assert_eq!(
        status.conditions[0].type_,
        keys::CRR_CONDITION_PRE_RECREATE_GRACE
    );
    assert_eq!(status.container_recreate_states.len(), 1);
    assert_eq!(here.metadata.resource_version.as_deref(), Some("7"));
    let back = stored.stored(&here).expect("back");
    assert_eq!(serde_json::to_value(&back).expect("json"), alpha);
}

/// A snapshot written in v1beta1's status is, at v1alpha1, the annotation (a metadata patch),
/// the write the webhook would have made of it.
#[test]
fn crr_snapshot_change_is_an_annotation_patch() {
    let stored = of::<ContainerRecreateRequest>();
    let before = stored.served(&dynamic(&alpha_crr())).expect("converted");
    let mut after = before.clone();
    if let Some(s) = after.status.as_mut() {
        s.container_status_snapshot[0].restart_count = 2;
    }
    let p = stored.patches(&before, &after).expect("patches");
    assert_eq!(p.status, None);
    let object = p.object.expect("object patch");
    let text = object["metadata"]["annotations"][keys::CRR_SYNC_CONTAINER_STATUSES_ANNOTATION]
        .as_str()
        .expect("annotation");
    let snapshot: Value = serde_json::from_str(text).expect("json");
    assert_eq!(snapshot[0]["restartCount"], 2);
    assert_eq!(object.as_object().map(|o| o.len()), Some(1), "{object}");
}
