//! CloneSet defaulting (`/mutate-apps-kruise-io-cloneset`), after upstream's
//! `SetDefaultsCloneSet` (v1alpha1) and `SetDefaultsCloneSetV1beta1`.

use kube::core::admission::Operation;
use serde_json::{Map, Value, json};

use crate::json::{default_field, default_string, get, get_mut, obj_mut};
use crate::review::{Outcome, Request, diff};
use crate::workload::defaults::{default_pod_spec, default_pvc, template_defaults_wanted};
use kruise_api::features::FeatureGates;

use kruise_api::keys::{self, DEFAULT_CLONESET_MAX_UNAVAILABLE, DEFAULT_REVISION_HISTORY_LIMIT};

/// Admission entry point.
pub fn mutate(req: &Request, gates: &FeatureGates) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let Some(obj) = &req.object else {
        return Outcome::bad_request("CloneSet request carries no object");
    };
    if !obj.is_object() || !matches!(get(obj, &["spec"]), None | Some(Value::Object(_))) {
        return Outcome::bad_request("CloneSet must be an object with an object spec");
    }
    let inject_template = template_defaults_wanted(req, obj, gates);
    let mut after = obj.clone();
    let ok = match req.version.as_str() {
        keys::VERSION_V1BETA1 => default_v1beta1(&mut after, inject_template),
        keys::VERSION_V1ALPHA1 => default_v1alpha1(&mut after, inject_template),
        other => {
            return Outcome::bad_request(format!("unsupported CloneSet version {other:?}"));
        }
    };
    if !ok {
        return Outcome::bad_request(
            "CloneSet has a field of the wrong type where an object is expected",
        );
    }
    Outcome::Patch(diff(obj, &after))
}

/// Defaults a v1beta1 CloneSet in place; `false` when a field that must be an object is not.
pub fn default_v1beta1(cs: &mut Value, inject_template: bool) -> bool {
    if !default_common(cs, inject_template) {
        return false;
    }
    let Some(us) = obj_mut(cs, &["spec", "updateStrategy"]) else {
        return false;
    };
    default_string(us, "type", "RollingUpdate");
    if us.get("type").and_then(Value::as_str) != Some("RollingUpdate") {
        return true;
    }
    let Some(ru) = obj_mut(cs, &["spec", "updateStrategy", "rollingUpdate"]) else {
        return false;
    };
    default_string(ru, "podUpdatePolicy", "ReCreate");
    let in_place = matches!(
        ru.get("podUpdatePolicy").and_then(Value::as_str),
        Some("InPlaceIfPossible" | "InPlaceOnly")
    );
    if in_place {
        default_field(ru, "inPlaceUpdateStrategy", json!({}));
    }
    default_rolling_numbers(ru);
    true
}

/// Defaults a v1alpha1 CloneSet in place; `false` when a field that must be an object is not.
pub fn default_v1alpha1(cs: &mut Value, inject_template: bool) -> bool {
    if !default_common(cs, inject_template) {
        return false;
    }
    let Some(us) = obj_mut(cs, &["spec", "updateStrategy"]) else {
        return false;
    };
    default_string(us, "type", "ReCreate");
    if matches!(
        us.get("type").and_then(Value::as_str),
        Some("InPlaceIfPossible" | "InPlaceOnly")
    ) {
        default_field(us, "inPlaceUpdateStrategy", json!({}));
    }
    default_rolling_numbers(us);
    true
}

fn default_rolling_numbers(m: &mut Map<String, Value>) {
    default_field(m, "partition", json!(0));
    default_field(m, "maxUnavailable", json!(DEFAULT_CLONESET_MAX_UNAVAILABLE));
    default_field(m, "maxSurge", json!(0));
}

fn default_common(cs: &mut Value, inject_template: bool) -> bool {
    let Some(spec) = obj_mut(cs, &["spec"]) else {
        return false;
    };
    default_field(spec, "replicas", json!(1));
    default_field(
        spec,
        "revisionHistoryLimit",
        json!(DEFAULT_REVISION_HISTORY_LIMIT),
    );
    if inject_template {
        if let Some(Value::Object(pod_spec)) = get_mut(spec, &["template", "spec"]) {
            default_pod_spec(pod_spec);
        }
        if let Some(Value::Array(pvcs)) = spec.get_mut("volumeClaimTemplates") {
            for pvc in pvcs.iter_mut().filter_map(Value::as_object_mut) {
                default_pvc(pvc);
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Outcome;
    use crate::review::admit_review;
    use crate::review::tests::review_body;
    use crate::workload::defaults::pull_policy_for;

    fn beta() -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "cs", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "a"}},
                "template": {"metadata": {"labels": {"app": "a"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.25",
                        "ports": [{"containerPort": 80}],
                        "readinessProbe": {"httpGet": {"port": 80}}}]}}}})
    }

    #[test]
    fn v1beta1_defaults_match_upstream() {
        let mut cs = beta();
        assert!(default_v1beta1(&mut cs, true));
        let spec = &cs["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "ReCreate",
                "partition": 0, "maxUnavailable": "20%", "maxSurge": 0}})
        );
        let c = &spec["template"]["spec"]["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["readinessProbe"]["periodSeconds"], 10);
        assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTP");
        assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
        assert_eq!(spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    }

    #[test]
    fn v1beta1_in_place_gets_in_place_strategy_and_keeps_user_values() {
        let mut cs = beta();
        cs["spec"]["replicas"] = json!(5);
        cs["spec"]["updateStrategy"] = json!({"rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2}});
        assert!(default_v1beta1(&mut cs, false));
        assert_eq!(cs["spec"]["replicas"], 5);
        let ru = &cs["spec"]["updateStrategy"]["rollingUpdate"];
        assert_eq!(ru["inPlaceUpdateStrategy"], json!({}));
        assert_eq!(ru["maxUnavailable"], 2);
        // Template untouched when not asked to inject.
        assert!(
            cs["spec"]["template"]["spec"]["containers"][0]
                .get("imagePullPolicy")
                .is_none()
        );
    }

    #[test]
    fn v1beta1_on_delete_gets_no_rolling_update() {
        let mut cs = beta();
        cs["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        assert!(default_v1beta1(&mut cs, false));
        assert_eq!(cs["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    }

    #[test]
    fn v1alpha1_defaults_match_upstream() {
        let mut cs = beta();
        cs["apiVersion"] = json!("apps.kruise.io/v1alpha1");
        assert!(default_v1alpha1(&mut cs, true));
        assert_eq!(
            cs["spec"]["updateStrategy"],
            json!({"type": "ReCreate", "partition": 0, "maxUnavailable": "20%", "maxSurge": 0})
        );
    }

    #[test]
    fn pull_policy_rule() {
        assert_eq!(pull_policy_for("nginx"), "Always");
        assert_eq!(pull_policy_for("nginx:latest"), "Always");
        assert_eq!(pull_policy_for("nginx:1.2"), "IfNotPresent");
        assert_eq!(pull_policy_for("localhost:5000/nginx"), "Always");
        assert_eq!(pull_policy_for("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn update_without_template_change_leaves_template_alone() {
        let mut old = beta();
        assert!(default_v1beta1(&mut old, false));
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(3);
        let body = review_body(
            "UPDATE",
            ("apps.kruise.io", "v1beta1", "CloneSet"),
            "clonesets",
            Some(new.clone()),
            Some(old),
        );
        let review = admit_review(&body, |r| mutate(r, &FeatureGates::default()));
        let resp = review.response.expect("response");
        assert!(resp.allowed);
        assert!(resp.patch.is_none(), "nothing to default");
        let _ = Outcome::Allow;
    }

    #[test]
    fn non_object_spec_is_rejected_not_panicking() {
        let mut cs = beta();
        cs["spec"] = json!("nope");
        let body = review_body(
            "CREATE",
            ("apps.kruise.io", "v1beta1", "CloneSet"),
            "clonesets",
            Some(cs),
            None,
        );
        let resp = admit_review(&body, |r| mutate(r, &FeatureGates::default()))
            .response
            .expect("response");
        assert!(!resp.allowed);
    }
}
