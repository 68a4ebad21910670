//! Pods the workload ran before its WorkloadSpread existed carry no
//! `apps.kruise.io/matched-workloadspread`: the controller adopts each running one into the
//! subset its node belongs to (upstream `getAndUpdateSuitableSubsetName` and `matchesSubset`),
//! so that the caps and deletion costs count it. Pure: the caller reads the node and writes the
//! patch.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorTerm, Pod};
use kruise_api::apps::v1alpha1::{MatchedWorkloadSpread, WorkloadSpread, WorkloadSpreadSubset};
use kruise_api::keys;
use serde_json::{Map, Value};

use crate::workload::nodes::{term_matches, tolerates};

/// The node's labels and name, as the term matcher wants them.
fn node_facts(node: &Node) -> (BTreeMap<String, String>, &str) {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    (labels, node.metadata.name.as_deref().unwrap_or_default())
}

/// Upstream `matchesSubsetRequiredAndToleration`: every taint of the node is tolerated by the
/// Pod or the subset, and the node satisfies the subset's required term together with the
/// Pod's own required terms (each of the Pod's terms narrowed by the subset's).
fn required_matches(pod: &Pod, node: &Node, subset: &WorkloadSpreadSubset) -> bool {
    let spec = pod.spec.as_ref();
    let mut tolerations = spec.and_then(|s| s.tolerations.clone()).unwrap_or_default();
    tolerations.extend(subset.tolerations.iter().cloned());
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    if taints
        .into_iter()
        .flatten()
        .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
    {
        return false;
    }
    let Some(want) = &subset.required_node_selector_term else {
        return true;
    };
    let own: Vec<NodeSelectorTerm> = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    let terms: Vec<NodeSelectorTerm> = if own.is_empty() {
        vec![want.clone()]
    } else {
        own.into_iter()
            .map(|mut t| {
                let exprs = t.match_expressions.get_or_insert_with(Vec::new);
                exprs.extend(want.match_expressions.iter().flatten().cloned());
                let fields = t.match_fields.get_or_insert_with(Vec::new);
                fields.extend(want.match_fields.iter().flatten().cloned());
                t
            })
            .collect()
    };
    let (labels, name) = node_facts(node);
    terms.iter().any(|t| term_matches(t, &labels, name))
}

/// Whether `have` already holds everything `patch` would set (a strategic merge that changes
/// nothing): objects key by key, lists of named objects element by element, anything else equal.
fn holds(have: &Value, patch: &Value) -> bool {
    match (have, patch) {
        (_, Value::Null) => false,
        (Value::Object(h), Value::Object(p)) => p.iter().all(|(k, v)| match (h.get(k), v) {
            (None, Value::Null) => true,
            (None, _) => false,
            (Some(hv), v) => holds(hv, v),
        }),
        (Value::Array(h), Value::Array(p)) if p.iter().all(named) => p.iter().all(|pe| {
            h.iter()
                .find(|he| he.get("name") == pe.get("name"))
                .is_some_and(|he| holds(he, pe))
        }),
        (h, p) => h == p,
    }
}

fn named(v: &Value) -> bool {
    v.get("name").is_some_and(Value::is_string)
}

/// Upstream `podPreferredScore`: 1 when the subset's patch would change nothing of the Pod but
/// its annotations (the Pod looks as if the subset had made it), else 0.
fn patch_score(pod: &Pod, patch: &Value) -> i64 {
    let mut patch = patch.clone();
    if let Some(meta) = patch.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("annotations");
    }
    let have = serde_json::to_value(pod).unwrap_or(Value::Null);
    i64::from(holds(&have, &patch))
}

/// Upstream `matchesSubset`: `None` when the Pod cannot be in the subset on this node, else its
/// score: the weight of the subset's preferred terms the node meets × 100, + 10 when the patch is
/// already on the Pod, + 1 while the subset still misses Pods.
pub fn score(pod: &Pod, node: &Node, subset: &WorkloadSpreadSubset, missing: i32) -> Option<i64> {
    if !required_matches(pod, node, subset) {
        return None;
    }
    let (labels, name) = node_facts(node);
    let preferred: i64 = subset
        .preferred_node_selector_terms
        .iter()
        .filter(|t| term_matches(&t.preference, &labels, name))
        .map(|t| i64::from(t.weight))
        .sum();
    let patched = subset.patch.as_ref().map_or(0, |p| patch_score(pod, p));
    Some(preferred * 100 + patched * 10 + i64::from(missing > 0))
}

/// The subset of highest [`score`] for a Pod running on `node` (the first on a tie), given how
/// many Pods each subset still misses.
pub fn favourite(
    ws: &WorkloadSpread,
    pod: &Pod,
    node: &Node,
    missing: &BTreeMap<String, i32>,
) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    for (i, subset) in ws.spec.subsets.iter().enumerate() {
        let m = missing.get(&subset.name).copied().unwrap_or(0);
        if let Some(s) = score(pod, node, subset, m)
            && best.is_none_or(|(_, b)| s > b)
        {
            best = Some((i, s));
        }
    }
    best.map(|(i, _)| i)
}

/// The metadata patch that adopts a Pod into `subset` (upstream
/// `patchFavoriteSubsetMetadataToPod`): the subset patch's labels and annotations (unless the
/// WorkloadSpread opts out) and the annotation naming the subset.
pub fn adopt_patch(ws: &WorkloadSpread, subset: &WorkloadSpreadSubset) -> Value {
    let opted_out = ws
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::WS_IGNORE_PATCH_EXISTING_PODS_ANNOTATION))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let mut meta = match subset.patch.as_ref().and_then(|p| p.get("metadata")) {
        Some(Value::Object(m)) if !opted_out => m.clone(),
        _ => Map::new(),
    };
    let matched = MatchedWorkloadSpread {
        name: ws.metadata.name.clone().unwrap_or_default(),
        subset: subset.name.clone(),
        uid: String::new(),
    };
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Some(a) = annotations.as_object_mut() {
        a.insert(
            keys::MATCHED_WORKLOADSPREAD_ANNOTATION.to_owned(),
            Value::String(matched.to_annotation()),
        );
    }
    serde_json::json!({ "metadata": meta })
}
