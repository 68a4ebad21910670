//! `/validate-apps-kruise-io-v1alpha1-containerrecreaterequest`: the spec's rules on CREATE;
//! once admitted, the spec and the Pod labels are immutable.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::keys;
use kube::core::admission::Operation;
use serde_json::{Map, Value, json};

use super::admit::spec_errors;
use super::decode::{decode, object, reject};
use crate::review::{Outcome, Request};

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// Top-level spec fields that differ between two raw specs.
fn changed_spec_fields(old: &Value, new: &Value) -> Vec<String> {
    let empty = Map::new();
    let o = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let n = new.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    keys.into_iter()
        .filter(|k| o.get(*k) != n.get(*k))
        .cloned()
        .collect()
}

/// `/validate-apps-kruise-io-v1alpha1-containerrecreaterequest`: the spec's rules on CREATE;
/// on UPDATE, once admitted, the spec, the pod-uid and node-name labels and the unready-acquired
/// annotation can not change.
pub fn validate(req: &Request) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let raw = match object(req) {
        Ok(o) => o,
        Err(o) => return o,
    };
    let (crr, mut errs) = match decode(raw) {
        Ok(x) => x,
        Err(o) => return o,
    };
    if matches!(req.operation, Operation::Create) {
        errs.extend(spec_errors(&crr.spec));
        return if errs.is_empty() {
            Outcome::Allow
        } else {
            reject(errs)
        };
    }
    let Some(old_raw) = req.old_object.as_ref().filter(|o| o.is_object()) else {
        return Outcome::bad_request("UPDATE carries no oldObject");
    };
    let old_meta: ObjectMeta = match serde_json::from_value(
        old_raw
            .get("metadata")
            .cloned()
            .unwrap_or_else(|| json!({})),
    ) {
        Ok(m) => m,
        Err(e) => return Outcome::bad_request(format!("oldObject.metadata: {e}")),
    };
    // Only an admitted request is frozen: one created while the webhook was off gets its
    // labels and container contexts from the controller through an update.
    let admitted = label(&old_meta, keys::CRR_POD_UID_LABEL).is_some();
    let changed = changed_spec_fields(old_raw, raw);
    let mut msgs: Vec<String> = Vec::new();
    if !changed.is_empty() {
        if admitted {
            msgs.push(format!(
                "spec: Forbidden: spec of ContainerRecreateRequest is immutable (changed: {})",
                changed.join(", ")
            ));
        } else {
            errs.extend(spec_errors(&crr.spec));
        }
    }
    msgs.extend(errs.iter().map(ToString::to_string));
    for key in [keys::CRR_POD_UID_LABEL, keys::CRR_NODE_NAME_LABEL] {
        let (was, now) = (label(&old_meta, key), label(&crr.metadata, key));
        if was.is_some() && was != now {
            msgs.push(format!(
                "metadata.labels[{key}]: Forbidden: label is immutable (was {:?}, now {:?})",
                was.unwrap_or_default(),
                now.unwrap_or_default()
            ));
        }
    }
    // The v1alpha1 form of the PreRecreateGrace condition.
    let key = keys::CRR_UNREADY_ACQUIRED_FINALIZER;
    let (was, now) = (annotation(&old_meta, key), annotation(&crr.metadata, key));
    if was.is_some() && was != now {
        msgs.push(format!(
            "metadata.annotations[{key}]: Forbidden: annotation is immutable once set"
        ));
    }
    match msgs.as_slice() {
        [] => Outcome::Allow,
        [one] => Outcome::invalid(one.clone()),
        many => Outcome::invalid(format!("[{}]", many.join(", "))),
    }
}
