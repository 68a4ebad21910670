//! EphemeralJob validation. The template's containers as upstream's `validateEphemeralContainers`
//! checks them (name a DNS-1123 label and unique, image set without surrounding whitespace,
//! `terminationMessagePolicy` and `imagePullPolicy` set and supported, the fields an ephemeral
//! container may not have, no `subPath`). Beyond upstream, what the controller reads is checked
//! here rather than failing at reconcile: a non-empty, valid `selector`; `replicas`,
//! `parallelism` and `ttlSecondsAfterFinished` not negative; `activeDeadlineSeconds` positive;
//! at least one container. Every message names the field and what to write instead.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::field::FieldError;
use crate::review::{Outcome, Request, creating_or_updating, verdict};
use crate::workload::selector::LabelSelector;

/// Fields of a Container an ephemeral container may not set (upstream's
/// `allowedEphemeralContainerFields` false entries, and the newer ones it does not list).
const FORBIDDEN: &[&str] = &[
    "ports",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "restartPolicyRules",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const MESSAGE_POLICIES: &[&str] = &["File", "FallbackToLogsOnError"];
const DNS_LABEL_RULE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
    characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
    '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// `/validate-apps-kruise-io-v1alpha1-ephemeraljob`.
pub fn validate(req: &Request) -> Outcome {
    match creating_or_updating(req) {
        Ok(Some(o)) => verdict(&ephemeraljob_errors(o)),
        Ok(None) => Outcome::Allow,
        Err(o) => o,
    }
}

/// Every problem of an EphemeralJob.
pub fn ephemeraljob_errors(job: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(spec) = job.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", "an EphemeralJob needs a spec"));
        return errs;
    };
    selector_errors(spec, &mut errs);
    let ints = [
        (
            "replicas",
            0,
            "the number of matched Pods to inject into, or unset for all",
        ),
        (
            "parallelism",
            0,
            "the most Pods with unfinished injected containers (1 when unset)",
        ),
        (
            "ttlSecondsAfterFinished",
            0,
            "seconds to keep the finished job (1800 when unset)",
        ),
        (
            "activeDeadlineSeconds",
            1,
            "seconds from the start after which the job fails",
        ),
    ];
    for (key, min, what) in ints {
        let Some(v) = spec.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let limit = if key == "activeDeadlineSeconds" {
            i64::MAX
        } else {
            i64::from(i32::MAX)
        };
        if v.as_i64().is_none_or(|n| n < min || n > limit) {
            let rule = if min == 0 {
                "greater than or equal to 0"
            } else {
                "greater than 0"
            };
            errs.push(FieldError::invalid(
                format!("spec.{key}"),
                v,
                format!("must be an integer {rule}: {what}"),
            ));
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

fn selector_errors(spec: &Value, errs: &mut Vec<FieldError>) {
    let Some(sel) = spec.get("selector").filter(|v| !v.is_null()) else {
        errs.push(FieldError::required(
            "spec.selector",
            "an EphemeralJob needs a selector naming the Pods to inject into",
        ));
        return;
    };
    match LabelSelector::parse(sel, "spec.selector") {
        Err(e) => errs.extend(e),
        Ok(s) if s.is_empty() => errs.push(FieldError::invalid(
            "spec.selector",
            sel,
            "empty selector is invalid for EphemeralJob: it would inject into every Pod of the \
             namespace; give matchLabels or matchExpressions",
        )),
        Ok(_) => {}
    }
}

fn template_errors(spec: &Value, errs: &mut Vec<FieldError>) {
    let path = "spec.template.ephemeralContainers";
    let cs = spec
        .get("template")
        .and_then(|t| t.get("ephemeralContainers"))
        .filter(|v| !v.is_null());
    let Some(cs) = cs else {
        errs.push(FieldError::required(
            path,
            "an EphemeralJob needs the containers it injects",
        ));
        return;
    };
    let Some(list) = cs.as_array() else {
        errs.push(FieldError::invalid(
            path,
            cs,
            "must be a list of ephemeral containers",
        ));
        return;
    };
    if list.is_empty() {
        errs.push(FieldError::required(
            path,
            "give at least one ephemeral container",
        ));
    }
    let mut names = BTreeSet::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if !c.is_object() {
            errs.push(FieldError::invalid(
                at,
                c,
                "must be an ephemeral container object",
            ));
            continue;
        }
        container_errors(c, &at, &mut names, errs);
    }
}

/// Upstream `validateContainerCommon`, `validateContainerOnlyForPod`, the allow-list and the
/// subPath rule, for one container.
fn container_errors(c: &Value, at: &str, names: &mut BTreeSet<String>, errs: &mut Vec<FieldError>) {
    match c.get("name").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required(format!("{at}.name"), "")),
        Some(n) if !is_dns_label(n) => {
            errs.push(FieldError::invalid(
                format!("{at}.name"),
                &c["name"],
                DNS_LABEL_RULE,
            ));
        }
        Some(n) if !names.insert(n.to_owned()) => errs.push(FieldError::invalid(
            format!("{at}.name"),
            &c["name"],
            "Duplicate value: ephemeral container names must be unique",
        )),
        Some(_) => {}
    }
    match c.get("image").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required(format!("{at}.image"), "")),
        Some(i) if i.trim() != i => errs.push(FieldError::invalid(
            format!("{at}.image"),
            &c["image"],
            "must not have leading or trailing whitespace",
        )),
        Some(_) => {}
    }
    for (key, allowed) in [
        ("terminationMessagePolicy", MESSAGE_POLICIES),
        ("imagePullPolicy", PULL_POLICIES),
    ] {
        match c.get(key) {
            None | Some(Value::Null) => errs.push(FieldError::required(format!("{at}.{key}"), "")),
            Some(v) if v.as_str().is_some_and(|s| allowed.contains(&s)) => {}
            Some(v) => errs.push(FieldError::not_supported(format!("{at}.{key}"), v, allowed)),
        }
    }
    for key in FORBIDDEN {
        if c.get(*key).is_some_and(|v| !is_unset(v)) {
            errs.push(FieldError::forbidden(
                format!("{at}.{key}"),
                "cannot be set for an Ephemeral Container",
            ));
        }
    }
    let mounts = c.get("volumeMounts").and_then(Value::as_array);
    for (j, m) in mounts.into_iter().flatten().enumerate() {
        for key in ["subPath", "subPathExpr"] {
            if m.get(key)
                .and_then(Value::as_str)
                .is_some_and(|s| !s.is_empty())
            {
                errs.push(FieldError::forbidden(
                    format!("{at}.volumeMounts[{j}].{key}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
    }
}

/// Null, an empty string, list or object: what Go's zero value looks like in JSON.
fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}
