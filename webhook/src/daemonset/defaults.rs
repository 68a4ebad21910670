//! Advanced DaemonSet defaulting (`/mutate-apps-kruise-io-daemonset`), after upstream's
//! `SetDefaultsDaemonSet`: RollingUpdate with partition 0, maxUnavailable 1, maxSurge 0 and
//! the Standard type; revisionHistoryLimit 10; burstReplicas 250; Pod template defaults.

use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::json::{default_field, default_string, get, obj_mut};
use crate::review::{Outcome, Request, diff};
use crate::workload::defaults::{default_pod_spec, template_defaults_due};
use kruise_api::keys::{self, DEFAULT_REVISION_HISTORY_LIMIT};

/// Pods created or deleted in one sync when `burstReplicas` is unset (upstream's default).
pub const DEFAULT_BURST_REPLICAS: i32 = 250;

/// Admission entry point.
pub fn mutate(req: &Request) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let version = req.version.as_str();
    if version != keys::VERSION_V1ALPHA1 && version != keys::VERSION_V1BETA1 {
        return Outcome::bad_request(format!("unsupported DaemonSet version {version:?}"));
    }
    let Some(obj) = &req.object else {
        return Outcome::bad_request("DaemonSet request carries no object");
    };
    if !obj.is_object() || !matches!(get(obj, &["spec"]), None | Some(Value::Object(_))) {
        return Outcome::bad_request("DaemonSet must be an object with an object spec");
    }
    // Template defaults only when the template is new or changed, so an unrelated update never
    // moves the revision (and so never rolls Pods) behind the user's back.
    let inject_template = template_defaults_due(req, obj);
    let mut after = obj.clone();
    if !default_daemonset(&mut after, inject_template) {
        return Outcome::bad_request(
            "DaemonSet has a field of the wrong type where an object is expected \
             (spec.updateStrategy, spec.updateStrategy.rollingUpdate or spec.template.spec)",
        );
    }
    Outcome::Patch(diff(obj, &after))
}

/// Defaults a DaemonSet (either version; they differ only in the partition's type, whose
/// default 0 reads the same in both) in place; `false` when a field that must be an object is
/// not.
pub fn default_daemonset(ds: &mut Value, inject_template: bool) -> bool {
    let Some(spec) = obj_mut(ds, &["spec"]) else {
        return false;
    };
    default_field(
        spec,
        "revisionHistoryLimit",
        json!(DEFAULT_REVISION_HISTORY_LIMIT),
    );
    default_field(spec, "burstReplicas", json!(DEFAULT_BURST_REPLICAS));
    let Some(us) = obj_mut(ds, &["spec", "updateStrategy"]) else {
        return false;
    };
    default_string(us, "type", "RollingUpdate");
    if us.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let Some(ru) = obj_mut(ds, &["spec", "updateStrategy", "rollingUpdate"]) else {
            return false;
        };
        default_string(ru, "rollingUpdateType", "Standard");
        default_field(ru, "partition", json!(0));
        default_field(ru, "maxUnavailable", json!(1));
        default_field(ru, "maxSurge", json!(0));
    }
    if inject_template {
        match get(ds, &["spec", "template", "spec"]) {
            None | Some(Value::Null) => {}
            Some(Value::Object(_)) => {
                if let Some(ps) = obj_mut(ds, &["spec", "template", "spec"]) {
                    default_pod_spec(ps);
                }
            }
            Some(_) => return false,
        }
    }
    true
}
