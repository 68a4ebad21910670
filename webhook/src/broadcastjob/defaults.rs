//! BroadcastJob defaulting (upstream `SetDefaultsBroadcastJob`): completionPolicy Always,
//! parallelism unlimited (2^31-1), failurePolicy FailFast, and the Pod template defaults when
//! the template is new or changed.

use serde_json::{Value, json};

use crate::json::{default_field, default_string, get, obj_mut};
use crate::review::{Outcome, Request, creating_or_updating, patch_or_allow};
use crate::workload::defaults::{default_pod_spec, template_defaults_wanted};
use kruise_api::features::FeatureGates;

/// `parallelism` when unset: no limit (upstream writes `1<<31 - 1`).
pub const UNLIMITED_PARALLELISM: i64 = (1 << 31) - 1;

/// `/mutate-apps-kruise-io-broadcastjob`.
pub fn mutate(req: &Request, gates: &FeatureGates) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    // Template defaults only when the template is new or changed, as upstream.
    let inject_template = template_defaults_wanted(req, obj, gates);
    let mut after = obj.clone();
    if !default_broadcastjob(&mut after, inject_template) {
        return Outcome::bad_request(
            "BroadcastJob has a non-object where an object is expected \
             (spec, spec.completionPolicy, spec.failurePolicy or spec.template.spec)",
        );
    }
    patch_or_allow(obj, &after)
}

/// Upstream's `SetDefaultsBroadcastJob`; `false` when a field that must be an object is not.
pub fn default_broadcastjob(job: &mut Value, inject_template: bool) -> bool {
    let Some(spec) = obj_mut(job, &["spec"]) else {
        return false;
    };
    default_field(spec, "parallelism", json!(UNLIMITED_PARALLELISM));
    let Some(cp) = obj_mut(job, &["spec", "completionPolicy"]) else {
        return false;
    };
    default_string(cp, "type", "Always");
    let Some(fp) = obj_mut(job, &["spec", "failurePolicy"]) else {
        return false;
    };
    default_string(fp, "type", "FailFast");
    if inject_template {
        match get(job, &["spec", "template", "spec"]) {
            None | Some(Value::Null) => {}
            Some(Value::Object(_)) => {
                if let Some(ps) = obj_mut(job, &["spec", "template", "spec"]) {
                    default_pod_spec(ps);
                }
            }
            Some(_) => return false,
        }
    }
    true
}
