//! In-place update records kept on pods, and the in-place strategy embedded in workloads.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{PodTemplateSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::keys;
use crate::serde_util::{is_false, is_zero_i32, is_zero_u64, null_as_default};

/// The state of the latest in-place update of a pod, stored as JSON in the
/// `apps.kruise.io/inplace-update-state` annotation. Field order follows upstream so the
/// serialized JSON matches what OpenKruise writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateState {
    /// Revision (ControllerRevision name) the pod is being updated to.
    pub revision: String,
    /// When the in-place update started.
    pub update_timestamp: Time,
    /// Container statuses captured before the update, by container name; used to tell whether
    /// the kubelet has already restarted a container with the new image.
    #[serde(deserialize_with = "null_as_default")]
    pub last_container_statuses: BTreeMap<String, InPlaceUpdateContainerStatus>,
    /// Envs taken from labels/annotations changed and need the runtime to restart containers.
    #[serde(default, skip_serializing_if = "is_false")]
    pub update_env_from_metadata: bool,
    /// Container resources are changed in place.
    #[serde(default, skip_serializing_if = "is_false")]
    pub update_resources: bool,
    /// Container images are changed in place.
    #[serde(default, skip_serializing_if = "is_false")]
    pub update_images: bool,
    /// Images of lower-priority containers waiting for a later batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_images: BTreeMap<String, String>,
    /// Metadata referenced by env of lower-priority containers waiting for a later batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_ref_metadata: BTreeMap<String, ObjectMeta>,
    /// Resources of lower-priority containers waiting for a later batch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub next_container_resources: BTreeMap<String, ResourceRequirements>,
    /// What must hold before the next batch may be patched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_check_before_next: Option<InPlaceUpdatePreCheckBeforeNext>,
    /// The batches already patched for this revision, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_batches_record: Vec<InPlaceUpdateContainerBatch>,
}

/// Checks that gate the next launch-priority batch of an in-place update.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdatePreCheckBeforeNext {
    /// Containers that must be ready (and updated) first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers_required_ready: Vec<String>,
}

/// One patched batch of containers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateContainerBatch {
    /// When the batch was patched.
    pub timestamp: Time,
    /// Names of the containers in the batch.
    #[serde(deserialize_with = "null_as_default")]
    pub containers: Vec<String>,
}

/// Container status recorded before an in-place update.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateContainerStatus {
    /// `status.containerStatuses[].imageID` before the update.
    #[serde(rename = "imageID", default, skip_serializing_if = "String::is_empty")]
    pub image_id: String,
}

/// In-place update settings of a workload (`rollingUpdate.inPlaceUpdateStrategy`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InPlaceUpdateStrategy {
    /// Seconds between marking the pod not-ready and patching its spec.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub grace_period_seconds: i32,
    /// Parallelism of the image pre-download jobs (default 1; 0 pauses them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_parallelism: Option<IntOrString>,
    /// Pull timeout of the image pre-download jobs (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_timeout_seconds: Option<i32>,
    /// Updated ready pods required before images are pre-downloaded for the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pre_download_min_updated_ready_pods: Option<i32>,
}

/// What an in-place update changes, as computed from two revisions. Stored as JSON in the
/// `apps.kruise.io/inplace-update-grace` annotation while a grace period runs, so it must
/// survive a manager restart.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSpec {
    /// Target revision name.
    pub revision: String,
    /// New image per container name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_images: BTreeMap<String, String>,
    /// Metadata referenced by each container's env, for env-from-metadata updates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_ref_metadata: BTreeMap<String, ObjectMeta>,
    /// New resources per container name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub container_resources: BTreeMap<String, ResourceRequirements>,
    /// JSON merge patch of pod labels/annotations. Go marshals `[]byte` as base64, hence
    /// `ByteString`; the bytes themselves are JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta_data_patch: Option<ByteString>,
    /// Env values taken from labels/annotations changed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub update_env_from_metadata: bool,
    /// Grace seconds this spec was computed with.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub grace_seconds: i32,
    /// Template of the source revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_template: Option<PodTemplateSpec>,
    /// Template of the target revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_template: Option<PodTemplateSpec>,
}

impl UpdateSpec {
    /// Only resources change: the pod can stay ready (unless a resize policy restarts containers).
    pub fn vertical_update_only(&self) -> bool {
        !self.container_resources.is_empty()
            && self.container_images.is_empty()
            && !self.update_env_from_metadata
    }
}

/// Everything the daemon knows about the running containers of a pod, stored as JSON in the
/// `apps.kruise.io/runtime-containers-meta` annotation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerMetaSet {
    /// One entry per container.
    #[serde(deserialize_with = "null_as_default")]
    pub containers: Vec<RuntimeContainerMeta>,
}

/// Runtime facts about one container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerMeta {
    /// Container name.
    pub name: String,
    /// Runtime container ID (`containerd://…`).
    #[serde(rename = "containerID")]
    pub container_id: String,
    /// Restart count reported by the runtime.
    pub restart_count: i32,
    /// Hashes of the container spec.
    pub hashes: RuntimeContainerHashes,
}

/// Hashes of a container spec that identify which spec a running container was started from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeContainerHashes {
    /// The kubelet's hash of `pod.spec.containers[x]`.
    pub plain_hash: u64,
    /// Hash of the container spec with env-from-metadata values resolved.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub extracted_env_from_metadata_hash: u64,
}

/// The annotation under `key`, or under `old_key` when only the legacy key is set, with the key
/// it was found under (upstream `GetInPlaceUpdateState` / `GetInPlaceUpdateGrace`).
fn find_annotation<'a>(
    annotations: Option<&'a BTreeMap<String, String>>,
    key: &'static str,
    old_key: Option<&'static str>,
) -> Option<(&'static str, &'a String)> {
    let annotations = annotations?;
    annotations
        .get(key)
        .map(|v| (key, v))
        .or_else(|| old_key.and_then(|k| annotations.get(k).map(|v| (k, v))))
}

/// Reads a JSON annotation under `key`, or under `old_key` when only the legacy key is set.
fn read_json_annotation<T: for<'de> Deserialize<'de>>(
    annotations: Option<&BTreeMap<String, String>>,
    key: &'static str,
    old_key: Option<&'static str>,
) -> Result<Option<T>> {
    match find_annotation(annotations, key, old_key) {
        None => Ok(None),
        Some((k, v)) => serde_json::from_str(v)
            .map(Some)
            .map_err(|source| Error::InvalidAnnotation { key: k, source }),
    }
}

fn to_json(value: &impl Serialize, what: &'static str) -> Result<String> {
    serde_json::to_string(value).map_err(|source| Error::Serialize { what, source })
}

impl InPlaceUpdateState {
    /// A state for an update to `revision` starting at `now`, with every other field empty.
    pub fn new(revision: impl Into<String>, now: Time) -> Self {
        Self {
            revision: revision.into(),
            update_timestamp: now,
            last_container_statuses: BTreeMap::new(),
            update_env_from_metadata: false,
            update_resources: false,
            update_images: false,
            next_container_images: BTreeMap::new(),
            next_container_ref_metadata: BTreeMap::new(),
            next_container_resources: BTreeMap::new(),
            pre_check_before_next: None,
            container_batches_record: Vec::new(),
        }
    }

    /// Reads the state from pod annotations (new key first, then the pre-1.0 key).
    pub fn from_annotations(
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Result<Option<Self>> {
        read_json_annotation(
            annotations,
            keys::INPLACE_UPDATE_STATE_ANNOTATION,
            Some(keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD),
        )
    }

    /// Whether the pod carries a state annotation (new or pre-1.0 key), readable or not.
    pub fn is_recorded(annotations: Option<&BTreeMap<String, String>>) -> bool {
        find_annotation(
            annotations,
            keys::INPLACE_UPDATE_STATE_ANNOTATION,
            Some(keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD),
        )
        .is_some()
    }

    /// The annotation value.
    pub fn to_annotation_value(&self) -> Result<String> {
        to_json(self, "InPlaceUpdateState")
    }
}

impl UpdateSpec {
    /// Reads a pending grace-period spec from pod annotations (new key first, then the old one).
    pub fn from_grace_annotation(
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Result<Option<Self>> {
        read_json_annotation(
            annotations,
            keys::INPLACE_UPDATE_GRACE_ANNOTATION,
            Some(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD),
        )
    }

    /// Whether the pod is in the grace period of an in-place update: the grace annotation (new
    /// or pre-1.0 key) is set, readable or not (upstream `GetInPlaceUpdateGrace`'s found flag).
    pub fn in_grace(annotations: Option<&BTreeMap<String, String>>) -> bool {
        find_annotation(
            annotations,
            keys::INPLACE_UPDATE_GRACE_ANNOTATION,
            Some(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD),
        )
        .is_some()
    }

    /// The grace annotation value.
    pub fn to_annotation_value(&self) -> Result<String> {
        to_json(self, "UpdateSpec")
    }
}

impl RuntimeContainerMetaSet {
    /// Reads the daemon's runtime container report from pod annotations.
    pub fn from_annotations(
        annotations: Option<&BTreeMap<String, String>>,
    ) -> Result<Option<Self>> {
        read_json_annotation(annotations, keys::RUNTIME_CONTAINERS_META_ANNOTATION, None)
    }

    /// The annotation value.
    pub fn to_annotation_value(&self) -> Result<String> {
        to_json(self, "RuntimeContainerMetaSet")
    }

    /// The entry for one container, if reported.
    pub fn container(&self, name: &str) -> Option<&RuntimeContainerMeta> {
        self.containers.iter().find(|c| c.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Pairs<'a> = &'a [(&'a str, &'a str)];

    fn annotations(pairs: Pairs<'_>) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Presence follows the same new-then-old lookup as the readers, and does not need the
    /// value to parse.
    #[test]
    fn presence_table() {
        let state = keys::INPLACE_UPDATE_STATE_ANNOTATION;
        let state_old = keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD;
        let grace = keys::INPLACE_UPDATE_GRACE_ANNOTATION;
        let grace_old = keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD;
        let cases: [(Pairs<'_>, bool, bool); 6] = [
            (&[], false, false),
            (&[(state, "{}")], true, false),
            (&[(state_old, "not json")], true, false),
            (&[(grace, "{}")], false, true),
            (&[(grace_old, "{}"), (state, "{}")], true, true),
            (&[("other", "{}")], false, false),
        ];
        for (pairs, recorded, in_grace) in cases {
            let a = annotations(pairs);
            assert_eq!(
                InPlaceUpdateState::is_recorded(Some(&a)),
                recorded,
                "{pairs:?}"
            );
            assert_eq!(UpdateSpec::in_grace(Some(&a)), in_grace, "{pairs:?}");
        }
        assert!(!InPlaceUpdateState::is_recorded(None));
        assert!(!UpdateSpec::in_grace(None));
    }

    /// The new key wins over the pre-1.0 one; a broken value names the key it was read from.
    #[test]
    fn reader_prefers_the_new_key() {
        let new = r#"{"revision":"new","updateTimestamp":"2026-01-02T03:04:05Z","lastContainerStatuses":{}}"#;
        let old = r#"{"revision":"old","updateTimestamp":"2026-01-02T03:04:05Z","lastContainerStatuses":{}}"#;
        let cases: [(Pairs<'_>, Option<&str>); 3] = [
            (
                &[
                    (keys::INPLACE_UPDATE_STATE_ANNOTATION, new),
                    (keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD, old),
                ],
                Some("new"),
            ),
            (
                &[(keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD, old)],
                Some("old"),
            ),
            (&[], None),
        ];
        for (pairs, want) in cases {
            let a = annotations(pairs);
            let got = InPlaceUpdateState::from_annotations(Some(&a)).expect("readable");
            assert_eq!(got.map(|s| s.revision).as_deref(), want, "{pairs:?}");
        }
        let broken = annotations(&[(keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD, "x")]);
        match InPlaceUpdateState::from_annotations(Some(&broken)) {
            Err(Error::InvalidAnnotation { key, .. }) => {
                assert_eq!(key, keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD)
            }
            other => panic!("{other:?}"),
        }
    }
}
