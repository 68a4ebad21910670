//! Advanced DaemonSet (kind `DaemonSet`), apps.kruise.io/v1beta1, the storage version.
//!
//! One Pod per eligible node, updated by recreation (`Standard`), in place when possible
//! (`InPlaceIfPossible`), or new-before-old (`Surging`, or any type with `maxSurge` > 0).

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::Lifecycle;
use crate::serde_util::{is_false, is_zero_i32, is_zero_i64};

/// Desired state of an Advanced DaemonSet.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "DaemonSet",
    namespaced,
    status = "DaemonSetStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "daemon",
    shortname = "ads",
    doc = "DaemonSet (Advanced DaemonSet) runs one pod per eligible node and updates it in place when it can.",
    printcolumn = r#"{"name":"DESIRED","type":"integer","jsonPath":".status.desiredNumberScheduled","description":"The desired number of pods."}"#,
    printcolumn = r#"{"name":"CURRENT","type":"integer","jsonPath":".status.currentNumberScheduled","description":"The current number of pods."}"#,
    printcolumn = r#"{"name":"READY","type":"integer","jsonPath":".status.numberReady","description":"The ready number of pods."}"#,
    printcolumn = r#"{"name":"UP-TO-DATE","type":"integer","jsonPath":".status.updatedNumberScheduled","description":"The updated number of pods."}"#,
    printcolumn = r#"{"name":"AVAILABLE","type":"integer","jsonPath":".status.numberAvailable","description":"The available number of pods."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"CONTAINERS","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].name","description":"The containers of the advanced daemonset."}"#,
    printcolumn = r#"{"name":"IMAGES","type":"string","priority":1,"jsonPath":".spec.template.spec.containers[*].image","description":"The images of the advanced daemonset."}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetSpec {
    /// Label query over pods; must match the template's labels.
    pub selector: LabelSelector,
    /// The pod created on every eligible node.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub template: PodTemplateSpec,
    /// How pods are replaced when the template changes.
    #[serde(default)]
    pub update_strategy: DaemonSetUpdateStrategy,
    /// Seconds a new pod must be ready to count as available.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub min_ready_seconds: i32,
    /// Most pods created or deleted in one sync: number or percentage of desired; default 250.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_replicas: Option<IntOrString>,
    /// Old revisions to keep; defaults to 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Pod lifecycle hooks (preDelete, inPlaceUpdate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// How pods are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<DaemonSetScaleStrategy>,
}

/// How pods are created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetScaleStrategy {
    /// Create pods only within the rolling update's partition: at most desired - partition
    /// pods at the update revision exist, so lowering the partition rolls onto more nodes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub partitioned_scaling: bool,
}

/// `updateStrategy`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetUpdateStrategy {
    /// RollingUpdate (default) or OnDelete.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<DaemonSetUpdateStrategyType>,
    /// Parameters of a rolling update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDaemonSet>,
}

/// `updateStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum DaemonSetUpdateStrategyType {
    /// The controller replaces pods node by node.
    #[default]
    RollingUpdate,
    /// Pods are replaced only when someone deletes them.
    OnDelete,
}

/// `rollingUpdate.rollingUpdateType`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum RollingUpdateType {
    /// Delete the old pod, then create the new one (as the native DaemonSet).
    #[default]
    Standard,
    /// Create the new pod, wait until it is available, then delete the old one (upstream's
    /// older name for Standard with `maxSurge`; kept so such objects still apply).
    Surging,
    /// Update the pod in place when only in-place-able fields changed, else recreate.
    InPlaceIfPossible,
}

/// Parameters of a rolling update.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateDaemonSet {
    /// Standard (default), Surging or InPlaceIfPossible.
    #[serde(
        rename = "rollingUpdateType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub type_: Option<RollingUpdateType>,
    /// Most nodes whose pod may be unavailable during the update: number or percentage of
    /// desired (rounded up); default 1; cannot be 0 when maxSurge is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Most nodes that may run a new pod next to the old one: number or percentage of desired
    /// (rounded up); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
    /// Only pods on nodes matching this selector are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Pods to keep at old revisions: number or percentage of desired; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Stop updating pods (placement on new and removed nodes continues).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// Observed state of an Advanced DaemonSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetStatus {
    /// Nodes that should run the pod and run at least one.
    pub current_number_scheduled: i32,
    /// Nodes that run the pod but should not.
    pub number_misscheduled: i32,
    /// Nodes that should run the pod.
    pub desired_number_scheduled: i32,
    /// Nodes that should run the pod and run a ready one.
    pub number_ready: i32,
    /// Generation last acted on.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Nodes that run a pod of the update revision.
    pub updated_number_scheduled: i32,
    /// Nodes that should run the pod and run an available one.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub number_available: i32,
    /// Nodes that should run the pod and run no available one.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub number_unavailable: i32,
    /// Hash collisions met while naming revisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DaemonSetCondition>,
    /// Hash of the latest revision (the pods' `controller-revision-hash`); v1alpha1 calls it
    /// `daemonSetHash`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
}

/// A DaemonSet condition (as `apps/v1` DaemonSetCondition).
// `type` and `reason` are strings so a condition written by another version never breaks
// decoding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetCondition {
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

impl RollingUpdateDaemonSet {
    /// Whether updates are paused.
    pub fn is_paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }
}

impl DaemonSetSpec {
    /// The rolling update parameters, or `None` for OnDelete.
    pub fn rolling_update(&self) -> Option<RollingUpdateDaemonSet> {
        match self.update_strategy.type_.unwrap_or_default() {
            DaemonSetUpdateStrategyType::OnDelete => None,
            DaemonSetUpdateStrategyType::RollingUpdate => Some(
                self.update_strategy
                    .rolling_update
                    .clone()
                    .unwrap_or_default(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apps::v1alpha1;
    use serde_json::json;

    fn sample_spec() -> serde_json::Value {
        json!({
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1"}]}
            },
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {
                    "rollingUpdateType": "InPlaceIfPossible",
                    "maxUnavailable": 3,
                    "maxSurge": "10%",
                    "selector": {"matchLabels": {"pool": "a"}},
                    "partition": 5,
                    "paused": false
                }
            },
            "minReadySeconds": 2,
            "burstReplicas": 250,
            "revisionHistoryLimit": 4,
            "lifecycle": {"preDelete": {"finalizersHandler": ["example.com/hold"]}},
            "scaleStrategy": {"partitionedScaling": true}
        })
    }

    #[test]
    fn v1beta1_round_trips_upstream_field_names() {
        let raw = json!({
            "apiVersion": "apps.kruise.io/v1beta1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "default"},
            "spec": sample_spec(),
            "status": {
                "currentNumberScheduled": 20, "numberMisscheduled": 1,
                "desiredNumberScheduled": 20, "numberReady": 19, "observedGeneration": 3,
                "updatedNumberScheduled": 7, "numberAvailable": 19, "numberUnavailable": 1,
                "collisionCount": 1, "updateRevision": "agent-5d4f9c"
            }
        });
        let ds: DaemonSet = serde_json::from_value(raw.clone()).expect("parses");
        assert_eq!(serde_json::to_value(&ds).expect("serializes"), raw);
        let ru = ds.spec.rolling_update().expect("rolling update");
        assert_eq!(ru.type_, Some(RollingUpdateType::InPlaceIfPossible));
        assert_eq!(ru.partition, Some(IntOrString::Int(5)));
        assert!(!ru.is_paused());
    }

    #[test]
    fn v1alpha1_round_trips_with_integer_partition_and_daemonset_hash() {
        let raw = json!({
            "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": sample_spec(),
            "status": {
                "currentNumberScheduled": 1, "numberMisscheduled": 0,
                "desiredNumberScheduled": 1, "numberReady": 1,
                "updatedNumberScheduled": 1, "daemonSetHash": "abc"
            }
        });
        let ds: v1alpha1::DaemonSet = serde_json::from_value(raw.clone()).expect("parses");
        assert_eq!(serde_json::to_value(&ds).expect("serializes"), raw);
        let partition = ds
            .spec
            .update_strategy
            .rolling_update
            .and_then(|r| r.partition);
        assert_eq!(partition, Some(5));
        assert_eq!(ds.status.expect("status").daemon_set_hash, "abc");
    }

    #[test]
    fn minimal_object_defaults_to_standard_rolling_update() {
        let ds: DaemonSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "x"},
            "spec": {"selector": {}, "template": {}}
        }))
        .expect("parses");
        let ru = ds
            .spec
            .rolling_update()
            .expect("RollingUpdate is the default type");
        assert_eq!(ru.type_.unwrap_or_default(), RollingUpdateType::Standard);
        let mut on_delete = ds.spec.clone();
        on_delete.update_strategy.type_ = Some(DaemonSetUpdateStrategyType::OnDelete);
        assert!(on_delete.rolling_update().is_none());
    }

    #[test]
    fn crd_names_versions_and_columns_match_upstream() {
        let crds = crate::crds::all().expect("assemble");
        let crd = crds
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some("daemonsets.apps.kruise.io"))
            .expect("daemonsets CRD");
        assert_eq!(crd.spec.names.kind, "DaemonSet");
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&["daemon".to_owned(), "ads".to_owned()][..])
        );
        let storage: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.storage, v.served))
            .collect();
        assert_eq!(
            storage,
            [("v1alpha1", false, true), ("v1beta1", true, true)]
        );
        assert!(
            crd.spec.conversion.is_some(),
            "conversion goes through the webhook"
        );
        for v in &crd.spec.versions {
            let cols: Vec<_> = v
                .additional_printer_columns
                .iter()
                .flatten()
                .map(|c| c.name.as_str())
                .collect();
            assert_eq!(
                cols,
                [
                    "DESIRED",
                    "CURRENT",
                    "READY",
                    "UP-TO-DATE",
                    "AVAILABLE",
                    "AGE",
                    "CONTAINERS",
                    "IMAGES"
                ],
                "{}",
                v.name
            );
            assert!(
                v.subresources
                    .as_ref()
                    .and_then(|s| s.status.as_ref())
                    .is_some()
            );
        }
    }
}
