//! UnitedDeployment v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `apis/apps/v1alpha1/uniteddeployment_conversion.go`.
//!
//! The spec is the same JSON in both versions but for `template.cloneSetTemplate`: v1alpha1
//! holds a v1alpha1 CloneSet (the release's shape), v1beta1 a v1beta1 one (master's). The
//! template, its metadata and spec, converts with the CloneSet's own mapping
//! ([`crate::cloneset::conversion`]: flat `updateStrategy` ⇄ `rollingUpdate`, `disablePVCReuse`
//! ⇄ `enablePVCReuse`, the exclude-preparing-delete label and the image pre-download
//! annotations of the template's metadata ⇄ fields); what it cannot carry back the record keeps.
//!
//! The status differs as upstream's does:
//! - to v1beta1: `updateStatus.updatedRevision` becomes `updatedRevision`; every
//!   `subsetReplicas` entry sets `replicas`, then every `updateStatus.currentPartitions` entry
//!   sets `partition`, of the first `subsetStatuses` entry of that name, appended when there is
//!   none (a subset in only one of the maps gets only that field). Upstream walks Go maps, in
//!   random order; ours takes the subsets in `spec.topology.subsets` order, then the others by
//!   name. A zero is left out, as Go's `omitempty` does.
//! - to v1alpha1: `subsetReplicas` and `updateStatus.currentPartitions` are made from the named
//!   `subsetStatuses` entries (a later entry of the same name wins, an unset field counts 0);
//!   `updateStatus` is left out only when there is neither `updatedRevision` nor a
//!   `subsetStatuses` entry, each map when it would be empty.
//!
//! What the plain mapping cannot carry back (maps that disagree with `subsetStatuses`) the
//! generic engine keeps in its record.

use serde_json::{Map, Value, json};

use kruise_api::keys;

use crate::conversion::scheme::{Owned, Scheme};

/// Where the CloneSet template is.
const TEMPLATE: [&str; 3] = ["spec", "template", "cloneSetTemplate"];

/// Everything the two mappings read or write: the status, and in the CloneSet template what
/// the CloneSet mapping owns in a CloneSet.
const OWNED: &[Owned] = &[
    Owned::Value(&[
        "spec",
        "template",
        "cloneSetTemplate",
        "spec",
        "updateStrategy",
    ]),
    Owned::Value(&[
        "spec",
        "template",
        "cloneSetTemplate",
        "spec",
        "scaleStrategy",
    ]),
    Owned::Value(&[
        "spec",
        "template",
        "cloneSetTemplate",
        "metadata",
        "labels",
        keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL,
    ]),
    Owned::Shape(&["spec", "template", "cloneSetTemplate", "metadata", "labels"]),
    Owned::Value(&[
        "spec",
        "template",
        "cloneSetTemplate",
        "metadata",
        "annotations",
        keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION,
    ]),
    Owned::Value(&[
        "spec",
        "template",
        "cloneSetTemplate",
        "metadata",
        "annotations",
        keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION,
    ]),
    Owned::Value(&[
        "spec",
        "template",
        "cloneSetTemplate",
        "metadata",
        "annotations",
        keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION,
    ]),
    Owned::Shape(&[
        "spec",
        "template",
        "cloneSetTemplate",
        "metadata",
        "annotations",
    ]),
    Owned::Shape(&["spec", "template", "cloneSetTemplate", "metadata"]),
    Owned::Value(&["status", "subsetReplicas"]),
    Owned::Value(&["status", "updateStatus"]),
    Owned::Value(&["status", "updatedRevision"]),
    Owned::Value(&["status", "subsetStatuses"]),
    // The record itself may create the object's annotations.
    Owned::Shape(&["metadata", "annotations"]),
];

/// UnitedDeployment v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one UnitedDeployment to `desired` (`v1alpha1` or `v1beta1`, with or without the
/// group).
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

/// Plain v1alpha1 → v1beta1, apiVersion set (no record; [`convert`] keeps one).
pub fn to_v1beta1(src: &Value) -> Value {
    SCHEME.plain_forward(src)
}

/// Plain v1beta1 → v1alpha1, apiVersion set (no record).
pub fn to_v1alpha1(src: &Value) -> Value {
    SCHEME.plain_backward(src)
}

/// Plain v1alpha1 → v1beta1 mapping.
fn map_to_v1beta1(src: &Value) -> Value {
    let mut out = src.clone();
    convert_template(&mut out, true);
    let order = topology_names(src);
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    if let Some(Value::Object(status)) = o.get_mut("status") {
        status_to_v1beta1(status, &order);
    }
    out
}

/// Plain v1beta1 → v1alpha1 mapping.
fn map_to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    convert_template(&mut out, false);
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    if let Some(Value::Object(status)) = o.get_mut("status") {
        status_to_v1alpha1(status);
    }
    out
}

/// Converts the CloneSet template (an object of a CloneSet's `metadata` and `spec`) in place
/// with the CloneSet's plain mapping, to v1beta1 when `forward`.
fn convert_template(ud: &mut Value, forward: bool) {
    let Some(template) = TEMPLATE
        .iter()
        .try_fold(&mut *ud, |cur, k| cur.as_object_mut()?.get_mut(*k))
    else {
        return;
    };
    if !template.is_object() {
        // Not a template: left for the API server to refuse.
        return;
    }
    let scheme = &crate::cloneset::conversion::SCHEME;
    let mut converted = if forward {
        scheme.plain_forward(template)
    } else {
        scheme.plain_backward(template)
    };
    if let Some(o) = converted.as_object_mut() {
        // The mapping names a CloneSet's version; a template has none.
        o.remove("apiVersion");
    }
    *template = converted;
}

/// `spec.topology.subsets[*].name`, in order.
fn topology_names(obj: &Value) -> Vec<String> {
    crate::json::get(obj, &["spec", "topology", "subsets"])
        .and_then(Value::as_array)
        .map(|subsets| {
            subsets
                .iter()
                .filter_map(|s| s.get("name").and_then(Value::as_str))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

// ---- status ----

fn status_to_v1beta1(status: &mut Map<String, Value>, topology: &[String]) {
    let replicas = status.remove("subsetReplicas");
    let update = status.remove("updateStatus");
    if let Some(rev) = update
        .as_ref()
        .and_then(|u| u.get("updatedRevision"))
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        status.insert("updatedRevision".to_owned(), json!(rev));
    }
    let partitions = update
        .as_ref()
        .and_then(|u| u.get("currentPartitions"))
        .and_then(Value::as_object);
    let replicas = replicas.as_ref().and_then(Value::as_object);
    let merges = [(replicas, "replicas"), (partitions, "partition")];
    if merges.iter().all(|(m, _)| m.is_none_or(Map::is_empty)) {
        return;
    }
    let entries = status.entry("subsetStatuses").or_insert_with(|| json!([]));
    if entries.is_null() {
        *entries = json!([]);
    }
    if !entries.is_array() {
        // Not a list: nothing to merge into; left for the API server to refuse.
        return;
    }
    for (map, field) in merges {
        let Some(map) = map else { continue };
        for name in ordered(map, topology) {
            let Some(v) = map.get(&name) else { continue };
            if let Some(entry) = subset_entry(entries, &name) {
                // Go leaves a zero out of the JSON.
                if v.as_i64() == Some(0) {
                    entry.remove(field);
                } else {
                    entry.insert(field.to_owned(), v.clone());
                }
            }
        }
    }
}

/// The keys of `map`: those in `topology` in that order, then the others by name.
fn ordered(map: &Map<String, Value>, topology: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(map.len());
    for n in topology {
        if map.contains_key(n) && !names.contains(n) {
            names.push(n.clone());
        }
    }
    let mut rest: Vec<String> = map
        .keys()
        .filter(|k| !topology.contains(k))
        .cloned()
        .collect();
    rest.sort();
    names.extend(rest);
    names
}

/// The name of a `subsetStatuses` entry; an unset one is the empty name, as in Go.
fn entry_name(entry: &Value) -> &str {
    entry
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The first `subsetStatuses` entry named `name`, appended when there is none.
fn subset_entry<'a>(entries: &'a mut Value, name: &str) -> Option<&'a mut Map<String, Value>> {
    let list = entries.as_array_mut()?;
    let idx = match list
        .iter()
        .position(|e| e.is_object() && entry_name(e) == name)
    {
        Some(i) => i,
        None => {
            // Go's empty name is left out of the JSON.
            let fresh = if name.is_empty() {
                json!({})
            } else {
                json!({ "name": name })
            };
            list.push(fresh);
            list.len() - 1
        }
    };
    list.get_mut(idx)?.as_object_mut()
}

fn status_to_v1alpha1(status: &mut Map<String, Value>) {
    let rev = status
        .remove("updatedRevision")
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let entries: Vec<Value> = status
        .get("subsetStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let by_name = |field: &str| {
        let mut m = Map::new();
        for e in entries.iter().filter(|e| !entry_name(e).is_empty()) {
            let v = e.get(field).cloned().unwrap_or_else(|| json!(0));
            m.insert(entry_name(e).to_owned(), v);
        }
        m
    };
    if !rev.is_empty() || !entries.is_empty() {
        let mut update = Map::new();
        if !rev.is_empty() {
            update.insert("updatedRevision".to_owned(), json!(rev));
        }
        let partitions = by_name("partition");
        if !partitions.is_empty() {
            update.insert("currentPartitions".to_owned(), Value::Object(partitions));
        }
        status.insert("updateStatus".to_owned(), Value::Object(update));
    }
    let replicas = by_name("replicas");
    if !replicas.is_empty() {
        status.insert("subsetReplicas".to_owned(), Value::Object(replicas));
    }
}

#[cfg(test)]
#[path = "conversion_tests.rs"]
mod tests;
