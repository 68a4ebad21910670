//! Advanced StatefulSet defaulting (`/mutate-apps-kruise-io-statefulset` and its per-version
//! aliases), after upstream's `SetDefaultsStatefulSet` (v1beta1 and v1alpha1): replicas 1,
//! podManagementPolicy OrderedReady, RollingUpdate with partition 0, maxUnavailable 1,
//! podUpdatePolicy ReCreate and minReadySeconds 0, revisionHistoryLimit 10, the PVC retention
//! policy Retain/Retain (v1beta1 only, v1alpha1 has no such field), volumeClaimUpdateStrategy
//! OnDelete (v1beta1 under `StatefulSetAutoResizePVCGate`), and the Pod template and
//! volumeClaimTemplate defaults CloneSet applies.

use kruise_api::features::{FeatureGates, Gate};
use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::json::{default_field, default_string, get, obj_mut};
use crate::review::{Outcome, Request, diff};
use crate::workload::defaults::{default_pod_spec, default_pvc};
use kruise_api::keys::{self, DEFAULT_REVISION_HISTORY_LIMIT};

/// Admission entry point.
pub fn mutate(req: &Request, gates: &FeatureGates) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let with_retention = match req.version.as_str() {
        keys::VERSION_V1BETA1 => true,
        keys::VERSION_V1ALPHA1 => false,
        other => {
            return Outcome::bad_request(format!("unsupported StatefulSet version {other:?}"));
        }
    };
    let Some(obj) = &req.object else {
        return Outcome::bad_request("StatefulSet request carries no object");
    };
    if !obj.is_object() || !matches!(get(obj, &["spec"]), None | Some(Value::Object(_))) {
        return Outcome::bad_request("StatefulSet must be an object with an object spec");
    }
    // Template defaults only when the template (or the claim templates) is new or changed, so
    // that an unrelated update never moves the revision and so never rolls Pods.
    // Never while `TemplateNoDefaults` is on, as upstream.
    let inject_template = match req.operation {
        _ if gates.enabled(Gate::TemplateNoDefaults) => false,
        Operation::Update => {
            let old = req.old_object.as_ref();
            let changed = |path: &[&str]| old.and_then(|o| get(o, path)) != get(obj, path);
            changed(&["spec", "template"]) || changed(&["spec", "volumeClaimTemplates"])
        }
        _ => true,
    };
    let mut after = obj.clone();
    if let Err(field) = default_statefulset(&mut after, inject_template, with_retention) {
        return Outcome::bad_request(format!(
            "StatefulSet field {field} must be an object; set it to an object or remove it"
        ));
    }
    // v1beta1 only (v1alpha1 has no such field), and only under the gate, as upstream.
    if with_retention && gates.enabled(Gate::StatefulSetAutoResizePVCGate) {
        match obj_mut(&mut after, &["spec", "volumeClaimUpdateStrategy"]) {
            Some(vcus) => {
                default_string(vcus, "type", "OnDelete");
            }
            None => {
                return Outcome::bad_request(
                    "StatefulSet field spec.volumeClaimUpdateStrategy must be an object; set it to an object or remove it",
                );
            }
        }
    }
    Outcome::Patch(diff(obj, &after))
}

/// Defaults a StatefulSet in place (upstream `SetDefaultsStatefulSet`); `with_retention` adds
/// the v1beta1-only PVC retention policy. Errors with the path of a field that must be an
/// object and is not.
pub fn default_statefulset(
    sts: &mut Value,
    inject_template: bool,
    with_retention: bool,
) -> Result<(), &'static str> {
    let spec = obj_mut(sts, &["spec"]).ok_or("spec")?;
    default_field(spec, "replicas", json!(1));
    default_string(spec, "podManagementPolicy", "OrderedReady");
    default_field(
        spec,
        "revisionHistoryLimit",
        json!(DEFAULT_REVISION_HISTORY_LIMIT),
    );

    let us = obj_mut(sts, &["spec", "updateStrategy"]).ok_or("spec.updateStrategy")?;
    default_string(us, "type", "RollingUpdate");
    if us.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let ru = obj_mut(sts, &["spec", "updateStrategy", "rollingUpdate"])
            .ok_or("spec.updateStrategy.rollingUpdate")?;
        default_field(ru, "partition", json!(0));
        default_field(ru, "maxUnavailable", json!(1));
        default_string(ru, "podUpdatePolicy", "ReCreate");
        default_field(ru, "minReadySeconds", json!(0));
    }

    if with_retention {
        let policy = obj_mut(sts, &["spec", "persistentVolumeClaimRetentionPolicy"])
            .ok_or("spec.persistentVolumeClaimRetentionPolicy")?;
        default_string(policy, "whenDeleted", "Retain");
        default_string(policy, "whenScaled", "Retain");
    }

    if inject_template {
        match get(sts, &["spec", "template", "spec"]) {
            None | Some(Value::Null) => {}
            Some(Value::Object(_)) => {
                if let Some(ps) = obj_mut(sts, &["spec", "template", "spec"]) {
                    default_pod_spec(ps);
                }
            }
            Some(_) => return Err("spec.template.spec"),
        }
        if let Some(Value::Array(pvcs)) = obj_mut(sts, &["spec"])
            .ok_or("spec")?
            .get_mut("volumeClaimTemplates")
        {
            for pvc in pvcs.iter_mut().filter_map(Value::as_object_mut) {
                default_pvc(pvc);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::review::admit;
    use crate::review::tests::{response, review_body};

    fn minimal(version: &str) -> Value {
        json!({"apiVersion": format!("apps.kruise.io/{version}"), "kind": "StatefulSet",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "serviceName": "web",
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}]}})
    }

    /// The object after the webhook's patch.
    fn mutated(op: &str, version: &str, obj: Value, old: Option<Value>) -> Value {
        let body = review_body(
            op,
            ("apps.kruise.io", version, "StatefulSet"),
            "statefulsets",
            Some(obj.clone()),
            old,
        );
        let r = response(&admit(&body, |r| mutate(r, &FeatureGates::default())));
        assert_eq!(r["allowed"], true, "{r}");
        let Some(patch) = r["patch"].as_array() else {
            return obj;
        };
        // kube-core encodes the patch bytes as a JSON array of numbers.
        let bytes: Vec<u8> = patch
            .iter()
            .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch");
        let mut out = obj;
        json_patch::patch(&mut out, &patch).expect("apply");
        out
    }

    #[test]
    fn a_minimal_v1beta1_set_reads_back_with_upstream_defaults() {
        let out = mutated("CREATE", "v1beta1", minimal("v1beta1"), None);
        let spec = &out["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["podManagementPolicy"], "OrderedReady");
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0,
                "maxUnavailable": 1, "podUpdatePolicy": "ReCreate", "minReadySeconds": 0}})
        );
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Always");
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert_eq!(
            spec["volumeClaimTemplates"][0]["spec"]["volumeMode"],
            "Filesystem"
        );
    }

    #[test]
    fn the_resize_gate_defaults_the_claim_update_strategy_of_v1beta1_only() {
        let gates = FeatureGates::parse("StatefulSetAutoResizePVCGate=true").expect("gates");
        let run = |version: &str, gates: &FeatureGates| {
            let body = review_body(
                "CREATE",
                ("apps.kruise.io", version, "StatefulSet"),
                "statefulsets",
                Some(minimal(version)),
                None,
            );
            let r = response(&admit(&body, |r| mutate(r, gates)));
            let bytes: Vec<u8> = r["patch"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect();
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch");
            let mut out = minimal(version);
            json_patch::patch(&mut out, &patch).expect("apply");
            out["spec"]["volumeClaimUpdateStrategy"].clone()
        };
        assert_eq!(run("v1beta1", &gates), json!({"type": "OnDelete"}));
        assert_eq!(run("v1alpha1", &gates), Value::Null);
        assert_eq!(run("v1beta1", &FeatureGates::default()), Value::Null);
    }

    #[test]
    fn v1alpha1_gets_no_retention_policy() {
        let out = mutated("CREATE", "v1alpha1", minimal("v1alpha1"), None);
        assert!(
            out["spec"]
                .get("persistentVolumeClaimRetentionPolicy")
                .is_none()
        );
        assert_eq!(out["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            out["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
            0
        );
    }

    #[test]
    fn set_values_are_kept() {
        let mut obj = minimal("v1beta1");
        obj["spec"]["replicas"] = json!(0);
        obj["spec"]["podManagementPolicy"] = json!("Parallel");
        obj["spec"]["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {
            "partition": 2, "maxUnavailable": "50%", "podUpdatePolicy": "InPlaceIfPossible"}});
        obj["spec"]["persistentVolumeClaimRetentionPolicy"] = json!({"whenScaled": "Delete"});
        let out = mutated("CREATE", "v1beta1", obj, None);
        let spec = &out["spec"];
        assert_eq!(spec["replicas"], 0);
        assert_eq!(spec["podManagementPolicy"], "Parallel");
        let ru = &spec["updateStrategy"]["rollingUpdate"];
        assert_eq!(ru["partition"], 2);
        assert_eq!(ru["maxUnavailable"], "50%");
        assert_eq!(ru["podUpdatePolicy"], "InPlaceIfPossible");
        assert_eq!(
            spec["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Delete"})
        );
    }

    #[test]
    fn on_delete_gets_no_rolling_update() {
        let mut obj = minimal("v1beta1");
        obj["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        let out = mutated("CREATE", "v1beta1", obj, None);
        assert_eq!(out["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    }

    #[test]
    fn an_update_that_leaves_the_template_alone_does_not_default_it() {
        let old = minimal("v1beta1");
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(3);
        let out = mutated("UPDATE", "v1beta1", new, Some(old));
        assert!(
            out["spec"]["template"]["spec"]
                .get("restartPolicy")
                .is_none(),
            "template untouched: {}",
            out["spec"]["template"]
        );
        assert_eq!(out["spec"]["podManagementPolicy"], "OrderedReady");
    }

    #[test]
    fn a_wrongly_typed_strategy_is_refused_naming_the_field() {
        let mut obj = minimal("v1beta1");
        obj["spec"]["updateStrategy"] = json!({"type": "RollingUpdate", "rollingUpdate": 3});
        let body = review_body(
            "CREATE",
            ("apps.kruise.io", "v1beta1", "StatefulSet"),
            "statefulsets",
            Some(obj),
            None,
        );
        let r = response(&admit(&body, |r| mutate(r, &FeatureGates::default())));
        assert_eq!(r["allowed"], false);
        assert!(
            r["status"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("spec.updateStrategy.rollingUpdate")),
            "{r}"
        );
    }
}
