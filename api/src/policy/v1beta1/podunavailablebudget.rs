//! PodUnavailableBudget, policy.kruise.io/v1beta1 (upstream
//! `apis/policy/v1beta1/podunavailablebudget_types.go`): v1alpha1 with the two deprecated
//! annotations turned into fields (`protectOperations`, `protectTotalReplicas`), plus
//! `ignoredPodSelector`, and `status.observedGeneration` left out while zero.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::policy::v1alpha1::{self, PubOperation, TargetReference};
use crate::serde_util::is_zero_i64;

/// Desired state of a PodUnavailableBudget: which Pods, how many may be unavailable, and
/// against which operations.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "policy.kruise.io",
    version = "v1beta1",
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
    /// The operations the budget protects; empty means DELETE, UPDATE and EVICT (v1alpha1's
    /// `kruise.io/pub-protect-operations`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "protect_operations_schema")]
    pub protect_operations: Vec<PubOperation>,
    /// Replaces the workload's replicas when the Pods have no workload or it has no scale
    /// subresource (v1alpha1's `pub.kruise.io/protect-total-replicas`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub protect_total_replicas: Option<i32>,
    /// Pods this selects are never protected. Kruise-rs refuses budgets that set it (its
    /// controller and Pod webhook read v1alpha1, which cannot carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored_pod_selector: Option<LabelSelector>,
}

/// `spec.protectOperations`: upstream's enum, in upstream's order.
fn protect_operations_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "string",
            "enum": [
                PubOperation::Delete.as_str(),
                PubOperation::Update.as_str(),
                PubOperation::Evict.as_str(),
                PubOperation::Resize.as_str(),
            ],
        },
    })
}

/// Observed state of a PodUnavailableBudget (v1alpha1's, `observedGeneration` optional).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodUnavailableBudgetStatus {
    /// Generation the controller last computed this status for.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
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
    /// Covered Pods expected (the workload's replicas, or `spec.protectTotalReplicas`).
    #[serde(default)]
    pub total_replicas: i32,
}

impl From<&v1alpha1::PodUnavailableBudgetStatus> for PodUnavailableBudgetStatus {
    fn from(s: &v1alpha1::PodUnavailableBudgetStatus) -> Self {
        Self {
            observed_generation: s.observed_generation,
            disrupted_pods: s.disrupted_pods.clone(),
            unavailable_pods: s.unavailable_pods.clone(),
            unavailable_allowed: s.unavailable_allowed,
            current_available: s.current_available,
            desired_available: s.desired_available,
            total_replicas: s.total_replicas,
        }
    }
}

impl PodUnavailableBudget {
    /// The body of a status write, in the storage version, for a budget read as v1alpha1: its
    /// name, namespace, resourceVersion (the write conflicts as a v1alpha1 one would) and status.
    ///
    /// Why not write v1alpha1: with OpenKruise's own PUB CRD installed (no conversion) a v1alpha1
    /// write is a relabel, and the API server stores the old object as v1alpha1's schema prunes
    /// it, losing `protectOperations` and `protectTotalReplicas`. A status write keeps the stored
    /// spec and metadata whatever the body says, so only the status is taken from this.
    pub fn status_write(budget: &v1alpha1::PodUnavailableBudget) -> Self {
        let meta = &budget.metadata;
        let mut out = Self::new(
            meta.name.as_deref().unwrap_or_default(),
            PodUnavailableBudgetSpec::default(),
        );
        out.metadata.namespace.clone_from(&meta.namespace);
        out.metadata
            .resource_version
            .clone_from(&meta.resource_version);
        out.status = budget.status.as_ref().map(PodUnavailableBudgetStatus::from);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use serde_json::json;

    #[test]
    fn decodes_upstreams_v1beta1_fields() {
        let pub_: PodUnavailableBudget = serde_json::from_value(json!({
            "apiVersion": "policy.kruise.io/v1beta1", "kind": "PodUnavailableBudget",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "maxUnavailable": "25%",
                "protectOperations": ["DELETE", "RESIZE"], "protectTotalReplicas": 9,
                "ignoredPodSelector": {"matchLabels": {"skip": "true"}}},
            "status": {"unavailableAllowed": 1, "currentAvailable": 3, "desiredAvailable": 2,
                "totalReplicas": 3}
        }))
        .expect("decodes");
        assert_eq!(
            pub_.spec.protect_operations,
            vec![PubOperation::Delete, PubOperation::Resize]
        );
        assert_eq!(pub_.spec.protect_total_replicas, Some(9));
        assert!(pub_.spec.ignored_pod_selector.is_some());
        let status = serde_json::to_value(pub_.status.expect("status")).expect("encodes");
        assert!(
            status.get("observedGeneration").is_none(),
            "zero is left out"
        );
    }

    #[test]
    fn schema_has_upstreams_enum_and_minimum() {
        let crd = serde_json::to_value(PodUnavailableBudget::crd()).expect("crd");
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert_eq!(
            spec["protectOperations"]["items"]["enum"],
            json!(["DELETE", "UPDATE", "EVICT", "RESIZE"])
        );
        assert_eq!(spec["protectTotalReplicas"]["minimum"].as_f64(), Some(1.0));
        assert!(spec["ignoredPodSelector"].is_object());
    }

    #[test]
    fn status_write_carries_the_status_and_the_version_to_conflict_on() {
        let mut old = v1alpha1::PodUnavailableBudget::new("p", Default::default());
        old.metadata.namespace = Some("ns".into());
        old.metadata.resource_version = Some("42".into());
        old.metadata.annotations = Some(BTreeMap::from([(
            "pub.kruise.io/protect-total-replicas".to_owned(),
            "5".to_owned(),
        )]));
        old.status = Some(v1alpha1::PodUnavailableBudgetStatus {
            observed_generation: 3,
            unavailable_allowed: 1,
            current_available: 4,
            desired_available: 3,
            total_replicas: 5,
            ..Default::default()
        });
        let body = serde_json::to_value(PodUnavailableBudget::status_write(&old)).expect("json");
        assert_eq!(body["apiVersion"], "policy.kruise.io/v1beta1");
        assert_eq!(body["metadata"]["namespace"], "ns");
        assert_eq!(body["metadata"]["resourceVersion"], "42");
        assert_eq!(
            body["status"],
            json!({"observedGeneration": 3, "unavailableAllowed": 1, "currentAvailable": 4,
                   "desiredAvailable": 3, "totalReplicas": 5})
        );
    }
}
