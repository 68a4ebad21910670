//! AdvancedCronJob defaulting (upstream `SetDefaultsAdvancedCronJob`): the Pod template defaults
//! of a Job or BroadcastJob template when the template is new or changed, the ImageListPullJob
//! template's pull defaults, concurrencyPolicy (Replace for an ImageListPullJob template, else
//! Allow), paused false, history limits 3 successful and 1 failed.

use serde_json::{Value, json};

use crate::json::{default_field, default_string, get, obj_mut};
use crate::review::{Outcome, Request, creating_or_updating, patch_or_allow};
use crate::workload::defaults::{default_pod_spec, template_defaults_wanted};
use kruise_api::features::FeatureGates;

/// `successfulJobsHistoryLimit` when unset (upstream's).
pub const DEFAULT_SUCCESSFUL_HISTORY: i64 = 3;
/// `failedJobsHistoryLimit` when unset (upstream's).
pub const DEFAULT_FAILED_HISTORY: i64 = 1;

/// `/mutate-apps-kruise-io-advancedcronjob`.
pub fn mutate(req: &Request, gates: &FeatureGates) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let inject_template = template_defaults_wanted(req, obj, gates);
    let mut after = obj.clone();
    if !default_advancedcronjob(&mut after, inject_template) {
        return Outcome::bad_request(
            "AdvancedCronJob has a non-object where an object is expected \
             (spec, spec.template or one of its templates)",
        );
    }
    patch_or_allow(obj, &after)
}

/// Upstream's `SetDefaultsAdvancedCronJob`; `false` when a field that must be an object is not.
pub fn default_advancedcronjob(acj: &mut Value, inject_template: bool) -> bool {
    let has =
        |acj: &Value, key: &str| get(acj, &["spec", "template", key]).is_some_and(|v| !v.is_null());
    let (job, bcj, ilpj) = (
        has(acj, "jobTemplate"),
        has(acj, "broadcastJobTemplate"),
        has(acj, "imageListPullJobTemplate"),
    );
    if inject_template {
        for (set, key) in [(job, "jobTemplate"), (bcj, "broadcastJobTemplate")] {
            if set && !default_template_pod(acj, key) {
                return false;
            }
        }
    }
    if ilpj && !default_pull_template(acj) {
        return false;
    }
    let Some(spec) = obj_mut(acj, &["spec"]) else {
        return false;
    };
    default_string(
        spec,
        "concurrencyPolicy",
        if ilpj { "Replace" } else { "Allow" },
    );
    default_field(spec, "paused", json!(false));
    default_field(
        spec,
        "successfulJobsHistoryLimit",
        json!(DEFAULT_SUCCESSFUL_HISTORY),
    );
    default_field(
        spec,
        "failedJobsHistoryLimit",
        json!(DEFAULT_FAILED_HISTORY),
    );
    true
}

/// The Pod defaults in `spec.template.<key>.spec.template.spec`, when that is an object.
fn default_template_pod(acj: &mut Value, key: &str) -> bool {
    match get(acj, &["spec", "template", key, "spec", "template", "spec"]) {
        None | Some(Value::Null) => true,
        Some(Value::Object(_)) => {
            if let Some(ps) = obj_mut(acj, &["spec", "template", key, "spec", "template", "spec"]) {
                default_pod_spec(ps);
            }
            true
        }
        Some(_) => false,
    }
}

/// Upstream defaults the pull template only while its completionPolicy type is unset.
fn default_pull_template(acj: &mut Value) -> bool {
    const SPEC: [&str; 4] = ["spec", "template", "imageListPullJobTemplate", "spec"];
    let unset = get(acj, &SPEC)
        .and_then(|s| s.get("completionPolicy"))
        .and_then(|c| c.get("type"))
        .is_none_or(|t| t.is_null() || t == "");
    if !unset {
        return true;
    }
    let at = |key: &'static str| [SPEC[0], SPEC[1], SPEC[2], SPEC[3], key];
    let Some(cp) = obj_mut(acj, &at("completionPolicy")) else {
        return false;
    };
    cp.insert("type".to_owned(), json!("Always"));
    let Some(pp) = obj_mut(acj, &at("pullPolicy")) else {
        return false;
    };
    default_field(pp, "timeoutSeconds", json!(600));
    default_field(pp, "backoffLimit", json!(3));
    let Some(spec) = obj_mut(acj, &SPEC) else {
        return false;
    };
    default_string(spec, "imagePullPolicy", "IfNotPresent");
    true
}
