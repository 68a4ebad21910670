use super::*;
use crate::inplace::completion::{self, NotCompleted};
use crate::inplace::hash;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::appspub::{
    InPlaceUpdateContainerStatus, InPlaceUpdateState, RuntimeContainerHashes, RuntimeContainerMeta,
    RuntimeContainerMetaSet,
};

fn state(last: &[(&str, &str)]) -> InPlaceUpdateState {
    InPlaceUpdateState {
        revision: "cs-v2".into(),
        update_timestamp: Time(Timestamp::UNIX_EPOCH),
        last_container_statuses: last
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    InPlaceUpdateContainerStatus {
                        image_id: v.to_string(),
                    },
                )
            })
            .collect(),
        update_env_from_metadata: false,
        update_resources: false,
        update_images: true,
        next_container_images: BTreeMap::new(),
        next_container_ref_metadata: BTreeMap::new(),
        next_container_resources: BTreeMap::new(),
        pre_check_before_next: None,
        container_batches_record: vec![],
    }
}

/// A pod whose spec asks for `spec_image` while the status still reports the old image/ID.
fn updating_pod(spec_image: &str, status_image: &str, status_id: &str) -> Pod {
    let mut p = pod(vec![container("main", spec_image)]);
    if let Some(s) = p.status.as_mut() {
        s.container_statuses = Some(vec![status("main", status_image, status_id, true)]);
    }
    p
}

/// The daemon's report for every container of `p`, as it would be once it runs the spec.
fn meta_for(p: &Pod) -> RuntimeContainerMetaSet {
    let empty = BTreeMap::new();
    let containers = p
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let statuses = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    RuntimeContainerMetaSet {
        containers: containers
            .iter()
            .map(|c| RuntimeContainerMeta {
                name: c.name.clone(),
                container_id: statuses
                    .iter()
                    .find(|s| s.name == c.name)
                    .and_then(|s| s.container_id.clone())
                    .unwrap_or_default(),
                restart_count: 1,
                hashes: RuntimeContainerHashes {
                    plain_hash: hash::kubelet_container_hash(c),
                    extracted_env_from_metadata_hash: hash::env_from_metadata_hash(
                        c,
                        p.metadata.labels.as_ref().unwrap_or(&empty),
                        p.metadata.annotations.as_ref().unwrap_or(&empty),
                    ),
                },
            })
            .collect(),
    }
}

fn with_meta(mut p: Pod, meta: &RuntimeContainerMetaSet) -> Pod {
    set_annotation(
        &mut p,
        keys::RUNTIME_CONTAINERS_META_ANNOTATION,
        &meta.to_annotation_value().expect("json"),
    );
    p
}

#[test]
fn image_id_fallback_table() {
    // (name, spec image, status image, status imageID, recorded old imageID, want)
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a [(&'a str, &'a str)],
        Want,
    );
    type Want = Result<(), NotCompleted>;
    let cases: Vec<Case> = vec![
        (
            "not restarted",
            "a:2",
            "a:1",
            "id1",
            &[("main", "id1")],
            Err(NotCompleted::ImageNotChanged("main".into())),
        ),
        ("restarted", "a:2", "a:2", "id2", &[("main", "id1")], Ok(())),
        (
            "same ID, status shows the new image",
            "a:2",
            "a:2",
            "id1",
            &[("main", "id1")],
            Ok(()),
        ),
        (
            "untagged image means latest",
            "a",
            "a:latest",
            "id1",
            &[("main", "id1")],
            Ok(()),
        ),
        ("nothing recorded", "a:2", "a:1", "id1", &[], Ok(())),
        (
            "recorded container has no status",
            "a:2",
            "a:2",
            "id2",
            &[("main", "id1"), ("gone", "x")],
            Err(NotCompleted::StatusMissing(vec!["gone".into()])),
        ),
    ];
    for (name, spec_image, status_image, status_id, last, want) in cases {
        let p = updating_pod(spec_image, status_image, status_id);
        assert_eq!(
            completion::containers_update_completed(&p, &state(last)),
            want,
            "{name}"
        );
    }
}

#[test]
fn runtime_meta_short_circuits() {
    // Status still shows the old image ID, but the daemon reports the new spec running.
    let p = updating_pod("a:2", "a:1", "id1");
    let meta = meta_for(&p);
    let st = state(&[("main", "id1")]);
    assert_eq!(
        completion::containers_update_completed(&with_meta(p.clone(), &meta), &st),
        Ok(())
    );

    // A stale report (other containerID) falls back to image IDs.
    let mut stale = meta.clone();
    stale.containers[0].container_id = "containerd://old".into();
    assert_eq!(
        completion::containers_update_completed(&with_meta(p.clone(), &stale), &st),
        Err(NotCompleted::ImageNotChanged("main".into()))
    );
    // A report for the old spec (other hash) too.
    let mut old_hash = meta;
    old_hash.containers[0].hashes.plain_hash ^= 1;
    assert_eq!(
        completion::containers_update_completed(&with_meta(p.clone(), &old_hash), &st),
        Err(NotCompleted::ImageNotChanged("main".into()))
    );
    // An unreadable report is an error, not a silent pass.
    let mut broken = p;
    set_annotation(
        &mut broken,
        keys::RUNTIME_CONTAINERS_META_ANNOTATION,
        "{nope",
    );
    assert!(matches!(
        completion::containers_update_completed(&broken, &st),
        Err(NotCompleted::Unreadable(_))
    ));
}

#[test]
fn env_from_metadata_needs_the_daemon() {
    let main = with_env(
        container("main", "a:1"),
        field_env("V", "metadata.labels['v']"),
    );
    let mut p = pod(vec![main]);
    p.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert("v".into(), "2".into());
    let mut st = state(&[]);
    st.update_env_from_metadata = true;
    assert_eq!(
        completion::containers_update_completed(&p, &st),
        Err(NotCompleted::RuntimeMetaMissing)
    );
    let mut meta = meta_for(&p);
    assert_eq!(
        completion::containers_update_completed(&with_meta(p.clone(), &meta), &st),
        Ok(())
    );
    // The daemon still sees the old value.
    meta.containers[0].hashes.extracted_env_from_metadata_hash ^= 1;
    assert_eq!(
        completion::containers_update_completed(&with_meta(p, &meta), &st),
        Err(NotCompleted::EnvFromMetadataPending)
    );
}

#[test]
fn resources_must_match_status() {
    let mut main = container("main", "a:1");
    main.resources = Some(resources(&[("cpu", "200m")], &[("cpu", "1")]));
    let mut p = pod(vec![main]);
    let mut st = state(&[]);
    st.update_resources = true;
    // pod() copies spec resources into status: applied.
    assert_eq!(completion::containers_update_completed(&p, &st), Ok(()));
    // Same values, other spelling: still applied.
    if let Some(cs) = p
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        cs[0].resources = Some(resources(&[("cpu", "0.2")], &[("cpu", "1000m")]));
    }
    assert_eq!(completion::containers_update_completed(&p, &st), Ok(()));
    if let Some(cs) = p
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        cs[0].resources = Some(resources(&[("cpu", "100m")], &[("cpu", "1")]));
    }
    assert_eq!(
        completion::containers_update_completed(&p, &st),
        Err(NotCompleted::ResourcesPending("main".into()))
    );
    if let Some(cs) = p
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        cs[0].resources = None;
    }
    assert_eq!(
        completion::containers_update_completed(&p, &st),
        Err(NotCompleted::ResourcesPending("main".into()))
    );
    if let Some(s) = p.status.as_mut() {
        s.container_statuses = Some(vec![]);
    }
    assert_eq!(
        completion::containers_update_completed(&p, &st),
        Err(NotCompleted::StatusesIncomplete)
    );
}

#[test]
fn pod_completion_order() {
    let p = updating_pod("a:2", "a:2", "id2");
    let check = completion::containers_update_completed;
    // No state: nothing in progress.
    assert_eq!(completion::pod_update_completed(&p, check), Ok(()));

    let mut st = state(&[("main", "id1")]);
    let mut with_state = p.clone();
    set_annotation(
        &mut with_state,
        keys::INPLACE_UPDATE_STATE_ANNOTATION,
        &st.to_annotation_value().expect("json"),
    );
    assert_eq!(completion::pod_update_completed(&with_state, check), Ok(()));

    st.next_container_resources
        .insert("side".into(), resources(&[("cpu", "1")], &[]));
    let mut next = p.clone();
    set_annotation(
        &mut next,
        keys::INPLACE_UPDATE_STATE_ANNOTATION,
        &st.to_annotation_value().expect("json"),
    );
    assert_eq!(
        completion::pod_update_completed(&next, check),
        Err(NotCompleted::NextBatchPending)
    );

    let mut grace = with_state;
    set_annotation(
        &mut grace,
        keys::INPLACE_UPDATE_GRACE_ANNOTATION,
        r#"{"revision":"cs-v2","graceSeconds":5}"#,
    );
    assert_eq!(
        completion::pod_update_completed(&grace, check),
        Err(NotCompleted::GracePending)
    );
}

#[test]
fn reads_state_written_by_upstream() {
    // Verbatim shape of what OpenKruise writes.
    let mut p = updating_pod("a:2", "a:2", "id2");
    set_annotation(
        &mut p,
        keys::INPLACE_UPDATE_STATE_ANNOTATION,
        r#"{"revision":"cs-v2","updateTimestamp":"2026-01-01T00:00:00Z","lastContainerStatuses":{"main":{"imageID":"id1"}},"updateImages":true,"containerBatchesRecord":[{"timestamp":"2026-01-01T00:00:00Z","containers":["main"]}]}"#,
    );
    set_annotation(
        &mut p,
        keys::RUNTIME_CONTAINERS_META_ANNOTATION,
        r#"{"containers":[{"name":"main","containerID":"other","restartCount":1,"hashes":{"plainHash":1}}]}"#,
    );
    assert_eq!(
        completion::pod_update_completed(&p, completion::containers_update_completed),
        Ok(())
    );
}
