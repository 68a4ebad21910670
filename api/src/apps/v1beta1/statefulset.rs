//! Advanced StatefulSet, apps.kruise.io/v1beta1 (the storage version): upstream's apps/v1
//! StatefulSet plus in-place update, partition and maxUnavailable for both pod management
//! policies, reserved ordinals, lifecycle hooks and a scale strategy.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::{InPlaceUpdateStrategy, Lifecycle, UpdatePriorityStrategy};
use crate::serde_util::{is_false, is_zero_i32, is_zero_i64};

/// Largest `rollingUpdate.minReadySeconds` upstream accepts.
pub const MAX_MIN_READY_SECONDS: i32 = 300;

/// Desired state of an Advanced StatefulSet.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "StatefulSet",
    namespaced,
    status = "StatefulSetStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "sts",
    shortname = "asts",
    doc = "StatefulSet is the Schema for the statefulsets API",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn = r#"{"name":"DESIRED","type":"integer","jsonPath":".spec.replicas","description":"The desired number of pods."}"#,
    printcolumn = r#"{"name":"CURRENT","type":"integer","jsonPath":".status.replicas","description":"The number of currently all pods."}"#,
    printcolumn = r#"{"name":"UPDATED","type":"integer","jsonPath":".status.updatedReplicas","description":"The number of pods updated."}"#,
    printcolumn = r#"{"name":"READY","type":"integer","jsonPath":".status.readyReplicas","description":"The number of pods ready."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp","description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC."}"#,
    printcolumn = r#"{"name":"CONTAINERS","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].name","description":"The containers of currently advanced statefulset."}"#,
    printcolumn = r#"{"name":"IMAGES","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].image","description":"The images of currently advanced statefulset."}"#
)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetSpec {
    /// Desired number of pods; defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Label query over pods; must match the template's labels.
    pub selector: LabelSelector,
    /// Pods to create; each gets the identity `{name}-{ordinal}`.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// PVCs per pod, named `{claim}-{name}-{ordinal}`, created before the pod and kept with
    /// its identity.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub volume_claim_templates: Vec<PersistentVolumeClaim>,
    /// How changed volumeClaimTemplates reach existing PVCs (upstream's auto-resize gate).
    #[serde(default, skip_serializing_if = "VolumeClaimUpdateStrategy::is_empty")]
    pub volume_claim_update_strategy: VolumeClaimUpdateStrategy,
    /// Headless Service giving the pods their DNS names (`{pod}.{serviceName}`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_name: String,
    /// OrderedReady (default) or Parallel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_management_policy: Option<PodManagementPolicyType>,
    /// How pods are updated when the template changes.
    #[serde(default)]
    pub update_strategy: StatefulSetUpdateStrategy,
    /// Old revisions to keep; defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Ordinals never used: numbers or ranges like `"3-5"`. Replicas still counts running pods,
    /// so the ordinal space grows past them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserve_ordinals: Vec<IntOrString>,
    /// Pod lifecycle hooks (preDelete, inPlaceUpdate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// How pods are created and deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<StatefulSetScaleStrategy>,
    /// What happens to the PVCs when the set is deleted or scaled down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim_retention_policy:
        Option<StatefulSetPersistentVolumeClaimRetentionPolicy>,
    /// Where ordinals start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordinals: Option<StatefulSetOrdinals>,
}

/// `spec.podManagementPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PodManagementPolicyType {
    /// Create in increasing ordinal order, each after the one before is ready; delete in the
    /// reverse order.
    #[default]
    OrderedReady,
    /// Create and delete all at once.
    Parallel,
}

/// `spec.volumeClaimUpdateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimUpdateStrategy {
    /// OnPodRollingUpdate or OnDelete.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<VolumeClaimUpdateStrategyType>,
}

impl VolumeClaimUpdateStrategy {
    fn is_empty(&self) -> bool {
        self.type_.is_none()
    }
}

/// `volumeClaimUpdateStrategy.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum VolumeClaimUpdateStrategyType {
    /// PVCs follow the template when their pod is updated.
    OnPodRollingUpdate,
    /// PVCs follow the template only once someone deletes them.
    OnDelete,
}

/// `spec.updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetUpdateStrategy {
    /// RollingUpdate (default) or OnDelete.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<StatefulSetUpdateStrategyType>,
    /// Parameters of a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateStatefulSetStrategy>,
}

/// `updateStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum StatefulSetUpdateStrategyType {
    /// The controller updates pods from the highest ordinal down to the partition.
    #[default]
    RollingUpdate,
    /// Pods are updated only when someone deletes them.
    OnDelete,
}

/// `updateStrategy.rollingUpdate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateStatefulSetStrategy {
    /// Ordinals below this keep their old revision; with unorderedUpdate, the number of pods
    /// kept. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// Most pods unavailable during the update: number or percentage (rounded down, at least
    /// 1); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// ReCreate (default), InPlaceIfPossible or InPlaceOnly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_update_policy: Option<PodUpdateStrategyType>,
    /// Stop updating pods.
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Update in priority order instead of by ordinal (Parallel only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unordered_update: Option<UnorderedUpdateStrategy>,
    /// In-place update settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_place_update_strategy: Option<InPlaceUpdateStrategy>,
    /// Seconds an updated pod must be ready to count as available; 0 to 300.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ready_seconds: Option<i32>,
}

/// `rollingUpdate.unorderedUpdate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UnorderedUpdateStrategy {
    /// Weights or label order deciding which pods update first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
}

/// `rollingUpdate.podUpdatePolicy`: how one pod is updated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PodUpdateStrategyType {
    /// Delete the pod and create it again under the same name.
    #[default]
    ReCreate,
    /// Update in place when only in-place-able fields changed, else recreate.
    InPlaceIfPossible,
    /// Only update in place; other changes are refused.
    InPlaceOnly,
}

/// `persistentVolumeClaimRetentionPolicy.whenDeleted` / `whenScaled`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PersistentVolumeClaimRetentionPolicyType {
    /// Keep the PVCs (default).
    #[default]
    Retain,
    /// Delete the PVCs.
    Delete,
}

/// `spec.persistentVolumeClaimRetentionPolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetPersistentVolumeClaimRetentionPolicy {
    /// What happens to the PVCs when the StatefulSet is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_deleted: Option<PersistentVolumeClaimRetentionPolicyType>,
    /// What happens to the PVCs of ordinals removed by a scale-down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_scaled: Option<PersistentVolumeClaimRetentionPolicyType>,
}

/// `spec.ordinals`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetOrdinals {
    /// First ordinal; replicas take `[start, start + replicas)` (plus reserved ones).
    #[serde(default)]
    pub start: i32,
}

/// `spec.scaleStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetScaleStrategy {
    /// Most unavailable pods while scaling (Parallel only): number or percentage (rounded down).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// Observed state of an Advanced StatefulSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetStatus {
    /// Generation last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Pods owned.
    pub replicas: i32,
    /// Pods with Ready=True.
    pub ready_replicas: i32,
    /// Pods ready for minReadySeconds.
    #[serde(default)]
    pub available_replicas: i32,
    /// Pods at currentRevision.
    pub current_replicas: i32,
    /// Pods at updateRevision.
    pub updated_replicas: i32,
    /// Pods at updateRevision and ready.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_ready_replicas: i32,
    /// Pods at updateRevision and available.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_available_replicas: i32,
    /// Revision all pods were at when last fully updated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// Latest revision name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// Hash collisions met while naming revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Latest observations (FailedCreatePod, FailedUpdatePod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StatefulSetCondition>,
    /// Selector in string form, for the scale subresource (HPA).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label_selector: String,
    /// Per volumeClaimTemplate, how many PVCs match it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_claims: Vec<VolumeClaimStatus>,
}

/// `status.volumeClaims[]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimStatus {
    /// The volumeClaimTemplate's name.
    pub volume_claim_name: String,
    /// Replicas whose PVC requests at least the template's storage.
    pub compatible_replicas: i32,
    /// Of those, the ones whose PVC capacity reached the request.
    pub compatible_ready_replicas: i32,
}

/// A StatefulSet condition (apps/v1 `StatefulSetCondition`).
// `type` and `reason` are strings (values in `keys::STATEFULSET_CONDITION_*`) so a condition
// written by another controller never breaks decoding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetCondition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// Last status change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl StatefulSetSpec {
    /// `spec.replicas`, defaulted to 1.
    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }

    /// `spec.podManagementPolicy`, defaulted to OrderedReady.
    pub fn pod_management_policy(&self) -> PodManagementPolicyType {
        self.pod_management_policy.unwrap_or_default()
    }

    /// `spec.ordinals.start`, defaulted to 0.
    pub fn start_ordinal(&self) -> i32 {
        self.ordinals.as_ref().map_or(0, |o| o.start)
    }

    /// The reserved ordinals, ranges (`"3-5"`) expanded, sorted and deduplicated. Upstream
    /// `ParseReserveOrdinals`.
    pub fn reserved_ordinals(&self) -> Result<Vec<i32>, InvalidReserveOrdinal> {
        let mut out = Vec::new();
        for (index, item) in self.reserve_ordinals.iter().enumerate() {
            match item {
                IntOrString::Int(n) if *n >= 0 => out.push(*n),
                IntOrString::Int(_) => return Err(InvalidReserveOrdinal::new(index, item)),
                IntOrString::String(s) => {
                    let s = s.trim();
                    let parsed = match s.split_once('-') {
                        Some((a, b)) => a.trim().parse::<i32>().ok().zip(b.trim().parse().ok()),
                        None => s.parse::<i32>().ok().map(|n| (n, n)),
                    };
                    match parsed {
                        Some((a, b)) if 0 <= a && a <= b => out.extend(a..=b),
                        _ => return Err(InvalidReserveOrdinal::new(index, item)),
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// A `spec.reserveOrdinals` entry that is neither a non-negative number nor a range `"a-b"`
/// with `a <= b`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "spec.reserveOrdinals[{index}]: {value:?} is not an ordinal; use a number >= 0 or a range \"a-b\" with a <= b"
)]
pub struct InvalidReserveOrdinal {
    /// Index in the list.
    pub index: usize,
    /// The entry as written.
    pub value: String,
}

impl InvalidReserveOrdinal {
    fn new(index: usize, item: &IntOrString) -> Self {
        let value = match item {
            IntOrString::Int(n) => n.to_string(),
            IntOrString::String(s) => s.clone(),
        };
        Self { index, value }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn upstream_object_round_trips() {
        let obj = json!({
            "apiVersion": "apps.kruise.io/v1beta1",
            "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "replicas": 3,
                "serviceName": "web",
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                "volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}],
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                    "partition": 1, "maxUnavailable": "50%",
                    "podUpdatePolicy": "InPlaceIfPossible", "paused": true,
                    "unorderedUpdate": {"priorityStrategy": {"weightPriority": [
                        {"weight": 10, "matchSelector": {"matchLabels": {"a": "b"}}}]}},
                    "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10},
                    "minReadySeconds": 5}},
                "reserveOrdinals": [1, "3-5"],
                "ordinals": {"start": 2},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                "scaleStrategy": {"maxUnavailable": 2},
                "lifecycle": {"preDelete": {"finalizersHandler": ["x/y"]}},
                "revisionHistoryLimit": 5
            },
            "status": {
                "observedGeneration": 2, "replicas": 3, "readyReplicas": 3,
                "availableReplicas": 3, "currentReplicas": 1, "updatedReplicas": 2,
                "updatedReadyReplicas": 2, "currentRevision": "web-a", "updateRevision": "web-b",
                "labelSelector": "app=web",
                "conditions": [{"type": "FailedCreatePod", "status": "True", "reason": "R"}]
            }
        });
        let sts: StatefulSet = serde_json::from_value(obj.clone()).expect("decodes");
        let ru = sts
            .spec
            .update_strategy
            .rolling_update
            .as_ref()
            .expect("rollingUpdate");
        assert_eq!(ru.partition, Some(1));
        assert_eq!(
            ru.pod_update_policy,
            Some(PodUpdateStrategyType::InPlaceIfPossible)
        );
        assert_eq!(
            sts.spec.pod_management_policy(),
            PodManagementPolicyType::Parallel
        );
        assert_eq!(sts.spec.start_ordinal(), 2);
        assert_eq!(sts.spec.reserved_ordinals(), Ok(vec![1, 3, 4, 5]));
        let status = sts.status.as_ref().expect("status");
        assert_eq!(status.updated_ready_replicas, 2);
        assert_eq!(status.conditions[0].type_, "FailedCreatePod");
        let back = serde_json::to_value(&sts).expect("encodes");
        assert_eq!(back, obj);
    }

    #[test]
    fn defaults_of_an_empty_spec() {
        let spec: StatefulSetSpec = serde_json::from_value(json!({
            "selector": {}, "template": {}
        }))
        .expect("decodes");
        assert_eq!(spec.replicas(), 1);
        assert_eq!(
            spec.pod_management_policy(),
            PodManagementPolicyType::OrderedReady
        );
        assert_eq!(spec.start_ordinal(), 0);
        assert_eq!(spec.reserved_ordinals(), Ok(vec![]));
    }

    #[test]
    fn bad_reserve_ordinals_name_the_entry() {
        for (value, index) in [
            (json!([1, -2]), 1),
            (json!(["5-3"]), 0),
            (json!([0, "x"]), 1),
            (json!(["1-"]), 0),
        ] {
            let spec = StatefulSetSpec {
                reserve_ordinals: serde_json::from_value(value.clone()).expect("list"),
                ..Default::default()
            };
            let err = spec.reserved_ordinals().expect_err("invalid");
            assert_eq!(err.index, index, "{value}");
            assert!(err.to_string().contains("spec.reserveOrdinals["), "{err}");
        }
    }

    #[test]
    fn unknown_policy_is_refused() {
        let res: Result<StatefulSetSpec, _> = serde_json::from_value(json!({
            "selector": {}, "template": {}, "podManagementPolicy": "Random"
        }));
        assert!(res.is_err());
    }
}
