//! PodUnavailableBudget, policy.kruise.io/v1alpha1 (upstream
//! `apis/policy/v1alpha1/podunavailablebudget_types.go`): a disruption budget that, unlike
//! Kubernetes' PodDisruptionBudget, also covers Pod deletion and in-place updates.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a PodUnavailableBudget: which Pods, and how many may be unavailable.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.kruise.io",
    version = "v1alpha1",
    kind = "PodUnavailableBudget",
    namespaced,
    shortname = "pub",
    status = "PodUnavailableBudgetStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PodUnavailableBudget limits how many of a set of Pods deletion, eviction and in-place update may make unavailable at once.",
    printcolumn = r#"{"name":"Allowed","type":"integer","jsonPath":".status.unavailableAllowed","description":"UnavailableAllowed number of pod unavailable that are currently allowed"}"#,
    printcolumn = r#"{"name":"Current","type":"integer","jsonPath":".status.currentAvailable","description":"CurrentAvailable current number of available pods"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".status.desiredAvailable","description":"DesiredAvailable minimum desired number of available pods"}"#,
    printcolumn = r#"{"name":"Total","type":"integer","jsonPath":".status.totalReplicas","description":"TotalReplicas total number of pods counted by this budget"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetSpec {
    /// The Pods the budget covers, by label (exclusive with `targetRef`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The workload whose Pods the budget covers (exclusive with `selector`).
    #[serde(default, rename = "targetRef", skip_serializing_if = "Option::is_none")]
    pub target_reference: Option<TargetReference>,
    /// At most this many (or this percentage, rounded up) covered Pods may be unavailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// At least this many (or this percentage, rounded up) covered Pods stay available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
}

/// The workload a budget covers. Only the group of `apiVersion` matters when comparing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetReference {
    /// API version of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// Kind of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Name of the referent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

impl TargetReference {
    /// The group of `apiVersion` (`""` for the core group), or `None` when it is not of the
    /// form `group/version` or `version` (upstream `schema.ParseGroupVersion`).
    pub fn group(&self) -> Option<&str> {
        parse_group(&self.api_version)
    }

    /// Whether both name the same workload: same group, kind and name; versions may differ
    /// (upstream `IsReferenceEqual`).
    pub fn same_workload(&self, other: &TargetReference) -> bool {
        match (self.group(), other.group()) {
            (Some(a), Some(b)) => a == b && self.kind == other.kind && self.name == other.name,
            _ => false,
        }
    }
}

/// Group of an apiVersion as apimachinery parses it: `""` → core, `v1` → core, `g/v` → `g`;
/// more than one slash is an error.
pub fn parse_group(api_version: &str) -> Option<&str> {
    match api_version.split_once('/') {
        None => Some(""),
        Some((g, v)) if !v.contains('/') => Some(g),
        Some(_) => None,
    }
}

/// Observed state of a PodUnavailableBudget.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetStatus {
    /// Generation the controller last computed this status for.
    #[serde(default)]
    pub observed_generation: i64,
    /// Pods whose deletion or eviction was admitted but not yet observed, with when.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub disrupted_pods: BTreeMap<String, Time>,
    /// Pods whose in-place update was admitted, with when; they count as unavailable until
    /// the entry expires.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unavailable_pods: BTreeMap<String, Time>,
    /// How many more Pods may become unavailable now.
    #[serde(default)]
    pub unavailable_allowed: i32,
    /// Covered Pods that are available now.
    #[serde(default)]
    pub current_available: i32,
    /// Covered Pods that must stay available.
    #[serde(default)]
    pub desired_available: i32,
    /// Covered Pods expected (the workload's replicas, or the override annotation).
    #[serde(default)]
    pub total_replicas: i32,
}

/// An operation a budget protects, as spelled in `kruise.io/pub-protect-operations` (and in
/// v1beta1's `spec.protectOperations`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum PubOperation {
    /// A change to the Pod spec (in-place update) or the unavailable label appearing.
    Update,
    /// A Pod delete.
    Delete,
    /// A `pods/eviction` create.
    Evict,
    /// An in-place resize that does not restart containers.
    Resize,
}

impl PubOperation {
    /// Every operation, in the order upstream documents them.
    pub const ALL: [PubOperation; 4] = [Self::Update, Self::Delete, Self::Evict, Self::Resize];

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Evict => "EVICT",
            Self::Resize => "RESIZE",
        }
    }

    /// The operation spelled `s` exactly (upstream compares case-sensitively).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

impl fmt::Display for PubOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
