//! SidecarSet defaulting (`/mutate-apps-kruise-io-sidecarset`): the SidecarSet's hashes in
//! its annotations.

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
    let set = match decode(raw) {
        Ok(s) => s,
        Err(e) => return Outcome::bad_request(e),
    };
    let hashes = match hash_annotations(&set.spec) {
        Ok(h) => h,
        Err(e) => return Outcome::bad_request(e),
    };
    let mut after = raw.clone();
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
