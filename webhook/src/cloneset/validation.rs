//! CloneSet validation (`/validate-apps-kruise-io-cloneset`), after upstream's
//! `pkg/webhook/cloneset/validating`. Messages name the field, the value and the rule.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::field::FieldError;
use crate::field::dns_subdomain_problem;
use crate::json::get;
use crate::review::{Outcome, Request, verdict};
use crate::workload::selector::LabelSelector;
use crate::workload::validation::in_place_only_problem;

use super::strategy::{non_negative, validate_scale_strategy, validate_update_strategy};
use kruise_api::keys;

/// Admission entry point for the rules that need nothing but the request. The served handler,
/// [`super::template::validate`], adds the dry-run of the Pod template on top of these.
pub fn validate(req: &Request) -> Outcome {
    match field_errors(req) {
        Ok(errors) => verdict(&errors),
        Err(outcome) => outcome,
    }
}

/// The field errors of a CREATE or UPDATE; `Err` carries the outcome of a request that field
/// rules do not decide (a malformed request, a DELETE, a CONNECT).
pub fn field_errors(req: &Request) -> Result<Vec<FieldError>, Outcome> {
    let version = req.version.as_str();
    if version != keys::VERSION_V1ALPHA1 && version != keys::VERSION_V1BETA1 {
        return Err(Outcome::bad_request(format!(
            "unsupported CloneSet version {version:?}"
        )));
    }
    match req.operation {
        Operation::Create | Operation::Update => {
            let Some(obj) = &req.object else {
                return Err(Outcome::bad_request("CloneSet request carries no object"));
            };
            let old = match req.operation {
                Operation::Update => match &req.old_object {
                    Some(o) => Some(o),
                    None => {
                        return Err(Outcome::bad_request("CloneSet UPDATE carries no oldObject"));
                    }
                },
                _ => None,
            };
            Ok(validate_cloneset(obj, old, version))
        }
        // Deletion protection answers every DELETE on this path before the field rules
        // (`crate::deletionprotection`, which needs the feature gates).
        Operation::Delete => Err(Outcome::Allow),
        Operation::Connect => Err(Outcome::Allow),
    }
}

/// All errors for a CloneSet (`old` set on UPDATE).
pub fn validate_cloneset(obj: &Value, old: Option<&Value>, version: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_name(obj, &mut errs);
    let null = Value::Null;
    let spec = get(obj, &["spec"]).unwrap_or(&null);
    if !spec.is_object() {
        errs.push(FieldError::required("spec", ""));
        return errs;
    }
    let replicas = validate_replicas(spec, &mut errs);
    validate_selector_and_template(spec, &mut errs);
    validate_scale_strategy(spec, &mut errs);
    validate_update_strategy(spec, replicas, version, &mut errs);
    validate_seconds(spec, &mut errs);
    if let Some(old) = old {
        validate_update(obj, old, version, &mut errs);
    }
    errs
}

fn validate_name(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(name) = get(obj, &["metadata", "name"]).and_then(Value::as_str) else {
        return;
    };
    if name.is_empty() {
        return;
    }
    if let Some(rule) = dns_subdomain_problem(name) {
        errs.push(FieldError::invalid("metadata.name", &json!(name), rule));
    }
}

fn validate_replicas(spec: &Value, errs: &mut Vec<FieldError>) -> i64 {
    match spec.get("replicas") {
        // Defaulting sets 1; treat an absent value the same way.
        None | Some(Value::Null) => 1,
        Some(v) => match v.as_i64().filter(|r| i32::try_from(*r).is_ok()) {
            Some(r) if r < 0 => {
                errs.push(FieldError::invalid(
                    "spec.replicas",
                    v,
                    "must be greater than or equal to 0",
                ));
                0
            }
            Some(r) => r,
            None => {
                errs.push(FieldError::invalid(
                    "spec.replicas",
                    v,
                    "must be a 32-bit integer",
                ));
                0
            }
        },
    }
}

fn validate_selector_and_template(spec: &Value, errs: &mut Vec<FieldError>) {
    let selector = spec.get("selector").filter(|s| !s.is_null());
    let matcher = match selector {
        None => {
            errs.push(FieldError::required("spec.selector", ""));
            None
        }
        Some(sel) => match LabelSelector::parse(sel, "spec.selector") {
            Err(e) => {
                errs.extend(e);
                None
            }
            Ok(s) if s.is_empty() => {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    sel,
                    "empty selector is invalid for cloneset",
                ));
                None
            }
            Ok(s) => Some(s),
        },
    };
    let null = Value::Null;
    let labels_value = get(spec, &["template", "metadata", "labels"]).unwrap_or(&null);
    let labels: BTreeMap<String, String> = labels_value
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    if let Some(m) = matcher
        && !m.matches(&labels)
    {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            labels_value,
            "`selector` does not match template `labels`",
        ));
    }
    validate_pod_template(spec, errs);
}

fn validate_pod_template(spec: &Value, errs: &mut Vec<FieldError>) {
    let pod_spec = get(spec, &["template", "spec"]);
    let containers = pod_spec.and_then(|s| s.get("containers"));
    match containers.and_then(Value::as_array) {
        Some(cs) if !cs.is_empty() => {
            let mut seen = BTreeSet::new();
            for (i, c) in cs.iter().enumerate() {
                let path = format!("spec.template.spec.containers[{i}]");
                match c.get("name").and_then(Value::as_str) {
                    Some(n) if !n.is_empty() => {
                        if !seen.insert(n) {
                            errs.push(FieldError::invalid(
                                format!("{path}.name"),
                                &json!(n),
                                "Duplicate value",
                            ));
                        }
                    }
                    _ => errs.push(FieldError::required(format!("{path}.name"), "")),
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(|i| i.trim().is_empty())
                {
                    errs.push(FieldError::required(format!("{path}.image"), ""));
                }
            }
        }
        _ => errs.push(FieldError::required("spec.template.spec.containers", "")),
    }
    validate_volume_names(spec, pod_spec, errs);
    if let Some(rp) = pod_spec.and_then(|s| s.get("restartPolicy"))
        && !rp.is_null()
        && rp.as_str() != Some("")
        && rp.as_str() != Some("Always")
    {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            rp,
            &["Always"],
        ));
    }
    if pod_spec
        .and_then(|s| s.get("activeDeadlineSeconds"))
        .is_some_and(|v| !v.is_null())
    {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in cloneset is not Supported",
        ));
    }
}

/// Volume names must be unique, counting each volumeClaimTemplate as a volume (the controller
/// mounts a claim under the template's name), as upstream checks by mocking them into volumes.
fn validate_volume_names(spec: &Value, pod_spec: Option<&Value>, errs: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    let volumes = pod_spec
        .and_then(|s| s.get("volumes"))
        .and_then(Value::as_array);
    for (i, v) in volumes.into_iter().flatten().enumerate() {
        let path = format!("spec.template.spec.volumes[{i}].name");
        match v
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            None => errs.push(FieldError::required(path, "")),
            Some(n) if !seen.insert(n.to_owned()) => {
                errs.push(FieldError::invalid(path, &json!(n), "Duplicate value"));
            }
            Some(_) => {}
        }
    }
    let vcts = spec.get("volumeClaimTemplates").and_then(Value::as_array);
    for (i, pvc) in vcts.into_iter().flatten().enumerate() {
        let path = format!("spec.volumeClaimTemplates[{i}].metadata.name");
        match get(pvc, &["metadata", "name"])
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            None => errs.push(FieldError::required(path, "")),
            Some(n) if !seen.insert(n.to_owned()) => errs.push(FieldError::invalid(
                path,
                &json!(n),
                "Duplicate value: volumeClaimTemplates and template volumes share one namespace",
            )),
            Some(_) => {}
        }
    }
}

fn validate_seconds(spec: &Value, errs: &mut Vec<FieldError>) {
    // Not checked upstream (a negative limit there keeps no history at all); Kubernetes checks
    // the same field of a Deployment or StatefulSet this way.
    if let Some(r) = spec.get("revisionHistoryLimit").filter(|v| !v.is_null()) {
        non_negative(r, "spec.revisionHistoryLimit", errs);
    }
    let min_ready = spec.get("minReadySeconds").filter(|v| !v.is_null());
    if let Some(m) = min_ready {
        non_negative(m, "spec.minReadySeconds", errs);
    }
    if let Some(p) = spec.get("progressDeadlineSeconds").filter(|v| !v.is_null()) {
        non_negative(p, "spec.progressDeadlineSeconds", errs);
        let min = min_ready.and_then(Value::as_i64).unwrap_or(0);
        if let Some(pd) = p.as_i64()
            && pd != i64::from(i32::MAX)
            && pd >= 0
            && pd <= min
        {
            errs.push(FieldError::invalid(
                "spec.progressDeadlineSeconds",
                p,
                "must be greater than minReadySeconds",
            ));
        }
    }
}

/// Spec fields that may change after creation (everything else, i.e. the selector, may not).
const MUTABLE_SPEC_FIELDS: &[&str] = &[
    "replicas",
    "template",
    "scaleStrategy",
    "updateStrategy",
    "minReadySeconds",
    "lifecycle",
    "revisionHistoryLimit",
    "volumeClaimTemplates",
    "progressDeadlineSeconds",
];

fn validate_update(obj: &Value, old: &Value, version: &str, errs: &mut Vec<FieldError>) {
    let strip = |v: &Value| -> Value {
        let mut spec = get(v, &["spec"]).cloned().unwrap_or(Value::Null);
        if let Some(m) = spec.as_object_mut() {
            for k in MUTABLE_SPEC_FIELDS {
                m.remove(*k);
            }
        }
        spec
    };
    if strip(obj) != strip(old) {
        errs.push(FieldError::forbidden(
            "spec",
            "updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden",
        ));
    }
    let policy = if version == keys::VERSION_V1ALPHA1 {
        get(obj, &["spec", "updateStrategy", "type"])
    } else {
        get(
            obj,
            &["spec", "updateStrategy", "rollingUpdate", "podUpdatePolicy"],
        )
    };
    if policy.and_then(Value::as_str) == Some("InPlaceOnly") {
        let null = Value::Null;
        let old_spec = get(old, &["spec", "template", "spec"]).unwrap_or(&null);
        let new_spec = get(obj, &["spec", "template", "spec"]).unwrap_or(&null);
        if let Some(problem) = in_place_only_problem(old_spec, new_spec) {
            errs.push(FieldError::forbidden("spec", problem));
        }
    }
}
