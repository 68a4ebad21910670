//! PersistentPodState, apps.kruise.io/v1alpha1 (upstream
//! `apis/apps/v1alpha1/persistent_pod_state_types.go`): records, per Pod of a StatefulSet, the
//! node it ran on (and the listed node labels and Pod annotations), so that a recreated Pod of
//! the same name is steered back there by the Pod webhook.
//!
//! Beside the types: the reading of the spec the webhook and the controller share — which node
//! labels and annotations are recorded ([`PersistentPodStateSpec::topology_keys`]), what a
//! recreated Pod is given ([`node_affinity`]), the spec generated from a StatefulSet's
//! annotations ([`generated_spec`]) and which recorded Pods a scale-down drops
//! ([`in_replicas`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::apps::v1beta1::{PersistentPodAnnotation, PersistentPodStateStatus, PodState};
use crate::keys;
pub use crate::policy::v1alpha1::TargetReference;

/// Weight of the preferred term generated from
/// [`keys::PPS_PREFERRED_TOPOLOGY_ANNOTATION`] (upstream's).
pub const GENERATED_PREFERRED_WEIGHT: i32 = 100;

/// Desired state of a PersistentPodState: which workload, and what to record of its Pods.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "apps.kruise.io",
    version = "v1alpha1",
    kind = "PersistentPodState",
    namespaced,
    status = "PersistentPodStateStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PersistentPodState records where each Pod of a StatefulSet ran, so that a recreated Pod returns to the same node topology."
)]
#[serde(rename_all = "camelCase")]
pub struct PersistentPodStateSpec {
    /// The workload whose Pods are recorded: a StatefulSet (apps/v1) or an Advanced
    /// StatefulSet (apps.kruise.io).
    #[serde(rename = "targetRef")]
    pub target_reference: TargetReference,
    /// Pod annotations recorded with each Pod's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub persistent_pod_annotations: Vec<PersistentPodAnnotation>,
    /// Node labels a recreated Pod must keep (injected as `spec.nodeSelector`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_persistent_topology: Option<NodeTopologyTerm>,
    /// Node labels a recreated Pod prefers to keep, with weights (injected as preferred node
    /// affinity).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred_persistent_topology: Vec<PreferredTopologyTerm>,
    /// `WhenScaled` (default): a Pod's state is dropped when the workload scales it away;
    /// `WhenDeleted`: kept until the workload is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_pod_state_retention_policy: Option<String>,
}

/// A weighted preferred topology.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreferredTopologyTerm {
    /// 1-100, as a preferred scheduling term's.
    pub weight: i32,
    /// The node labels.
    pub preference: NodeTopologyTerm,
}

/// Node label keys, e.g. `kubernetes.io/hostname`, `topology.kubernetes.io/zone`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeTopologyTerm {
    /// Node label keys.
    #[serde(default)]
    pub node_topology_keys: Vec<String>,
}

impl PersistentPodStateSpec {
    /// Every node label key recorded: the required ones and every preferred term's.
    pub fn topology_keys(&self) -> BTreeSet<String> {
        self.required_persistent_topology
            .iter()
            .chain(
                self.preferred_persistent_topology
                    .iter()
                    .map(|p| &p.preference),
            )
            .flat_map(|t| t.node_topology_keys.iter().cloned())
            .collect()
    }

    /// Every Pod annotation key recorded.
    pub fn annotation_keys(&self) -> BTreeSet<String> {
        self.persistent_pod_annotations
            .iter()
            .map(|a| a.key.clone())
            .collect()
    }

    /// Whether the states of scaled-away Pods are dropped (anything but `WhenDeleted`, as
    /// upstream reads it).
    pub fn drops_scaled_away(&self) -> bool {
        self.persistent_pod_state_retention_policy.as_deref()
            != Some(keys::PPS_RETENTION_WHEN_DELETED)
    }
}

/// What a recreated Pod is given from its recorded state (upstream `createNodeAffinity`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    /// Added to `spec.nodeSelector`: the required keys' recorded values.
    pub node_selector: BTreeMap<String, String>,
    /// Appended to the preferred node affinity: one term per preferred term, matching the
    /// recorded values of its keys.
    pub preferred: Vec<PreferredSchedulingTerm>,
}

impl Placement {
    /// Whether there is nothing to inject.
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_empty() && self.preferred.is_empty()
    }
}

/// The placement of a recreated Pod whose recorded state is `state`. A preferred term none of
/// whose keys were recorded is left out (an empty term would match every node and so carry
/// no meaning; upstream appends it anyway).
pub fn node_affinity(spec: &PersistentPodStateSpec, state: &PodState) -> Placement {
    let recorded = |key: &String| {
        state
            .node_topology_labels
            .get(key)
            .map(|v| (key.clone(), v.clone()))
    };
    let node_selector = spec
        .required_persistent_topology
        .iter()
        .flat_map(|t| t.node_topology_keys.iter().filter_map(recorded))
        .collect();
    let preferred = spec
        .preferred_persistent_topology
        .iter()
        .filter_map(|term| {
            let exprs: Vec<_> = term
                .preference
                .node_topology_keys
                .iter()
                .filter_map(recorded)
                .map(|(key, value)| NodeSelectorRequirement {
                    key,
                    operator: "In".to_owned(),
                    values: Some(vec![value]),
                })
                .collect();
            (!exprs.is_empty()).then_some(PreferredSchedulingTerm {
                weight: term.weight,
                preference: NodeSelectorTerm {
                    match_expressions: Some(exprs),
                    match_fields: None,
                },
            })
        })
        .collect();
    Placement {
        node_selector,
        preferred,
    }
}

fn split_keys(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The spec a StatefulSet's annotations ask for (upstream `newStatefulSetPersistentPodState`),
/// or `None` when they ask for none: [`keys::PPS_AUTO_GENERATE_ANNOTATION`] is not `"true"`,
/// or neither topology annotation is set.
pub fn generated_spec(
    target: TargetReference,
    annotations: &BTreeMap<String, String>,
) -> Option<PersistentPodStateSpec> {
    let get = |k: &str| annotations.get(k).map(String::as_str).unwrap_or_default();
    if get(keys::PPS_AUTO_GENERATE_ANNOTATION) != "true" {
        return None;
    }
    let required = split_keys(get(keys::PPS_REQUIRED_TOPOLOGY_ANNOTATION));
    let preferred = split_keys(get(keys::PPS_PREFERRED_TOPOLOGY_ANNOTATION));
    if required.is_empty() && preferred.is_empty() {
        return None;
    }
    Some(PersistentPodStateSpec {
        target_reference: target,
        persistent_pod_annotations: split_keys(get(
            keys::PPS_PERSISTENT_POD_ANNOTATIONS_ANNOTATION,
        ))
        .into_iter()
        .map(|key| PersistentPodAnnotation { key })
        .collect(),
        required_persistent_topology: (!required.is_empty()).then_some(NodeTopologyTerm {
            node_topology_keys: required,
        }),
        preferred_persistent_topology: if preferred.is_empty() {
            Vec::new()
        } else {
            vec![PreferredTopologyTerm {
                weight: GENERATED_PREFERRED_WEIGHT,
                preference: NodeTopologyTerm {
                    node_topology_keys: preferred,
                },
            }]
        },
        persistent_pod_state_retention_policy: None,
    })
}

/// The ordinal of a StatefulSet Pod: what follows its last `-`.
pub fn ordinal_of(pod_name: &str) -> Option<i32> {
    pod_name.rsplit_once('-')?.1.parse().ok()
}

/// Whether ordinal `index` is among the first `replicas` ordinals counted from `start`,
/// skipping `reserved` (upstream `isInStatefulSetReplicas`, which counts from 0; Kruise-rs
/// also honours `spec.ordinals.start`).
pub fn in_replicas(index: i32, replicas: i32, start: i32, reserved: &[i32]) -> bool {
    if index < start {
        return false;
    }
    let skipped = reserved
        .iter()
        .filter(|r| (start..=index).contains(*r))
        .count();
    if reserved.contains(&index) {
        return false;
    }
    let position = i64::from(index - start) - skipped as i64;
    position < i64::from(replicas)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(required: &[&str], preferred: &[(i32, &[&str])]) -> PersistentPodStateSpec {
        PersistentPodStateSpec {
            required_persistent_topology: (!required.is_empty()).then(|| NodeTopologyTerm {
                node_topology_keys: required.iter().map(|s| s.to_string()).collect(),
            }),
            preferred_persistent_topology: preferred
                .iter()
                .map(|(w, k)| PreferredTopologyTerm {
                    weight: *w,
                    preference: NodeTopologyTerm {
                        node_topology_keys: k.iter().map(|s| s.to_string()).collect(),
                    },
                })
                .collect(),
            ..Default::default()
        }
    }

    fn state(labels: &[(&str, &str)]) -> PodState {
        PodState {
            node_name: "n1".into(),
            node_topology_labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn required_keys_become_the_node_selector_and_preferred_ones_affinity() {
        let s = spec(
            &["kubernetes.io/hostname"],
            &[(50, &["topology.kubernetes.io/zone", "missing"])],
        );
        let p = node_affinity(
            &s,
            &state(&[
                ("kubernetes.io/hostname", "n1"),
                ("topology.kubernetes.io/zone", "z1"),
            ]),
        );
        assert_eq!(
            p.node_selector,
            BTreeMap::from([("kubernetes.io/hostname".to_owned(), "n1".to_owned())])
        );
        assert_eq!(p.preferred.len(), 1);
        assert_eq!(p.preferred[0].weight, 50);
        let exprs = p.preferred[0]
            .preference
            .match_expressions
            .clone()
            .unwrap_or_default();
        assert_eq!(exprs.len(), 1);
        assert_eq!(exprs[0].key, "topology.kubernetes.io/zone");
        assert_eq!(exprs[0].operator, "In");
        assert_eq!(exprs[0].values, Some(vec!["z1".to_owned()]));
    }

    #[test]
    fn unrecorded_keys_inject_nothing() {
        let s = spec(&["kubernetes.io/hostname"], &[(10, &["zone"])]);
        assert!(node_affinity(&s, &state(&[])).is_empty());
    }

    #[test]
    fn generated_spec_follows_the_annotations() {
        let target = TargetReference {
            api_version: "apps.kruise.io/v1beta1".into(),
            kind: "StatefulSet".into(),
            name: "web".into(),
        };
        let ann = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(generated_spec(target.clone(), &ann(&[])), None);
        assert_eq!(
            generated_spec(
                target.clone(),
                &ann(&[(keys::PPS_AUTO_GENERATE_ANNOTATION, "true")])
            ),
            None,
            "no topology annotation: nothing generated"
        );
        let s = generated_spec(
            target.clone(),
            &ann(&[
                (keys::PPS_AUTO_GENERATE_ANNOTATION, "true"),
                (keys::PPS_REQUIRED_TOPOLOGY_ANNOTATION, "a,b"),
                (keys::PPS_PREFERRED_TOPOLOGY_ANNOTATION, "c"),
                (keys::PPS_PERSISTENT_POD_ANNOTATIONS_ANNOTATION, "x/ip"),
            ]),
        )
        .expect("generated");
        assert_eq!(s.target_reference, target);
        assert_eq!(
            s.required_persistent_topology
                .map(|t| t.node_topology_keys)
                .unwrap_or_default(),
            vec!["a", "b"]
        );
        assert_eq!(s.preferred_persistent_topology[0].weight, 100);
        assert_eq!(
            s.preferred_persistent_topology[0]
                .preference
                .node_topology_keys,
            vec!["c"]
        );
        assert_eq!(s.persistent_pod_annotations[0].key, "x/ip");
    }

    #[test]
    fn replicas_skip_reserved_ordinals() {
        // replicas 3, reserved 1: ordinals 0, 2, 3.
        let r = [1];
        let kept: Vec<i32> = (0..6).filter(|i| in_replicas(*i, 3, 0, &r)).collect();
        assert_eq!(kept, vec![0, 2, 3]);
        // start 5, replicas 2: ordinals 5, 6.
        let kept: Vec<i32> = (0..10).filter(|i| in_replicas(*i, 2, 5, &[])).collect();
        assert_eq!(kept, vec![5, 6]);
        assert_eq!(ordinal_of("web-12"), Some(12));
        assert_eq!(ordinal_of("web"), None);
    }

    #[test]
    fn status_json_uses_upstream_names() {
        let mut status = PersistentPodStateStatus {
            observed_generation: 2,
            ..Default::default()
        };
        status
            .pod_states
            .insert("web-0".into(), state(&[("kubernetes.io/hostname", "n1")]));
        let v = serde_json::to_value(&status).expect("json");
        assert_eq!(v["observedGeneration"], 2);
        assert_eq!(
            v["podStates"]["web-0"]["nodeTopologyLabels"]["kubernetes.io/hostname"],
            "n1"
        );
        assert_eq!(v["podStates"]["web-0"]["nodeName"], "n1");
    }
}
