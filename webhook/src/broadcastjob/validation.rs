//! BroadcastJob validation (upstream `validateBroadcastJob`): the name (`^[a-zA-Z0-9-]+$`, at
//! most 63 characters), deadline and TTL only under completionPolicy Always, the Pod's
//! restartPolicy Never or OnFailure, the job's own Pod labels not preset, and the Pod template's
//! containers. Beyond upstream, the values the controller reads are checked here rather than
//! failing at reconcile: parallelism (an integer or percentage, not negative), the policy
//! types, restartLimit and the deadline and TTL not negative. Every message names the field.

use serde_json::{Value, json};

use crate::field::FieldError;
use crate::json::{IntOrPercent, get};
use crate::review::{Outcome, Request, creating_or_updating, verdict};
use kruise_api::keys;

/// Longest BroadcastJob name (the Pods' label value carries it).
const NAME_MAX_LEN: usize = 63;

/// `/validate-apps-kruise-io-broadcastjob`.
pub fn validate(req: &Request) -> Outcome {
    match creating_or_updating(req) {
        Ok(Some(o)) => verdict(&broadcastjob_errors(o)),
        Ok(None) => Outcome::Allow,
        Err(o) => o,
    }
}

/// Every problem of a BroadcastJob.
pub fn broadcastjob_errors(job: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(name) = get(job, &["metadata", "name"]).and_then(Value::as_str)
        && !name.is_empty()
    {
        name_errors(name, &mut errs);
    }
    let Some(spec) = get(job, &["spec"]).filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", "a BroadcastJob needs a spec"));
        return errs;
    };
    completion_errors(spec, &mut errs);
    failure_policy_errors(spec, &mut errs);
    if let Some(p) = spec.get("parallelism").filter(|v| !v.is_null()) {
        match IntOrPercent::parse(p) {
            Err(rule) => errs.push(FieldError::invalid("spec.parallelism", p, rule)),
            Ok(v) if v.out_of_range() => errs.push(FieldError::invalid(
                "spec.parallelism",
                p,
                "must be greater than or equal to 0 (a percentage at most 100%)",
            )),
            Ok(_) => {}
        }
    }
    if spec
        .get("paused")
        .is_some_and(|v| !v.is_null() && !v.is_boolean())
    {
        errs.push(FieldError::invalid(
            "spec.paused",
            &spec["paused"],
            "must be true or false",
        ));
    }
    template_errors(spec, &mut errs);
    errs
}

fn name_errors(name: &str, errs: &mut Vec<FieldError>) {
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        errs.push(FieldError::invalid(
            "metadata.name",
            &json!(name),
            "BroadcastJob name must consist of alphanumeric characters or '-' \
             (e.g. 'example-com', regex used for validation is '^[a-zA-Z0-9\\-]+$')",
        ));
    }
    if name.len() > NAME_MAX_LEN {
        errs.push(FieldError::invalid(
            "metadata.name",
            &json!(name),
            format!("must be no more than {NAME_MAX_LEN} characters"),
        ));
    }
}

fn completion_errors(spec: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let cp = spec.get("completionPolicy").unwrap_or(&null);
    if !cp.is_null() && !cp.is_object() {
        errs.push(FieldError::invalid(
            "spec.completionPolicy",
            cp,
            "must be an object",
        ));
        return;
    }
    let ty = cp.get("type").unwrap_or(&null);
    let never = match ty.as_str() {
        // Absent: the mutating webhook did not run (it defaults Always).
        _ if ty.is_null() => false,
        Some("" | "Always") => false,
        Some("Never") => true,
        _ => {
            errs.push(FieldError::not_supported(
                "spec.completionPolicy.type",
                ty,
                &["Always", "Never"],
            ));
            false
        }
    };
    for key in ["ttlSecondsAfterFinished", "activeDeadlineSeconds"] {
        let Some(v) = cp.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let path = format!("spec.completionPolicy.{key}");
        if never {
            errs.push(FieldError::invalid(
                path,
                v,
                format!("{key} can just work with Always CompletionPolicyType"),
            ));
        } else if v.as_i64().is_none_or(|n| n < 0) {
            errs.push(FieldError::invalid(
                path,
                v,
                "must be an integer greater than or equal to 0",
            ));
        }
    }
}

fn failure_policy_errors(spec: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let fp = spec.get("failurePolicy").unwrap_or(&null);
    if !fp.is_null() && !fp.is_object() {
        errs.push(FieldError::invalid(
            "spec.failurePolicy",
            fp,
            "must be an object",
        ));
        return;
    }
    let ty = fp.get("type").unwrap_or(&null);
    if !ty.is_null() && !matches!(ty.as_str(), Some("" | "Continue" | "FailFast" | "Pause")) {
        errs.push(FieldError::not_supported(
            "spec.failurePolicy.type",
            ty,
            &["Continue", "FailFast", "Pause"],
        ));
    }
    if let Some(v) = fp.get("restartLimit").filter(|v| !v.is_null())
        && v.as_i64()
            .is_none_or(|n| n < 0 || i32::try_from(n).is_err())
    {
        errs.push(FieldError::invalid(
            "spec.failurePolicy.restartLimit",
            v,
            "must be an integer greater than or equal to 0",
        ));
    }
}

fn template_errors(spec: &Value, errs: &mut Vec<FieldError>) {
    let Some(tpl) = spec.get("template").filter(|t| t.is_object()) else {
        errs.push(FieldError::required(
            "spec.template",
            "a BroadcastJob needs the Pod template it runs on each node",
        ));
        return;
    };
    if let Some(labels) = get(tpl, &["metadata", "labels"]).and_then(Value::as_object) {
        let preset = [
            keys::BROADCASTJOB_NAME_LABEL,
            keys::BROADCASTJOB_CONTROLLER_UID_LABEL,
        ]
        .iter()
        .any(|k| {
            labels
                .get(*k)
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty())
        });
        if preset {
            errs.push(FieldError::invalid(
                "spec.template.metadata.labels",
                &Value::Object(labels.clone()),
                format!(
                    "\"{}\" and \"{}\" are not allowed to preset in pod labels",
                    keys::BROADCASTJOB_NAME_LABEL,
                    keys::BROADCASTJOB_CONTROLLER_UID_LABEL
                ),
            ));
        }
    }
    let pod_spec = tpl.get("spec");
    let rp = pod_spec.and_then(|s| s.get("restartPolicy"));
    if !matches!(rp.and_then(Value::as_str), Some("Never" | "OnFailure")) {
        errs.push(FieldError::invalid(
            "spec.template.spec.restartPolicy",
            rp.unwrap_or(&Value::Null),
            "pod restartPolicy can only be Never or OnFailure",
        ));
    }
    match pod_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
    {
        Some(cs) if !cs.is_empty() => {
            let mut seen = std::collections::BTreeSet::new();
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
        _ => errs.push(FieldError::required(
            "spec.template.spec.containers",
            "a BroadcastJob template needs at least one container",
        )),
    }
}
