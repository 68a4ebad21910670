//! Serde round trips of every kind against hand-written JSON that uses upstream OpenKruise
//! field names, plus the defaults of optional fields.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::{v1alpha1, v1beta1};
use kruise_api::keys;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Parses `raw`, serializes it again and checks nothing was lost or renamed.
fn round_trip<T: Serialize + DeserializeOwned>(raw: &Value) -> T {
    let parsed: T = serde_json::from_value(raw.clone()).expect("sample parses");
    let again = serde_json::to_value(&parsed).expect("serializes");
    assert_eq!(&again, raw, "round trip changed the object");
    parsed
}

fn cloneset_v1beta1_sample() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "CloneSet",
        "metadata": {"name": "demo", "namespace": "default", "generation": 3},
        "spec": {
            "replicas": 5,
            "selector": {"matchLabels": {"app": "demo"}},
            "template": {
                "metadata": {"labels": {"app": "demo"}},
                "spec": {
                    "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                    "containers": [{"name": "main", "image": "nginx:1.27"}]
                }
            },
            // k8s-openapi always writes apiVersion/kind of a PVC; Go accepts them here.
            "volumeClaimTemplates": [{
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
            }],
            "scaleStrategy": {
                "podsToDelete": ["demo-abcde"],
                "maxUnavailable": 1,
                "enablePVCReuse": true,
                "excludePreparingDelete": true
            },
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {
                    "partition": "20%",
                    "maxUnavailable": "50%",
                    "maxSurge": 1,
                    "podUpdatePolicy": "InPlaceIfPossible",
                    "paused": true,
                    "priorityStrategy": {"weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"zone": "a"}}}]},
                    "scatterStrategy": [{"key": "zone", "value": "a"}],
                    "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}
                }
            },
            "revisionHistoryLimit": 5,
            "minReadySeconds": 3,
            "lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}},
            "progressDeadlineSeconds": 600
        },
        "status": {
            "observedGeneration": 3,
            "replicas": 5,
            "readyReplicas": 4,
            "availableReplicas": 4,
            "updatedReplicas": 2,
            "updatedReadyReplicas": 2,
            "updatedAvailableReplicas": 2,
            "expectedUpdatedReplicas": 4,
            "updateRevision": "demo-6c8d7f9b5",
            "currentRevision": "demo-5b7c6d8a4",
            "collisionCount": 0,
            "conditions": [{
                "type": "Progressing",
                "status": "True",
                "lastUpdateTime": "2026-11-29T20:00:00Z",
                "lastTransitionTime": "2026-11-29T19:00:00Z",
                "reason": "CloneSetUpdated",
                "message": "CloneSet is progressing"
            }],
            "labelSelector": "app=demo"
        }
    })
}

#[test]
fn cloneset_v1beta1_round_trip() {
    let cs: v1beta1::CloneSet = round_trip(&cloneset_v1beta1_sample());
    let ru = cs
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .expect("rollingUpdate");
    assert_eq!(
        ru.pod_update_policy,
        Some(v1beta1::CloneSetPodUpdateStrategyType::InPlaceIfPossible)
    );
    assert_eq!(ru.partition, Some(IntOrString::String("20%".into())));
    assert_eq!(
        cs.spec.template.spec.as_ref().map(|s| s.containers.len()),
        Some(1)
    );
    assert_eq!(cs.spec.volume_claim_templates.len(), 1);
    let status = cs.status.as_ref().expect("status");
    assert_eq!(
        status.conditions[0].type_,
        keys::CLONESET_CONDITION_PROGRESSING
    );
    assert_eq!(status.conditions[0].reason, keys::CLONESET_REASON_UPDATED);
    assert_eq!(v1beta1::CloneSet::api_version(&()), keys::APPS_V1BETA1);
}

#[test]
fn cloneset_v1beta1_minimal_defaults() {
    let raw = json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "CloneSet",
        "metadata": {"name": "demo"},
        "spec": {
            "selector": {"matchLabels": {"app": "demo"}},
            "template": {"metadata": {"labels": {"app": "demo"}}}
        }
    });
    let cs: v1beta1::CloneSet = serde_json::from_value(raw).expect("parses");
    assert_eq!(cs.spec.replicas, None);
    assert_eq!(cs.spec.min_ready_seconds, 0);
    assert!(cs.spec.lifecycle.is_none());
    assert!(!cs.spec.scale_strategy.enable_pvc_reuse);
    assert_eq!(cs.spec.update_strategy.type_, None);
    assert!(cs.spec.update_strategy.rolling_update.is_none());
    assert!(cs.status.is_none());
    assert_eq!(
        v1beta1::CloneSetUpdateStrategyType::default(),
        v1beta1::CloneSetUpdateStrategyType::RollingUpdate
    );
    assert_eq!(
        v1beta1::CloneSetPodUpdateStrategyType::default(),
        v1beta1::CloneSetPodUpdateStrategyType::ReCreate
    );
    // Go never omits non-pointer structs, so neither do we: these serialize as {}.
    let spec = serde_json::to_value(&cs.spec).expect("serializes");
    assert_eq!(spec["scaleStrategy"], json!({}));
    assert_eq!(spec["updateStrategy"], json!({}));
    assert!(spec.get("volumeClaimTemplates").is_none());
}

#[test]
fn cloneset_status_requires_upstream_counters() {
    let err = serde_json::from_value::<v1beta1::CloneSetStatus>(json!({"replicas": 1}));
    assert!(
        err.is_err(),
        "readyReplicas and friends are required like upstream"
    );
    let ok: v1beta1::CloneSetStatus = serde_json::from_value(json!({
        "replicas": 0, "readyReplicas": 0, "availableReplicas": 0, "updatedReplicas": 0, "updatedReadyReplicas": 0,
        "conditions": [{"type": "FailedScale", "status": "True", "lastUpdateTime": null, "lastTransitionTime": null}]
    }))
    .expect("Go writes zero times as null");
    assert!(ok.conditions[0].last_update_time.is_none());
}

#[test]
fn cloneset_v1alpha1_round_trip() {
    let raw = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "CloneSet",
        "metadata": {"name": "demo", "namespace": "default"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "demo"}},
            "template": {"metadata": {"labels": {"app": "demo"}}, "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}},
            "scaleStrategy": {"podsToDelete": ["demo-x"], "maxUnavailable": "10%", "disablePVCReuse": true},
            "updateStrategy": {
                "type": "InPlaceOnly",
                "partition": 1,
                "maxUnavailable": 2,
                "maxSurge": "10%",
                "paused": true,
                "priorityStrategy": {"orderPriority": [{"orderedKey": "rank"}]},
                "scatterStrategy": [{"key": "zone", "value": "b"}],
                "inPlaceUpdateStrategy": {"gracePeriodSeconds": 5}
            },
            "minReadySeconds": 1,
            "lifecycle": {"inPlaceUpdate": {"finalizersHandler": ["x/y"]}}
        },
        "status": {
            "replicas": 3, "readyReplicas": 3, "availableReplicas": 3, "updatedReplicas": 3, "updatedReadyReplicas": 3,
            "updateRevision": "demo-1", "currentRevision": "demo-1", "labelSelector": "app=demo"
        }
    });
    let cs: v1alpha1::CloneSet = round_trip(&raw);
    assert_eq!(
        cs.spec.update_strategy.type_,
        Some(v1alpha1::CloneSetUpdateStrategyType::InPlaceOnly)
    );
    assert!(cs.spec.scale_strategy.disable_pvc_reuse);
    assert_eq!(
        v1alpha1::CloneSetUpdateStrategyType::default(),
        v1alpha1::CloneSetUpdateStrategyType::ReCreate
    );
    assert_eq!(v1alpha1::CloneSet::api_version(&()), keys::APPS_V1ALPHA1);
}

fn crr_spec() -> Value {
    json!({
        "podName": "demo-abcde",
        "containers": [{
            "name": "main",
            "preStop": {"exec": {"command": ["/bin/sh", "-c", "sleep 1"]}},
            "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}],
            "statusContext": {"containerID": "containerd://abc", "restartCount": 1}
        }, {
            "name": "sidecar",
            "preStop": {"httpGet": {"path": "/quit", "port": "http"}}
        }],
        "strategy": {
            "failurePolicy": "Ignore",
            "orderedRecreate": true,
            "forceRecreate": true,
            "terminationGracePeriodSeconds": 30,
            "unreadyGracePeriodSeconds": 3,
            "minStartedSeconds": 5
        },
        "activeDeadlineSeconds": 300,
        "ttlSecondsAfterFinished": 1800
    })
}

#[test]
fn crr_v1beta1_round_trip() {
    let raw = json!({
        "apiVersion": "apps.kruise.io/v1beta1",
        "kind": "ContainerRecreateRequest",
        "metadata": {
            "name": "crr-1", "namespace": "default",
            "labels": {"crr.apps.kruise.io/pod-uid": "uid-1", "crr.apps.kruise.io/node-name": "node-1", "crr.apps.kruise.io/active": "true"},
            "finalizers": ["crr.apps.kruise.io/unready-acquired"]
        },
        "spec": crr_spec(),
        "status": {
            "phase": "Recreating",
            "message": "recreating main",
            "containerRecreateStates": [{"name": "main", "phase": "Succeeded", "isKilled": true}, {"name": "sidecar", "phase": "Pending"}],
            "containerStatusSnapshot": [{"name": "main", "ready": true, "restartCount": 2, "containerID": "containerd://new"}],
            "conditions": [{
                "type": "PreRecreateGrace", "status": "True", "lastTransitionTime": "2026-11-29T20:00:00Z",
                "reason": "UnreadyGrace", "message": "pod marked not ready"
            }]
        }
    });
    let crr: v1beta1::ContainerRecreateRequest = round_trip(&raw);
    let status = crr.status.as_ref().expect("status");
    assert_eq!(
        status.phase,
        v1beta1::ContainerRecreateRequestPhase::Recreating
    );
    assert!(!status.phase.is_finished());
    assert_eq!(
        status.conditions[0].type_,
        keys::CRR_CONDITION_PRE_RECREATE_GRACE
    );
    let strategy = crr.spec.strategy.as_ref().expect("strategy");
    assert_eq!(
        strategy.failure_policy,
        Some(v1beta1::ContainerRecreateRequestFailurePolicyType::Ignore)
    );
    assert!(
        crr.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(keys::CRR_NODE_NAME_LABEL))
    );
}

#[test]
fn crr_v1alpha1_round_trip_and_defaults() {
    let raw = json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "ContainerRecreateRequest",
        "metadata": {"name": "crr-1", "namespace": "default"},
        "spec": crr_spec(),
        "status": {"phase": "Completed", "completionTime": "2026-11-29T20:00:00Z", "containerRecreateStates": [{"name": "main", "phase": "Failed", "message": "boom"}]}
    });
    let crr: v1alpha1::ContainerRecreateRequest = round_trip(&raw);
    assert!(crr.status.as_ref().is_some_and(|s| s.phase.is_finished()));
    let minimal: v1alpha1::ContainerRecreateRequestSpec =
        serde_json::from_value(json!({"podName": "p", "containers": [{"name": "c"}]}))
            .expect("parses");
    assert!(minimal.strategy.is_none());
    assert_eq!(
        v1beta1::ContainerRecreateRequestStrategy::default().min_started_seconds,
        0
    );
    assert_eq!(
        v1beta1::ContainerRecreateRequestFailurePolicyType::default(),
        v1beta1::ContainerRecreateRequestFailurePolicyType::Fail
    );
}

fn pull_template_fields() -> serde_json::Map<String, Value> {
    let v = json!({
        "pullSecrets": ["regcred"],
        "selector": {"names": ["node-1"], "matchLabels": {"pool": "a"}, "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
        "parallelism": "50%",
        "pullPolicy": {"timeoutSeconds": 300, "backoffLimit": 2},
        "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 1200, "ttlSecondsAfterFinished": 300},
        "sandboxConfig": {"labels": {"a": "b"}, "annotations": {"c": "d"}},
        "imagePullPolicy": "Always"
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

#[test]
fn imagepulljob_both_versions_round_trip() {
    let mut spec = pull_template_fields();
    spec.insert("image".into(), json!("nginx:1.27"));
    for version in ["v1alpha1", "v1beta1"] {
        let raw = json!({
            "apiVersion": format!("apps.kruise.io/{version}"),
            "kind": "ImagePullJob",
            "metadata": {"name": "pull", "namespace": "default", "finalizers": [keys::DELETION_PROTECTION_FINALIZER]},
            "spec": spec,
            "status": {
                "startTime": "2026-11-29T20:00:00Z", "desired": 3, "active": 1, "succeeded": 1, "failed": 1,
                "message": "1 failed", "failedNodes": ["node-2"]
            }
        });
        if version == "v1alpha1" {
            let job: v1alpha1::ImagePullJob = round_trip(&raw);
            assert_eq!(job.spec.image, "nginx:1.27");
        } else {
            let job: v1beta1::ImagePullJob = round_trip(&raw);
            let sel = job.spec.template.selector.as_ref().expect("selector");
            assert_eq!(sel.names, ["node-1"]);
            assert!(sel.label_selector().match_labels.is_some());
            assert_eq!(
                job.spec.template.image_pull_policy,
                Some(v1beta1::ImagePullPolicy::Always)
            );
        }
    }
    // Zero counters are always written, as Go does.
    let status = serde_json::to_value(v1beta1::ImagePullJobStatus::default()).expect("serializes");
    assert_eq!(
        status,
        json!({"desired": 0, "active": 0, "succeeded": 0, "failed": 0})
    );
    let pod_selector: v1beta1::ImagePullJobPodSelector =
        serde_json::from_value(json!({"matchLabels": {"app": "demo"}})).expect("parses");
    assert!(pod_selector.label_selector().match_expressions.is_none());
}

#[test]
fn imagelistpulljob_both_versions_round_trip() {
    let mut spec = pull_template_fields();
    spec.insert("images".into(), json!(["nginx:1.27", "busybox:1.37"]));
    let status = json!({
        "desired": 2, "active": 0, "completed": 2, "succeeded": 1,
        "completionTime": "2026-11-29T20:00:00Z",
        "failedImageStatuses": [{"imagePullJob": "list-abc", "name": "busybox:1.37", "message": "failed on 1 node"}]
    });
    let alpha = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ImageListPullJob", "metadata": {"name": "l"}, "spec": spec, "status": status});
    let beta = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImageListPullJob", "metadata": {"name": "l"}, "spec": spec, "status": status});
    let a: v1alpha1::ImageListPullJob = round_trip(&alpha);
    let b: v1beta1::ImageListPullJob = round_trip(&beta);
    assert_eq!(a.spec.images, b.spec.images);
    assert_eq!(a.spec.template, b.spec.template);
}

#[test]
fn nodeimage_both_versions_round_trip() {
    let tags = json!([{
        "tag": "1.27",
        "createdAt": "2026-11-29T20:00:00Z",
        "pullPolicy": {"timeoutSeconds": 600, "backoffLimit": 3, "ttlSecondsAfterFinished": 300, "activeDeadlineSeconds": 1200},
        "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob", "name": "pull", "namespace": "default", "uid": "u1"}],
        "version": 2,
        "imagePullPolicy": "IfNotPresent"
    }]);
    let status = json!({
        "desired": 1, "succeeded": 1, "failed": 0, "pulling": 0, "waiting": 0,
        "imageStatuses": {"nginx": {"tags": [{
            "tag": "1.27", "phase": "Succeeded", "progress": 100, "startTime": "2026-11-29T20:00:00Z",
            "completionTime": "2026-11-29T20:01:00Z", "version": 2, "imageID": "sha256:abc", "message": "done"
        }]}},
        "firstSyncStatus": {"syncAt": "2026-11-29T20:01:00Z", "status": "Succeeded", "message": "all pulled"}
    });
    let beta = json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage", "metadata": {"name": "node-1"},
        "spec": {"images": {"nginx": {"pullSecrets": [{"namespace": "kruise-daemon-config", "name": "s1", "mode": "batch"}], "tags": tags, "sandboxConfig": {"labels": {"a": "b"}}}}},
        "status": status
    });
    let n: v1beta1::NodeImage = round_trip(&beta);
    let secret = &n.spec.images["nginx"].pull_secrets[0];
    assert_eq!(secret.mode, v1beta1::ReferenceObject::MODE_BATCH);
    assert_eq!(secret.to_string(), "kruise-daemon-config/s1");
    assert_eq!(v1beta1::ReferenceObject::parse("ns/name").name, "name");
    assert_eq!(v1beta1::ReferenceObject::parse("name").to_string(), "name");
    let st = n.status.as_ref().expect("status");
    assert_eq!(
        st.image_statuses["nginx"].tags[0].phase,
        v1beta1::ImagePullPhase::Succeeded
    );

    let alpha = json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "NodeImage", "metadata": {"name": "node-1"},
        "spec": {"images": {"nginx": {"pullSecrets": [{"namespace": "default", "name": "s1"}], "tags": tags}}},
        "status": status
    });
    let _: v1alpha1::NodeImage = round_trip(&alpha);
    // NodeImage is cluster-scoped.
    assert_eq!(
        <v1beta1::NodeImage as kube::CustomResourceExt>::crd()
            .spec
            .scope,
        "Cluster"
    );
}
