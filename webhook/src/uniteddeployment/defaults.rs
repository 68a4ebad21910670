//! UnitedDeployment defaulting (`/mutate-apps-kruise-io-v1alpha1-uniteddeployment`), after
//! upstream's `SetDefaultsUnitedDeployment`: `revisionHistoryLimit` 10, the `Manual` update
//! strategy with an empty `manualUpdate`, the Pod and PVC defaults of a `statefulSetTemplate`
//! (only when the template is new or changed, as for the other workloads), and `minReplicas: 0`
//! on every subset when some subset sets a min or max and none sets `replicas`.

use kruise_api::apps::v1alpha1::UD_UPDATE_MANUAL;
use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::json::{default_field, default_string, get, obj_mut};
use crate::review::{Outcome, Request, patch_or_allow};
use crate::workload::defaults::{default_pod_spec, default_pvc, template_defaults_wanted};
use kruise_api::features::FeatureGates;

/// Admission entry point.
pub fn mutate(req: &Request, gates: &FeatureGates) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let Some(obj) = &req.object else {
        return Outcome::bad_request("UnitedDeployment request carries no object");
    };
    if !obj.is_object() || !matches!(get(obj, &["spec"]), None | Some(Value::Object(_))) {
        return Outcome::bad_request("UnitedDeployment must be an object with an object spec");
    }
    let inject_template = template_defaults_wanted(req, obj, gates);
    let mut after = obj.clone();
    default_united_deployment(&mut after, inject_template);
    patch_or_allow(obj, &after)
}

/// Defaults a UnitedDeployment in place; fields of the wrong type are left for the validation.
pub fn default_united_deployment(ud: &mut Value, inject_template: bool) {
    let Some(spec) = obj_mut(ud, &["spec"]) else {
        return;
    };
    default_field(spec, "revisionHistoryLimit", json!(10));
    if let Value::Object(us) = spec.entry("updateStrategy").or_insert_with(|| json!({})) {
        default_string(us, "type", UD_UPDATE_MANUAL);
        if us.get("type").and_then(Value::as_str) == Some(UD_UPDATE_MANUAL) {
            default_field(us, "manualUpdate", json!({}));
        }
    }
    if inject_template
        && let Some(Value::Object(sts)) = spec
            .get_mut("template")
            .and_then(|t| t.get_mut("statefulSetTemplate"))
            .and_then(|t| t.get_mut("spec"))
    {
        if let Some(Value::Object(pod)) = sts.get_mut("template").and_then(|t| t.get_mut("spec")) {
            default_pod_spec(pod);
        }
        if let Some(Value::Array(vcts)) = sts.get_mut("volumeClaimTemplates") {
            for v in vcts.iter_mut().filter_map(Value::as_object_mut) {
                default_pvc(v);
            }
        }
    }
    let Some(Value::Array(subsets)) = spec.get_mut("topology").and_then(|t| t.get_mut("subsets"))
    else {
        return;
    };
    let set = |s: &Value, k: &str| s.get(k).is_some_and(|v| !v.is_null());
    let has_replicas = subsets.iter().any(|s| set(s, "replicas"));
    let has_capacity = subsets
        .iter()
        .any(|s| set(s, "minReplicas") || set(s, "maxReplicas"));
    if has_capacity && !has_replicas {
        for s in subsets.iter_mut().filter_map(Value::as_object_mut) {
            default_field(s, "minReplicas", json!(0));
        }
    }
}
