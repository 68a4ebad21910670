//! ResourceDistribution, apps.kruise.io/v1beta1 (upstream
//! `apis/apps/v1beta1/resourcedistribution_types.go`) (served; v1alpha1 is stored): v1alpha1 with
//! `targets.namespaceLabelSelector` called `namespaceSelector` and each condition's
//! `failedNamespace` called `failedNamespaces`. The namespace lists are the same in both.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::serde_util::{is_zero_i32, is_zero_i64};

/// Desired state of a ResourceDistribution: the resource and where it goes.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1beta1",
    kind = "ResourceDistribution",
    shortname = "distributor",
    status = "ResourceDistributionStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ResourceDistribution copies a Secret or ConfigMap into the namespaces its targets select and keeps the copies in sync.",
    printcolumn = r#"{"name":"TOTAL","type":"integer","jsonPath":".status.desired","description":"The desired number of namespaces the resource is distributed to"}"#,
    printcolumn = r#"{"name":"SUCCEED","type":"integer","jsonPath":".status.succeeded","description":"The number of namespaces the resource was distributed to successfully"}"#,
    printcolumn = r#"{"name":"FAILED","type":"integer","jsonPath":".status.failed","description":"The number of namespaces the resource could not be distributed to"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionSpec {
    /// The resource to distribute: a whole Secret or ConfigMap manifest (`apiVersion`, `kind`,
    /// `metadata.name`, data); its namespace is ignored.
    #[schemars(schema_with = "crate::schema::embedded_resource")]
    pub resource: serde_json::Value,
    /// The namespaces the resource goes to.
    pub targets: ResourceDistributionTargets,
}

/// Which namespaces receive the resource: (all, or the listed ones plus those the label
/// selector matches), minus the excluded ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionTargets {
    /// Every namespace but the excluded ones.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all_namespaces: bool,
    /// Namespaces that never receive the resource.
    #[serde(
        default,
        skip_serializing_if = "ResourceDistributionTargetNamespaces::is_empty"
    )]
    pub excluded_namespaces: ResourceDistributionTargetNamespaces,
    /// Namespaces that receive the resource by name.
    #[serde(
        default,
        skip_serializing_if = "ResourceDistributionTargetNamespaces::is_empty"
    )]
    pub included_namespaces: ResourceDistributionTargetNamespaces,
    /// Namespaces that receive the resource by label (v1alpha1's `namespaceLabelSelector`).
    #[serde(default, skip_serializing_if = "crate::selector::is_empty")]
    #[schemars(schema_with = "crate::schema::atomic_label_selector")]
    pub namespace_selector: LabelSelector,
}

/// A list of namespaces by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionTargetNamespaces {
    /// The namespaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub list: Vec<ResourceDistributionNamespace>,
}

impl ResourceDistributionTargetNamespaces {
    /// Whether no namespace is listed.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether `name` is listed.
    pub fn contains(&self, name: &str) -> bool {
        self.list.iter().any(|n| n.name == name)
    }

    /// The listed names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.list.iter().map(|n| n.name.as_str())
    }
}

/// One namespace, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionNamespace {
    /// Name of the namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// What the controller last saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionStatus {
    /// Namespaces the resource should be in.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub desired: i32,
    /// Namespaces the resource is in, as desired.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub succeeded: i32,
    /// Namespaces the resource could not be put in.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub failed: i32,
    /// The generation this status describes.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub observed_generation: i64,
    /// One condition of each of upstream's six types.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ResourceDistributionCondition>,
}

/// One kind of failure and the namespaces where it happened.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDistributionCondition {
    /// One of upstream's six types.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// When `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// The last error, or `Succeeded`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The namespaces where it happened (v1alpha1's `failedNamespace`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_namespaces: Vec<String>,
}
