//! SidecarSet, apps.kruise.io/v1alpha1. Its nested types are v1beta1's; only the spec differs
//! (`namespace` beside `namespaceSelector`, no `customVersion`, which v1alpha1 keeps in the
//! label `apps.kruise.io/sidecarset-custom-version`). The webhook converts.

use k8s_openapi::api::core::v1::{LocalObjectReference, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::apps::v1beta1::{
    SidecarContainer, SidecarSetInjectionStrategy, SidecarSetPatchPodMetadata, SidecarSetStatus,
    SidecarSetUpdateStrategy,
};

/// Desired state of a SidecarSet (v1alpha1).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
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
    /// Only Pods of this namespace; exclusive with `namespaceSelector`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Namespaces whose Pods are injected; unset means every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Init containers injected at Pod creation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub init_containers: Vec<SidecarContainer>,
    /// Sidecar containers injected at Pod creation and upgraded in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub containers: Vec<SidecarContainer>,
    /// Volumes the sidecars mount.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object_list")]
    pub volumes: Vec<Volume>,
    /// How injected Pods are upgraded.
    #[serde(default)]
    pub update_strategy: SidecarSetUpdateStrategy,
    /// How new Pods are injected.
    #[serde(default)]
    pub injection_strategy: SidecarSetInjectionStrategy,
    /// Secrets for pulling the sidecar images.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    /// ControllerRevisions kept; default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    /// Pod annotations written at injection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_pod_metadata: Vec<SidecarSetPatchPodMetadata>,
}
