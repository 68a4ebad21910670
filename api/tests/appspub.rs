//! Wire format of the records kept in pod annotations and conditions, against JSON shaped like
//! what OpenKruise v1.9 writes.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kruise_api::appspub::*;
use kruise_api::keys;
use serde_json::json;

fn time(s: &str) -> Time {
    Time(s.parse().expect("valid timestamp"))
}

/// The JSON of openkruise.md section 2, field for field and in upstream's order.
#[test]
fn inplace_update_state_serializes_like_upstream() {
    let state = InPlaceUpdateState {
        revision: "demo-7d9f8b6c5".into(),
        update_timestamp: time("2026-11-29T20:00:00Z"),
        last_container_statuses: BTreeMap::from([(
            "main".into(),
            InPlaceUpdateContainerStatus {
                image_id: "docker.io/library/nginx@sha256:aaa".into(),
            },
        )]),
        update_env_from_metadata: true,
        update_resources: true,
        update_images: true,
        next_container_images: BTreeMap::from([("sidecar".into(), "busybox:1.37".into())]),
        next_container_ref_metadata: BTreeMap::from([(
            "sidecar".into(),
            ObjectMeta {
                labels: Some(BTreeMap::from([("app".into(), "demo".into())])),
                ..Default::default()
            },
        )]),
        next_container_resources: BTreeMap::from([(
            "sidecar".into(),
            ResourceRequirements {
                limits: Some(BTreeMap::from([("cpu".into(), Quantity("200m".into()))])),
                ..Default::default()
            },
        )]),
        pre_check_before_next: Some(InPlaceUpdatePreCheckBeforeNext {
            containers_required_ready: vec!["main".into()],
        }),
        container_batches_record: vec![InPlaceUpdateContainerBatch {
            timestamp: time("2026-11-29T20:00:00Z"),
            containers: vec!["main".into()],
        }],
    };
    let expected = concat!(
        r#"{"revision":"demo-7d9f8b6c5","updateTimestamp":"2026-11-29T20:00:00Z","#,
        r#""lastContainerStatuses":{"main":{"imageID":"docker.io/library/nginx@sha256:aaa"}},"#,
        r#""updateEnvFromMetadata":true,"updateResources":true,"updateImages":true,"#,
        r#""nextContainerImages":{"sidecar":"busybox:1.37"},"#,
        r#""nextContainerRefMetadata":{"sidecar":{"labels":{"app":"demo"}}},"#,
        r#""nextContainerResources":{"sidecar":{"limits":{"cpu":"200m"}}},"#,
        r#""preCheckBeforeNext":{"containersRequiredReady":["main"]},"#,
        r#""containerBatchesRecord":[{"timestamp":"2026-11-29T20:00:00Z","containers":["main"]}]}"#,
    );
    assert_eq!(state.to_annotation_value().expect("serializes"), expected);
    let back: InPlaceUpdateState = serde_json::from_str(expected).expect("parses");
    assert_eq!(back, state);
}

#[test]
fn inplace_update_state_minimal_omits_empty_fields() {
    let state = InPlaceUpdateState {
        update_images: true,
        ..InPlaceUpdateState::new("r1", time("2026-01-02T03:04:05Z"))
    };
    assert_eq!(
        serde_json::to_string(&state).expect("serializes"),
        r#"{"revision":"r1","updateTimestamp":"2026-01-02T03:04:05Z","lastContainerStatuses":{},"updateImages":true}"#
    );
}

/// Go writes a nil map without omitempty as null; Go also writes ObjectMeta's zero
/// creationTimestamp as null. Both must read back.
#[test]
fn inplace_update_state_accepts_go_nulls() {
    let raw = r#"{"revision":"r1","updateTimestamp":"2026-01-02T03:04:05Z","lastContainerStatuses":null,
        "nextContainerRefMetadata":{"c":{"creationTimestamp":null,"annotations":{"a":"b"}}}}"#;
    let state: InPlaceUpdateState = serde_json::from_str(raw).expect("parses");
    assert!(state.last_container_statuses.is_empty());
    assert_eq!(
        state.next_container_ref_metadata["c"].annotations,
        Some(BTreeMap::from([("a".into(), "b".into())]))
    );
}

#[test]
fn inplace_update_state_reads_new_then_old_annotation() {
    let v =
        r#"{"revision":"new","updateTimestamp":"2026-01-02T03:04:05Z","lastContainerStatuses":{}}"#;
    let old =
        r#"{"revision":"old","updateTimestamp":"2026-01-02T03:04:05Z","lastContainerStatuses":{}}"#;
    let both = BTreeMap::from([
        (
            keys::INPLACE_UPDATE_STATE_ANNOTATION.to_string(),
            v.to_string(),
        ),
        (
            keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD.to_string(),
            old.to_string(),
        ),
    ]);
    let got = InPlaceUpdateState::from_annotations(Some(&both))
        .expect("ok")
        .expect("present");
    assert_eq!(got.revision, "new");
    let only_old = BTreeMap::from([(
        keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD.to_string(),
        old.to_string(),
    )]);
    let got = InPlaceUpdateState::from_annotations(Some(&only_old))
        .expect("ok")
        .expect("present");
    assert_eq!(got.revision, "old");
    assert!(
        InPlaceUpdateState::from_annotations(None)
            .expect("ok")
            .is_none()
    );
    let bad = BTreeMap::from([(
        keys::INPLACE_UPDATE_STATE_ANNOTATION.to_string(),
        "{".to_string(),
    )]);
    let err = InPlaceUpdateState::from_annotations(Some(&bad)).expect_err("invalid JSON");
    assert!(
        err.to_string()
            .contains(keys::INPLACE_UPDATE_STATE_ANNOTATION)
    );
}

/// metaDataPatch is a Go []byte: base64 in JSON.
#[test]
fn update_spec_round_trips_with_base64_patch() {
    let patch = br#"{"metadata":{"labels":{"v":"2"}}}"#;
    let spec = UpdateSpec {
        revision: "demo-2".into(),
        container_images: BTreeMap::from([("main".into(), "nginx:1.27".into())]),
        meta_data_patch: Some(ByteString(patch.to_vec())),
        grace_seconds: 30,
        ..Default::default()
    };
    let value = serde_json::to_value(&spec).expect("serializes");
    assert_eq!(
        value,
        json!({
            "revision": "demo-2",
            "containerImages": {"main": "nginx:1.27"},
            "metaDataPatch": "eyJtZXRhZGF0YSI6eyJsYWJlbHMiOnsidiI6IjIifX19",
            "graceSeconds": 30
        })
    );
    let back: UpdateSpec = serde_json::from_value(value).expect("parses");
    assert_eq!(back, spec);
    assert!(!back.vertical_update_only());
    let grace = BTreeMap::from([(
        keys::INPLACE_UPDATE_GRACE_ANNOTATION.to_string(),
        spec.to_annotation_value().expect("serializes"),
    )]);
    assert_eq!(
        UpdateSpec::from_grace_annotation(Some(&grace)).expect("ok"),
        Some(spec)
    );
}

#[test]
fn update_spec_vertical_only() {
    let spec = UpdateSpec {
        revision: "r".into(),
        container_resources: BTreeMap::from([("main".into(), ResourceRequirements::default())]),
        ..Default::default()
    };
    assert!(spec.vertical_update_only());
}

#[test]
fn runtime_containers_meta_matches_daemon_format() {
    let raw = json!({"containers": [{
        "name": "main",
        "containerID": "containerd://abc",
        "restartCount": 2,
        "hashes": {"plainHash": 18446744073709551615u64, "extractedEnvFromMetadataHash": 42}
    }, {
        "name": "sidecar",
        "containerID": "containerd://def",
        "restartCount": 0,
        "hashes": {"plainHash": 7}
    }]});
    let set: RuntimeContainerMetaSet = serde_json::from_value(raw.clone()).expect("parses");
    assert_eq!(set.containers[0].hashes.plain_hash, u64::MAX);
    assert_eq!(
        set.container("sidecar")
            .map(|c| c.hashes.extracted_env_from_metadata_hash),
        Some(0)
    );
    assert_eq!(serde_json::to_value(&set).expect("serializes"), raw);
    let annotations = BTreeMap::from([(
        keys::RUNTIME_CONTAINERS_META_ANNOTATION.to_string(),
        set.to_annotation_value().expect("serializes"),
    )]);
    assert_eq!(
        RuntimeContainerMetaSet::from_annotations(Some(&annotations)).expect("ok"),
        Some(set)
    );
    let nulls: RuntimeContainerMetaSet =
        serde_json::from_str(r#"{"containers":null}"#).expect("parses");
    assert!(nulls.containers.is_empty());
}

#[test]
fn inplace_update_strategy_fields() {
    let raw = json!({
        "gracePeriodSeconds": 10,
        "imagePreDownloadParallelism": "50%",
        "imagePreDownloadTimeoutSeconds": 600,
        "imagePreDownloadMinUpdatedReadyPods": 1
    });
    let s: InPlaceUpdateStrategy = serde_json::from_value(raw.clone()).expect("parses");
    assert_eq!(s.grace_period_seconds, 10);
    assert_eq!(serde_json::to_value(&s).expect("serializes"), raw);
    assert_eq!(
        serde_json::to_value(InPlaceUpdateStrategy::default()).expect("serializes"),
        json!({})
    );
}

#[test]
fn lifecycle_round_trip_and_states() {
    let raw = json!({
        "preDelete": {"finalizersHandler": ["example.com/unmount"], "markPodNotReady": true},
        "inPlaceUpdate": {"labelsHandler": {"example.com/ready-to-update": "true"}},
        "preNormal": {"labelsHandler": {"example.com/registered": "true"}}
    });
    let l: Lifecycle = serde_json::from_value(raw.clone()).expect("parses");
    assert!(l.pre_delete.as_ref().is_some_and(|h| h.mark_pod_not_ready));
    assert_eq!(serde_json::to_value(&l).expect("serializes"), raw);

    for state in LifecycleStateType::ALL {
        assert_eq!(
            state
                .as_str()
                .parse::<LifecycleStateType>()
                .expect("parses"),
            state
        );
        assert_eq!(
            serde_json::to_value(state).expect("serializes"),
            json!(state.as_str())
        );
    }
    assert!("Deleting".parse::<LifecycleStateType>().is_err());
    let labels = BTreeMap::from([(
        keys::LIFECYCLE_STATE_LABEL.to_string(),
        "PreparingUpdate".to_string(),
    )]);
    assert_eq!(
        LifecycleStateType::from_labels(Some(&labels)),
        Some(LifecycleStateType::PreparingUpdate)
    );
}

#[test]
fn update_priority_and_scatter_round_trip() {
    let raw = json!({
        "weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"zone": "a"}}}],
        "orderPriority": [{"orderedKey": "rank"}]
    });
    let p: UpdatePriorityStrategy = serde_json::from_value(raw.clone()).expect("parses");
    assert_eq!(p.weight_priority[0].weight, 50);
    assert_eq!(serde_json::to_value(&p).expect("serializes"), raw);
    let scatter: UpdateScatterStrategy =
        serde_json::from_value(json!([{"key": "zone", "value": "a"}])).expect("parses");
    assert_eq!(scatter[0].key, "zone");
}

#[test]
fn readiness_messages_sorted_like_upstream() {
    let crr = PodReadinessMessage::new(keys::READINESS_USER_AGENT_CRR, "ns/crr-1");
    let lifecycle = PodReadinessMessage::new(
        keys::READINESS_USER_AGENT_LIFECYCLE,
        keys::READINESS_KEY_PRE_DELETE_HOOK,
    );
    let (m, changed) = add_readiness_message("", &lifecycle).expect("ok");
    assert!(changed);
    let (m, changed) = add_readiness_message(&m, &crr).expect("ok");
    assert!(changed);
    assert_eq!(
        m,
        r#"[{"userAgent":"ContainerRecreateRequest","key":"ns/crr-1"},{"userAgent":"Lifecycle","key":"preDeleteHook"}]"#
    );
    let (same, changed) = add_readiness_message(&m, &crr).expect("ok");
    assert!(!changed);
    assert_eq!(same, m);
    let (m, changed) = remove_readiness_message(&m, &crr).expect("ok");
    assert!(changed);
    let (m, _) = remove_readiness_message(&m, &lifecycle).expect("ok");
    assert_eq!(m, "[]");
    assert!(parse_readiness_messages("null").expect("ok").is_empty());
    assert!(parse_readiness_messages("not json").is_err());
}
