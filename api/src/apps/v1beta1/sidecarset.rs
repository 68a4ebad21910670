//! SidecarSet, apps.kruise.io/v1beta1 (the storage version): sidecar containers injected into
//! matching Pods at creation and upgraded in place afterwards. Cluster-scoped.
//!
//! v1beta1 differs from v1alpha1 in two places: the Pods' namespaces are chosen only through
//! `namespaceSelector` (v1alpha1's `namespace` becomes a `kubernetes.io/metadata.name`
//! selector), and the custom version is the field `customVersion` instead of the label
//! `apps.kruise.io/sidecarset-custom-version`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, LocalObjectReference, ObjectFieldSelector, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::appspub::{UpdatePriorityStrategy, UpdateScatterStrategy};
use crate::serde_util::{is_false, is_zero_i32, is_zero_i64};

/// Desired state of a SidecarSet.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "SidecarSet",
    status = "SidecarSetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "SidecarSet injects sidecar containers into matching pods and upgrades them in place.",
    printcolumn = r#"{"name":"MATCHED","type":"integer","jsonPath":".status.matchedPods","description":"The number of pods matched."}"#,
    printcolumn = r#"{"name":"UPDATED","type":"integer","jsonPath":".status.updatedPods","description":"The number of pods matched and updated."}"#,
    printcolumn = r#"{"name":"READY","type":"integer","jsonPath":".status.readyPods","description":"The number of pods matched and ready."}"#,
    printcolumn = r#"{"name":"AGE","type":"date","jsonPath":".metadata.creationTimestamp","description":"CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC."}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetSpec {
    /// Pods to inject (an empty or missing selector matches nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Namespaces whose Pods are injected; unset means every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Init containers injected at Pod creation (in name order); those with
    /// `restartPolicy: Always` are native sidecars and count in the hash.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub init_containers: Vec<SidecarContainer>,
    /// Sidecar containers injected at Pod creation and upgraded in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub containers: Vec<SidecarContainer>,
    /// Volumes the sidecars mount; a Pod volume of the same name wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub volumes: Vec<Volume>,
    /// How injected Pods are upgraded.
    #[serde(default)]
    pub update_strategy: SidecarSetUpdateStrategy,
    /// How new Pods are injected.
    #[serde(default)]
    pub injection_strategy: SidecarSetInjectionStrategy,
    /// Secrets for pulling the sidecar images, added to the Pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// ControllerRevisions kept; default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Pod annotations written at injection (and, unless Retain, at upgrade).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_pod_metadata: Vec<SidecarSetPatchPodMetadata>,
    /// User-chosen version, copied to the ControllerRevisions.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub custom_version: String,
}

/// A sidecar: a full container plus how it is injected and upgraded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainer {
    /// The container itself (inlined).
    #[serde(flatten)]
    pub container: Container,
    /// Before (default) or after the Pod's own containers; ignored for init containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_inject_policy: Option<PodInjectPolicyType>,
    /// Cold (default) or hot upgrade.
    #[serde(
        default,
        skip_serializing_if = "SidecarContainerUpgradeStrategy::is_empty"
    )]
    pub upgrade_strategy: SidecarContainerUpgradeStrategy,
    /// Whether the sidecar also mounts the Pod containers' volume mounts.
    #[serde(default, skip_serializing_if = "ShareVolumePolicy::is_empty")]
    pub share_volume_policy: ShareVolumePolicy,
    /// Whether the sidecar also gets the Pod containers' volume devices (a pointer upstream so
    /// the hash of SidecarSets without it does not change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_volume_device_policy: Option<ShareVolumePolicy>,
    /// Env vars copied from the Pod's containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfer_env: Vec<TransferEnvVar>,
    /// The sidecar's cpu/memory computed at injection from the Pod's containers; exclusive
    /// with the container's own `resources`. Same shape in v1alpha1 and v1beta1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_policy: Option<ResourcesPolicy>,
}

/// `resourcesPolicy`: which of the Pod's containers the sidecar's resources follow, how they
/// are aggregated, and the expressions over the aggregate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesPolicy {
    /// `sum` or `max` of the target containers' values. A string, not an enum, so a wrong
    /// value reaches validation, which names the field.
    #[serde(default)]
    pub target_containers_mode: String,
    /// Regex over container names choosing the targets (the Pod's containers and native
    /// sidecars, never Kruise sidecars); defaulted to `.*`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_containers_name_regex: String,
    /// The expressions; at least one of limits and requests.
    #[serde(default)]
    pub resources_expr: ResourcesExpr,
}

impl ResourcesPolicy {
    /// The mode, when it is one of the two known.
    pub fn mode(&self) -> Option<TargetContainersMode> {
        match self.target_containers_mode.as_str() {
            "sum" => Some(TargetContainersMode::Sum),
            "max" => Some(TargetContainersMode::Max),
            _ => None,
        }
    }
}

/// `resourcesPolicy.targetContainersMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetContainersMode {
    /// Add the targets' values.
    Sum,
    /// The largest of the targets' values.
    Max,
}

/// `resourcesPolicy.resourcesExpr`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourcesExpr {
    /// Expressions for the limits, over the targets' limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceExprs>,
    /// Expressions for the requests, over the targets' requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceExprs>,
}

/// One expression per resource: `+ - * /`, `max(a, b)`, `min(a, b)`, numbers, percentages,
/// quantities and the variable `cpu` (resp. `memory`), the targets' aggregate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceExprs {
    /// The cpu expression; empty leaves cpu unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpu: String,
    /// The memory expression; empty leaves memory unset.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory: String,
}

/// `podInjectPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PodInjectPolicyType {
    /// In front of the Pod's containers.
    #[default]
    BeforeAppContainer,
    /// After the Pod's containers.
    AfterAppContainer,
}

/// `shareVolumePolicy` / `shareVolumeDevicePolicy`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ShareVolumePolicy {
    /// `enabled` or `disabled` (default).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<ShareVolumePolicyType>,
}

impl ShareVolumePolicy {
    fn is_empty(&self) -> bool {
        self.type_.is_none()
    }

    /// Whether sharing is on.
    pub fn enabled(&self) -> bool {
        self.type_ == Some(ShareVolumePolicyType::Enabled)
    }
}

/// `shareVolumePolicy.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ShareVolumePolicyType {
    /// Share.
    Enabled,
    /// Do not share.
    Disabled,
}

/// One env var (or several) copied from a Pod container into the sidecar.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferEnvVar {
    /// Container to copy from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_container_name: String,
    /// Container to copy from, read from a Pod field; exclusive with `sourceContainerName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_container_name_from: Option<SourceContainerNameSource>,
    /// One env var name; exclusive with `envNames`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_name: String,
    /// Several env var names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
}

/// Where `transferEnv` reads the source container's name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceContainerNameSource {
    /// `metadata.name`, `metadata.labels['<KEY>']` or `metadata.annotations['<KEY>']`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
}

/// `upgradeStrategy` of one sidecar.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainerUpgradeStrategy {
    /// ColdUpgrade (default) or HotUpgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_type: Option<SidecarContainerUpgradeType>,
    /// HotUpgrade only: the image the idle container of the pair runs (it must do nothing).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hot_upgrade_empty_image: String,
}

impl SidecarContainerUpgradeStrategy {
    fn is_empty(&self) -> bool {
        self.upgrade_type.is_none() && self.hot_upgrade_empty_image.is_empty()
    }
}

/// `upgradeStrategy.upgradeType`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SidecarContainerUpgradeType {
    /// Restart the sidecar with the new image.
    #[default]
    ColdUpgrade,
    /// Two containers (`-1`, `-2`): start the new version in the idle one, then empty the old.
    HotUpgrade,
}

/// How new Pods are injected.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectionStrategy {
    /// Inject nothing into new Pods (injected Pods still upgrade).
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Inject a stored revision instead of the current spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<SidecarSetInjectRevision>,
}

/// `injectionStrategy.revision`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectRevision {
    /// The revision whose custom version is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_version: Option<String>,
    /// The ControllerRevision of this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_name: Option<String>,
    /// Always (default) or Partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SidecarSetInjectRevisionPolicy>,
}

/// `injectionStrategy.revision.policy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SidecarSetInjectRevisionPolicy {
    /// Every new Pod gets the named revision (unless updateStrategy.selector picks it).
    #[default]
    Always,
    /// New Pods get the named or the latest revision according to the update strategy.
    Partial,
}

/// How injected Pods are upgraded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetUpdateStrategy {
    /// RollingUpdate (default) or NotUpdate.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<SidecarSetUpdateStrategyType>,
    /// Stop upgrading (injection goes on).
    #[serde(default, skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Upgrade only the Pods this selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Matched Pods kept on old revisions (number or percentage); default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    /// Matched Pods unavailable at once during the upgrade; default 1, never 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Order of the upgrade by weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<UpdatePriorityStrategy>,
    /// Spread each batch over label values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: UpdateScatterStrategy,
}

impl SidecarSetUpdateStrategy {
    /// Whether injected Pods are upgraded at all.
    pub fn is_not_update(&self) -> bool {
        self.type_ == Some(SidecarSetUpdateStrategyType::NotUpdate)
    }
}

/// `updateStrategy.type`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SidecarSetUpdateStrategyType {
    /// Only new Pods get the current spec.
    NotUpdate,
    /// Upgrade injected Pods in place.
    #[default]
    RollingUpdate,
}

/// Annotations a SidecarSet writes on its Pods.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetPatchPodMetadata {
    /// Annotations to write.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Retain (default), Overwrite or MergePatchJson.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_policy: Option<SidecarSetPatchPolicyType>,
}

/// `patchPodMetadata[].patchPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum SidecarSetPatchPolicyType {
    /// Keep a value the Pod already has; injection only.
    #[default]
    Retain,
    /// Replace the Pod's value.
    Overwrite,
    /// JSON merge-patch the Pod's value (both are JSON objects).
    MergePatchJson,
}

/// Observed state of a SidecarSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetStatus {
    /// Generation this status describes.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// Pods that match and carry this SidecarSet.
    #[serde(default)]
    pub matched_pods: i32,
    /// Matched Pods running the latest sidecars.
    #[serde(default)]
    pub updated_pods: i32,
    /// Matched Pods that are ready.
    #[serde(default)]
    pub ready_pods: i32,
    /// Matched Pods updated and ready.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub updated_ready_pods: i32,
    /// Name of the latest ControllerRevision.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latest_revision: String,
    /// Hash collisions met naming ControllerRevisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    /// What keeps the controller from acting on some Pods (an addition of ours: upstream's
    /// SidecarSet reports those only in Events).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<SidecarSetCondition>,
}

/// A SidecarSet condition (type in `keys::SIDECARSET_CONDITION_*`).
// `type` and `reason` are strings so a condition written by another version never breaks
// decoding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetCondition {
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

impl SidecarSetStatus {
    /// Every field of the status, as a JSON merge patch of `status`. Serializing leaves out
    /// zero counts, an empty revision and an empty condition list; a merge patch would then keep
    /// the old values, so the fields left out are sent as null (deleted, read back as empty).
    pub fn merge_patch(&self) -> Result<serde_json::Value, serde_json::Error> {
        const FIELDS: [&str; 8] = [
            "observedGeneration",
            "matchedPods",
            "updatedPods",
            "readyPods",
            "updatedReadyPods",
            "latestRevision",
            "collisionCount",
            "conditions",
        ];
        let mut v = serde_json::to_value(self)?;
        if let serde_json::Value::Object(m) = &mut v {
            for k in FIELDS {
                m.entry(k).or_insert(serde_json::Value::Null);
            }
        }
        Ok(serde_json::json!({ "status": v }))
    }
}

impl SidecarContainer {
    /// Upgrade type, ColdUpgrade when unset.
    pub fn upgrade_type(&self) -> SidecarContainerUpgradeType {
        self.upgrade_strategy.upgrade_type.unwrap_or_default()
    }

    /// Whether this sidecar runs as a hot-upgrade pair.
    pub fn is_hot_upgrade(&self) -> bool {
        self.upgrade_type() == SidecarContainerUpgradeType::HotUpgrade
    }

    /// Whether this init container is a native sidecar (`restartPolicy: Always`); upstream
    /// `IsSidecarContainer`.
    pub fn is_native_sidecar(&self) -> bool {
        self.container.restart_policy.as_deref() == Some("Always")
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn status_merge_patch_clears_what_serialization_omits() {
        let st = SidecarSetStatus {
            matched_pods: 3,
            ..Default::default()
        };
        let p = st.merge_patch().expect("patch");
        let s = &p["status"];
        assert_eq!(s["matchedPods"], 3);
        assert_eq!(s["updatedPods"], 0);
        for k in [
            "updatedReadyPods",
            "conditions",
            "latestRevision",
            "collisionCount",
        ] {
            assert!(
                s.get(k).is_some_and(|v| v.is_null()),
                "{k} is sent as null: {p}"
            );
        }
        // Every serialized field is listed: a new field must be added to FIELDS too.
        let full = SidecarSetStatus {
            observed_generation: 1,
            updated_ready_pods: 1,
            latest_revision: "r".into(),
            collision_count: Some(1),
            conditions: vec![SidecarSetCondition::default()],
            ..Default::default()
        };
        let keys: Vec<String> = serde_json::to_value(&full)
            .expect("json")
            .as_object()
            .expect("object")
            .keys()
            .cloned()
            .collect();
        let patch = full.merge_patch().expect("patch");
        assert_eq!(
            patch["status"].as_object().map(|m| m.len()),
            Some(keys.len())
        );
    }
    use super::*;
    use serde_json::json;

    #[test]
    fn sidecar_container_inlines_the_container() {
        let v = json!({
            "name": "proxy", "image": "envoy:1", "podInjectPolicy": "AfterAppContainer",
            "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"},
            "shareVolumePolicy": {"type": "enabled"},
            "transferEnv": [{"sourceContainerName": "main", "envName": "TZ"}]
        });
        let c: SidecarContainer = serde_json::from_value(v.clone()).expect("parses");
        assert_eq!(c.container.name, "proxy");
        assert_eq!(c.container.image.as_deref(), Some("envoy:1"));
        assert!(c.is_hot_upgrade());
        assert!(c.share_volume_policy.enabled());
        assert_eq!(
            c.pod_inject_policy,
            Some(PodInjectPolicyType::AfterAppContainer)
        );
        assert_eq!(serde_json::to_value(&c).expect("serializes"), v);
    }

    #[test]
    fn empty_spec_round_trips_as_go_writes_it() {
        let s: SidecarSetSpec = serde_json::from_value(json!({
            "updateStrategy": {}, "injectionStrategy": {}
        }))
        .expect("parses");
        assert_eq!(
            serde_json::to_value(&s).expect("serializes"),
            json!({"updateStrategy": {}, "injectionStrategy": {}})
        );
        assert!(!s.update_strategy.is_not_update());
    }

    #[test]
    fn status_writes_the_counts_go_always_writes() {
        let st = SidecarSetStatus::default();
        assert_eq!(
            serde_json::to_value(&st).expect("serializes"),
            json!({"matchedPods": 0, "updatedPods": 0, "readyPods": 0})
        );
    }
}
