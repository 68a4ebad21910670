//! UnitedDeployment v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `apis/apps/v1alpha1/uniteddeployment_conversion.go`.
//!
//! The spec is the same JSON in both versions except `spec.template.cloneSetTemplate`: upstream
//! keeps a v1beta1 CloneSet spec in both, ours keeps a v1alpha1 one in v1alpha1 (the CloneSet
//! the controller creates), so that template goes through the CloneSet mapping
//! ([`crate::cloneset::conversion`]) where upstream copies it. Two changes to that mapping keep
//! a v1alpha1 template's revision hash when it comes back without the record (a status write
//! keeps the stored metadata, so the record made with the new status is dropped and the old
//! one no longer matches): an unset update type stays unset both ways (both versions default it
//! to a recreating rolling update), and an `inPlaceUpdateStrategy` the mapping made only to
//! hold the image pre-download settings goes when they move back to annotations.
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
//! What the plain mapping cannot carry back (maps that disagree with `subsetStatuses`, the
//! CloneSet template's spelling) the generic engine keeps in its record.

use serde_json::{Map, Value, json};

use crate::cloneset::conversion as cloneset;
use crate::conversion::scheme::{Owned, Scheme};
use kruise_api::keys;

/// Everything the two mappings read or write. The template's parts are the CloneSet
/// mapping's, under `spec.template.cloneSetTemplate`.
const OWNED: &[Owned] = &[
    Owned::Value(&["status", "subsetReplicas"]),
    Owned::Value(&["status", "updateStatus"]),
    Owned::Value(&["status", "updatedRevision"]),
    Owned::Value(&["status", "subsetStatuses"]),
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
    // Children before their parent, so an emptied parent can go too.
    Owned::Shape(&["spec", "template", "cloneSetTemplate", "metadata", "labels"]),
    Owned::Shape(&[
        "spec",
        "template",
        "cloneSetTemplate",
        "metadata",
        "annotations",
    ]),
    Owned::Shape(&["spec", "template", "cloneSetTemplate", "metadata"]),
    // The record itself may create the object's annotations.
    Owned::Shape(&["metadata", "annotations"]),
];

/// UnitedDeployment v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme {
    group_prefix: keys::APPS_GROUP_PREFIX,
    versions: [keys::VERSION_V1ALPHA1, keys::VERSION_V1BETA1],
    forward: to_v1beta1,
    backward: to_v1alpha1,
    owned: OWNED,
};

/// Converts one UnitedDeployment to `desired` (`v1alpha1` or `v1beta1`, with or without the
/// group).
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

/// Plain v1alpha1 → v1beta1 mapping.
pub fn to_v1beta1(src: &Value) -> Value {
    let mut out = src.clone();
    let order = topology_names(src);
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    o.insert("apiVersion".to_owned(), json!(keys::APPS_V1BETA1));
    if let Some(t) = clone_set_template(o) {
        template_to_v1beta1(t);
    }
    if let Some(Value::Object(status)) = o.get_mut("status") {
        status_to_v1beta1(status, &order);
    }
    out
}

/// Plain v1beta1 → v1alpha1 mapping.
pub fn to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    let Some(o) = out.as_object_mut() else {
        return out;
    };
    o.insert("apiVersion".to_owned(), json!(keys::APPS_V1ALPHA1));
    if let Some(t) = clone_set_template(o) {
        template_to_v1alpha1(t);
    }
    if let Some(Value::Object(status)) = o.get_mut("status") {
        status_to_v1alpha1(status);
    }
    out
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

fn clone_set_template(o: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    o.get_mut("spec")?
        .get_mut("template")?
        .get_mut("cloneSetTemplate")?
        .as_object_mut()
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

// ---- spec.template.cloneSetTemplate ----

/// Whether an update strategy names no type (both versions then recreate Pods in a rolling
/// update).
fn untyped(us: Option<&Value>) -> bool {
    match us {
        None => true,
        Some(Value::Object(m)) => m.get("type").is_none_or(Value::is_null),
        Some(_) => false,
    }
}

/// Runs a CloneSet mapping over the template as if it were a CloneSet's metadata and spec.
fn through_cloneset(t: &mut Map<String, Value>, mapping: fn(&Value) -> Value) {
    let mut pseudo = Map::new();
    for k in ["metadata", "spec"] {
        if let Some(v) = t.get(k) {
            pseudo.insert(k.to_owned(), v.clone());
        }
    }
    let mapped = mapping(&Value::Object(pseudo));
    for k in ["metadata", "spec"] {
        if let Some(v) = mapped.get(k) {
            t.insert(k.to_owned(), v.clone());
        }
    }
}

fn template_to_v1beta1(t: &mut Map<String, Value>) {
    let Some(spec) = t.get("spec").and_then(Value::as_object) else {
        return;
    };
    let us = spec.get("updateStrategy");
    let (untyped, had_us) = (untyped(us), us.is_some());
    through_cloneset(t, cloneset::to_v1beta1);
    if !untyped {
        return;
    }
    // Keep the type unset: the CloneSet mapping spells out the default.
    let Some(Value::Object(spec)) = t.get_mut("spec") else {
        return;
    };
    if let Some(Value::Object(us)) = spec.get_mut("updateStrategy") {
        us.remove("type");
        if let Some(Value::Object(ru)) = us.get_mut("rollingUpdate") {
            ru.remove("podUpdatePolicy");
            if ru.is_empty() {
                us.remove("rollingUpdate");
            }
        }
        if us.is_empty() && !had_us {
            spec.remove("updateStrategy");
        }
    }
}

/// The image pre-download fields the CloneSet mapping moves to annotations.
const PREDOWNLOAD_FIELDS: [&str; 3] = [
    "imagePreDownloadParallelism",
    "imagePreDownloadTimeoutSeconds",
    "imagePreDownloadMinUpdatedReadyPods",
];

fn template_to_v1alpha1(t: &mut Map<String, Value>) {
    let Some(spec) = t.get("spec").and_then(Value::as_object) else {
        return;
    };
    let us = spec.get("updateStrategy");
    let policy = us
        .and_then(|u| u.get("rollingUpdate"))
        .and_then(|r| r.get("podUpdatePolicy"))
        .filter(|p| !p.is_null());
    let (untyped, had_us) = (untyped(us) && policy.is_none(), us.is_some());
    // An inPlaceUpdateStrategy holding only pre-download fields was made by the mapping the
    // other way; once they move to annotations it goes too.
    let ips_only_predownload = us
        .and_then(|u| u.get("rollingUpdate"))
        .and_then(|r| r.get("inPlaceUpdateStrategy"))
        .and_then(Value::as_object)
        .is_some_and(|ips| {
            !ips.is_empty() && ips.keys().all(|k| PREDOWNLOAD_FIELDS.contains(&k.as_str()))
        });
    through_cloneset(t, cloneset::to_v1alpha1);
    let Some(Value::Object(spec)) = t.get_mut("spec") else {
        return;
    };
    let Some(Value::Object(us)) = spec.get_mut("updateStrategy") else {
        return;
    };
    if ips_only_predownload
        && us
            .get("inPlaceUpdateStrategy")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
    {
        us.remove("inPlaceUpdateStrategy");
    }
    if untyped {
        us.remove("type");
        if us.is_empty() && !had_us {
            spec.remove("updateStrategy");
        }
    }
}

#[cfg(test)]
#[path = "conversion_tests.rs"]
mod tests;
