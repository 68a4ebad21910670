//! The pure decisions of a ResourceDistribution reconcile (no API calls): which namespaces the
//! targets match (upstream `listNamespacesForDistributor`), and per namespace what to do with
//! the copy there (upstream `distributeResource` / `cleanResource`: create, update, delete,
//! leave a foreign object alone, report a missing namespace), with the copy to write
//! (upstream `makeResourceObject`, `mergeMetadata`, `needToUpdate`).

use std::collections::{BTreeMap, BTreeSet};

use kruise_api::apps::v1alpha1::{
    ResourceDistributionConditionType as ConditionType, ResourceDistributionTargets,
};
use kruise_api::{keys, selector};
use serde_json::{Map, Value, json};

/// A namespace as the plan needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
}

/// The distribution as the plan needs it.
#[derive(Clone, Debug)]
pub struct Distributor<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    /// `spec.resource` as written.
    pub resource: &'a Value,
    /// [`kruise_api::apps::v1alpha1::resource_hash`] of it.
    pub hash: &'a str,
}

/// Which namespaces are targeted, and which are not (every other existing namespace).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Targeted {
    /// Sorted; may name namespaces that do not exist (listed in `includedNamespaces`).
    pub matched: Vec<String>,
    /// Sorted; existing namespaces only.
    pub unmatched: Vec<String>,
}

/// Upstream `listNamespacesForDistributor`: (all namespaces, or the included ones plus those a
/// non-empty label selector matches) minus the excluded ones.
pub fn targeted(targets: &ResourceDistributionTargets, namespaces: &[NamespaceInfo]) -> Targeted {
    let mut matched: BTreeSet<&str> = BTreeSet::new();
    if targets.all_namespaces {
        matched.extend(namespaces.iter().map(|n| n.name.as_str()));
    } else {
        matched.extend(targets.included_namespaces.names());
        let sel = &targets.namespace_label_selector;
        if !selector::is_empty(sel) {
            matched.extend(
                namespaces
                    .iter()
                    .filter(|n| selector::matches(sel, &n.labels))
                    .map(|n| n.name.as_str()),
            );
        }
    }
    for ex in targets.excluded_namespaces.names() {
        matched.remove(ex);
    }
    let unmatched = namespaces
        .iter()
        .map(|n| n.name.as_str())
        .filter(|n| !matched.contains(n))
        .collect::<BTreeSet<_>>();
    Targeted {
        matched: matched.into_iter().map(str::to_owned).collect(),
        unmatched: unmatched.into_iter().map(str::to_owned).collect(),
    }
}

/// Upstream `matchViaTargets`: whether one namespace is targeted (the Namespace event mapper).
pub fn namespace_targeted(targets: &ResourceDistributionTargets, ns: &NamespaceInfo) -> bool {
    if targets.excluded_namespaces.contains(&ns.name) {
        return false;
    }
    targets.all_namespaces
        || targets.included_namespaces.contains(&ns.name)
        || selector_matches(targets, &ns.labels)
}

/// Upstream `matchViaLabelSelector`: a non-empty selector that matches `labels`.
pub fn selector_matches(
    targets: &ResourceDistributionTargets,
    labels: &BTreeMap<String, String>,
) -> bool {
    let sel = &targets.namespace_label_selector;
    !selector::is_empty(sel) && selector::matches(sel, labels)
}

/// Whether a Namespace event concerns a distribution (upstream `enqueueRequestForNamespace`):
/// a new namespace the targets match; a deleted one they list by name; labels that changed so
/// that the selector matches before or after; and, beyond upstream, a targeted namespace that
/// starts terminating (its copy is reported missing at once, not when the namespace is gone).
pub fn namespace_event_concerns(
    targets: &ResourceDistributionTargets,
    old: Option<&NamespaceInfo>,
    new: Option<&NamespaceInfo>,
) -> bool {
    match (old, new) {
        (None, Some(created)) => namespace_targeted(targets, created),
        (Some(deleted), None) => targets.included_namespaces.contains(&deleted.name),
        (Some(old), Some(new)) => {
            (old.labels != new.labels
                && (selector_matches(targets, &old.labels)
                    || selector_matches(targets, &new.labels)))
                || (!old.terminating && new.terminating && namespace_targeted(targets, new))
        }
        (None, None) => false,
    }
}

/// What to do in one namespace.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Create this copy.
    Create(Value),
    /// Replace the copy with this one.
    Update(Value),
    /// Delete our copy from a namespace no longer targeted.
    Delete,
    /// The copy is as desired (or, untargeted, there is nothing of ours).
    Keep,
    /// A same-named object we do not own is there: never touched, reported.
    Conflict,
    /// A targeted namespace does not exist or is terminating: reported.
    NamespaceMissing,
}

impl Step {
    /// The condition a failure of this step is reported under; `None` when nothing can fail.
    pub fn failure_condition(&self) -> Option<ConditionType> {
        match self {
            Step::Create(_) => Some(ConditionType::CreateResourceFailed),
            Step::Update(_) => Some(ConditionType::UpdateResourceFailed),
            Step::Delete => Some(ConditionType::DeleteResourceFailed),
            Step::Keep | Step::Conflict | Step::NamespaceMissing => None,
        }
    }
}

/// One namespace's step.
#[derive(Clone, Debug, PartialEq)]
pub struct NamespaceStep {
    pub namespace: String,
    /// Whether the namespace is targeted (counts in `status.desired`).
    pub targeted: bool,
    pub step: Step,
}

/// Every namespace's step: the targeted ones first (sorted), then the untargeted ones that hold
/// a copy of ours. `existing` holds the same-named object of the resource's kind per namespace.
pub fn plan(
    rd: &Distributor<'_>,
    targets: &ResourceDistributionTargets,
    namespaces: &[NamespaceInfo],
    existing: &BTreeMap<String, Value>,
) -> Vec<NamespaceStep> {
    let t = targeted(targets, namespaces);
    let by_name: BTreeMap<&str, &NamespaceInfo> =
        namespaces.iter().map(|n| (n.name.as_str(), n)).collect();
    let mut out = Vec::with_capacity(t.matched.len());
    for ns in &t.matched {
        let step = match by_name.get(ns.as_str()) {
            None => Step::NamespaceMissing,
            Some(n) if n.terminating => Step::NamespaceMissing,
            Some(_) => match existing.get(ns) {
                None => Step::Create(desired_copy(rd, ns, None)),
                Some(old) if !controlled_by(old, rd.name) => Step::Conflict,
                Some(old) if needs_update(old, rd) => Step::Update(desired_copy(rd, ns, Some(old))),
                Some(_) => Step::Keep,
            },
        };
        out.push(NamespaceStep {
            namespace: ns.clone(),
            targeted: true,
            step,
        });
    }
    for ns in &t.unmatched {
        let terminating = by_name.get(ns.as_str()).is_none_or(|n| n.terminating);
        let ours = existing.get(ns).is_some_and(|o| controlled_by(o, rd.name));
        if ours && !terminating {
            out.push(NamespaceStep {
                namespace: ns.clone(),
                targeted: false,
                step: Step::Delete,
            });
        }
    }
    out
}

/// Upstream `isControlledByDistributor`: the object's controller reference is this
/// distribution (by apiVersion, kind and name, as upstream compares it).
pub fn controlled_by(obj: &Value, rd_name: &str) -> bool {
    owner_name(obj).is_some_and(|n| n == rd_name)
}

/// The name of the distribution controlling `obj`, if one does.
pub fn owner_name(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .filter(|o| {
            o.get("apiVersion").and_then(Value::as_str) == Some(keys::APPS_V1ALPHA1)
                && o.get("kind").and_then(Value::as_str) == Some(keys::RD_KIND)
        })
        .and_then(|o| o.get("name").and_then(Value::as_str))
}

/// Upstream `needToUpdate` (anything but `metadata` and `status` differs; the kind is the
/// resource's by construction), and also a changed
/// hash annotation, so that labels and annotations of the resource reach the copies too.
pub fn needs_update(old: &Value, rd: &Distributor<'_>) -> bool {
    let body = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .into_iter()
            .flatten()
            // A list's items carry no apiVersion and kind; the kind is the resource's anyway.
            .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let hash = old
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(keys::RD_RESOURCE_HASH_ANNOTATION))
        .and_then(Value::as_str);
    let want = string_data_as_data(body(rd.resource));
    let mut have = body(old);
    // The API server defaults a Secret's type to Opaque.
    if !want.contains_key("type") && have.get("type").and_then(Value::as_str) == Some("Opaque") {
        have.remove("type");
    }
    have != want || hash != Some(rd.hash)
}

/// A Secret's `stringData` as the API server stores it: base64 in `data` (a key in both takes
/// the `stringData` value). Without this, a distributed Secret written with `stringData` would
/// never compare equal to its copy and be rewritten forever.
fn string_data_as_data(mut body: Map<String, Value>) -> Map<String, Value> {
    use base64::Engine as _;
    let Some(Value::Object(strings)) = body.remove("stringData") else {
        return body;
    };
    let mut data = match body.remove("data") {
        Some(Value::Object(d)) => d,
        _ => Map::new(),
    };
    for (k, v) in strings {
        let text = v.as_str().unwrap_or_default().to_owned();
        let encoded = base64::engine::general_purpose::STANDARD.encode(text);
        data.insert(k, Value::String(encoded));
    }
    body.insert("data".into(), Value::Object(data));
    body
}

/// The owner reference every copy carries (upstream `NewControllerRef`): the API server's
/// garbage collector deletes the copies when the distribution is deleted.
pub fn owner_reference(rd: &Distributor<'_>) -> Value {
    json!({
        "apiVersion": keys::APPS_V1ALPHA1,
        "kind": keys::RD_KIND,
        "name": rd.name,
        "uid": rd.uid,
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// Upstream `makeResourceObject`: the resource in `namespace`, our owner reference added, the
/// hash and source annotations set; on update the old copy's labels, annotations and finalizers
/// the resource does not set are kept (upstream `mergeMetadata`), and its resourceVersion, so a
/// concurrent write conflicts instead of being lost.
pub fn desired_copy(rd: &Distributor<'_>, namespace: &str, old: Option<&Value>) -> Value {
    let mut copy = rd.resource.clone();
    let Some(obj) = copy.as_object_mut() else {
        return copy;
    };
    obj.remove("status");
    let meta = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Some(meta) = meta.as_object_mut() else {
        return copy;
    };
    // Only what a user may set on a new object; the rest belongs to the API server.
    meta.retain(|k, _| {
        matches!(
            k.as_str(),
            "name" | "labels" | "annotations" | "finalizers" | "ownerReferences"
        )
    });
    meta.insert("namespace".into(), json!(namespace));
    if let Some(old_meta) = old.and_then(|o| o.get("metadata")) {
        for field in ["labels", "annotations"] {
            let theirs = old_meta.get(field).and_then(Value::as_object);
            if theirs.is_none_or(Map::is_empty) {
                continue;
            }
            edit_map(meta, field, |ours| {
                for (k, v) in theirs.into_iter().flatten() {
                    ours.entry(k.clone()).or_insert_with(|| v.clone());
                }
            });
        }
        let mut finalizers: BTreeSet<String> = BTreeSet::new();
        for f in [meta.get("finalizers"), old_meta.get("finalizers")]
            .into_iter()
            .flatten()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(Value::as_str)
        {
            finalizers.insert(f.to_owned());
        }
        if !finalizers.is_empty() {
            meta.insert("finalizers".into(), json!(finalizers));
        }
        if let Some(rv) = old_meta.get("resourceVersion") {
            meta.insert("resourceVersion".into(), rv.clone());
        }
    }
    let owners = meta
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !owners.is_array() {
        *owners = Value::Array(Vec::new());
    }
    if let Some(list) = owners.as_array_mut() {
        let has = list
            .iter()
            .any(|o| o.get("uid").and_then(Value::as_str) == Some(rd.uid));
        if !has {
            list.push(owner_reference(rd));
        }
    }
    edit_map(meta, "annotations", |a| {
        a.insert(keys::RD_RESOURCE_HASH_ANNOTATION.into(), json!(rd.hash));
        a.insert(keys::RD_SOURCE_ANNOTATION.into(), json!(rd.name));
    });
    copy
}

/// Changes `meta[field]` as a map (created, or replaced when not an object).
fn edit_map(meta: &mut Map<String, Value>, field: &str, f: impl FnOnce(&mut Map<String, Value>)) {
    let mut m = match meta.remove(field) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    f(&mut m);
    meta.insert(field.to_owned(), Value::Object(m));
}
