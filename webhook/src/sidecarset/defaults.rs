//! SidecarSet defaulting (`/mutate-apps-kruise-io-sidecarset`, upstream
//! `SetDefaultsSidecarSetV1beta1` then `SetHashSidecarSetV1beta1`): the sidecar containers'
//! own defaults, then the SidecarSet's hashes (over the defaulted containers) in its
//! annotations.

use kube::core::admission::Operation;
use serde_json::Value;

use super::validation::{decode, hash_annotations};
use crate::review::{Outcome, Request, diff};

/// SidecarSet defaulting: records the SidecarSet's hashes in its annotations.
pub fn mutate(req: &Request) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let Some(raw) = req.object.as_ref().filter(|o| o.is_object()) else {
        return Outcome::bad_request("SidecarSet request carries no object");
    };
    let mut after = raw.clone();
    default_sidecar_containers(&mut after);
    let set = match decode(&after) {
        Ok(s) => s,
        Err(e) => return Outcome::bad_request(e),
    };
    let hashes = match hash_annotations(&set.spec) {
        Ok(h) => h,
        Err(e) => return Outcome::bad_request(e),
    };
    let Some(meta) = after
        .as_object_mut()
        .map(|o| {
            o.entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()))
        })
        .and_then(Value::as_object_mut)
    else {
        return Outcome::bad_request("metadata: must be an object");
    };
    let ann = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    if ann.is_null() {
        *ann = Value::Object(Default::default());
    }
    let Some(ann) = ann.as_object_mut() else {
        return Outcome::bad_request("metadata.annotations: must be an object");
    };
    for (k, v) in hashes {
        ann.insert(k, Value::String(v));
    }
    let patch = diff(raw, &after);
    if patch.0.is_empty() {
        Outcome::Allow
    } else {
        Outcome::Patch(patch)
    }
}

/// Upstream `setDefaultSidecarContainerV1beta1`, for both lists: `podInjectPolicy` (init
/// containers `AfterAppContainer`, containers `BeforeAppContainer`),
/// `upgradeStrategy.upgradeType: ColdUpgrade`, `shareVolumePolicy.type: disabled`,
/// `resourcesPolicy.targetContainersNameRegex: .*`; and
/// `patchPodMetadata[].patchPolicy: Retain`. Written on
/// the raw object so fields we do not type survive; a value already set is kept.
fn default_sidecar_containers(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    // Upstream also defaults each patchPodMetadata entry's patchPolicy to Retain.
    if let Some(patches) = spec
        .get_mut("patchPodMetadata")
        .and_then(Value::as_array_mut)
    {
        for p in patches.iter_mut().filter_map(Value::as_object_mut) {
            set_if_empty(p, "patchPolicy", "Retain");
        }
    }
    for (list, policy) in [
        ("initContainers", "AfterAppContainer"),
        ("containers", "BeforeAppContainer"),
    ] {
        let Some(items) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in items.iter_mut().filter_map(Value::as_object_mut) {
            set_if_empty(c, "podInjectPolicy", policy);
            // Upstream's CRD defaults the regex when it is absent (an empty one stays, and
            // validation refuses it).
            if let Some(rp) = c.get_mut("resourcesPolicy").and_then(Value::as_object_mut)
                && rp
                    .get("targetContainersNameRegex")
                    .is_none_or(Value::is_null)
            {
                rp.insert(
                    "targetContainersNameRegex".to_owned(),
                    Value::String(".*".to_owned()),
                );
            }
            for (outer, inner, value) in [
                ("upgradeStrategy", "upgradeType", "ColdUpgrade"),
                ("shareVolumePolicy", "type", "disabled"),
            ] {
                let entry = c
                    .entry(outer)
                    .or_insert_with(|| Value::Object(Default::default()));
                if entry.is_null() {
                    *entry = Value::Object(Default::default());
                }
                if let Some(o) = entry.as_object_mut() {
                    set_if_empty(o, inner, value);
                }
            }
        }
    }
}

/// Sets `key` unless it holds a non-empty string already (Go's `== ""` test).
fn set_if_empty(o: &mut serde_json::Map<String, Value>, key: &str, value: &str) {
    let empty = match o.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if empty {
        o.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}
