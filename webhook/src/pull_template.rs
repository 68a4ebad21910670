//! The pull template ImagePullJob and ImageListPullJob share (upstream's `ImagePullJobTemplate`):
//! its defaults and its rules (selectors, parallelism, completion and pull policies, pull
//! secrets). NodeImage tags default their pull policy the same way.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::field::FieldError;
use crate::json::{default_field, default_string, get, obj_mut};
use kruise_api::selector::{self, Violation};

/// Upstream's per-tag pull timeout default, seconds.
pub const DEFAULT_PULL_TIMEOUT_SECONDS: i64 = 600;
/// Upstream's per-tag retry default.
pub const DEFAULT_BACKOFF_LIMIT: i64 = 3;

/// Defaults of the pull template ImagePullJob and ImageListPullJob share (upstream's
/// `SetDefaultsImageListPullJob` is exactly this); `false` when a field that must be an object
/// is not.
pub fn default_template(job: &mut Value) -> bool {
    let Some(cp) = obj_mut(job, &["spec", "completionPolicy"]) else {
        return false;
    };
    default_string(cp, "type", "Always");
    let Some(pp) = obj_mut(job, &["spec", "pullPolicy"]) else {
        return false;
    };
    default_field(pp, "timeoutSeconds", json!(DEFAULT_PULL_TIMEOUT_SECONDS));
    default_field(pp, "backoffLimit", json!(DEFAULT_BACKOFF_LIMIT));
    true
}

/// Upstream's rule for `parallelism`, an int-or-string that takes integers only.
fn parallelism_errors(p: &Value, errs: &mut Vec<FieldError>) {
    const PATH: &str = "spec.parallelism";
    let n = match p {
        Value::String(s) if s.ends_with('%') => {
            errs.push(FieldError::invalid(
                PATH,
                p,
                "parallelism does not support percentage value",
            ));
            return;
        }
        Value::String(s) => s.trim().parse::<i32>().ok().map(i64::from),
        Value::Number(n) => n.as_i64().filter(|i| i32::try_from(*i).is_ok()),
        _ => None,
    };
    match n {
        None => errs.push(FieldError::invalid(PATH, p, "must be a 32-bit integer")),
        Some(n) if n < 0 => errs.push(FieldError::invalid(
            PATH,
            p,
            "must be greater than or equal to 0",
        )),
        Some(_) => {}
    }
}

/// Every problem of the pull template (selectors, completion and pull policies) that
/// ImagePullJob and ImageListPullJob share; `spec` is the job's spec.
pub fn template_errors(spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let null = Value::Null;
    let set = |v: &Value, k: &str| v.get(k).is_some_and(|v| !v.is_null());
    let selector = spec.get("selector").filter(|s| !s.is_null());
    if let Some(sel) = selector {
        if set(sel, "names") && (set(sel, "matchLabels") || set(sel, "matchExpressions")) {
            errs.push(FieldError::forbidden(
                "spec.selector",
                "can not set both names and labelSelector in this spec.selector",
            ));
        }
        if let Some(names) = sel.get("names").and_then(Value::as_array) {
            let mut seen = BTreeSet::new();
            for (i, n) in names.iter().enumerate() {
                if !seen.insert(n.to_string()) {
                    errs.push(FieldError::invalid(
                        format!("spec.selector.names[{i}]"),
                        n,
                        "duplicated name in selector names",
                    ));
                }
            }
        }
        label_selector_errors(sel, "spec.selector", &mut errs);
    }
    if let Some(ps) = spec.get("podSelector").filter(|s| !s.is_null()) {
        if selector.is_some() {
            errs.push(FieldError::forbidden(
                "spec.podSelector",
                "can not set both selector and podSelector",
            ));
        }
        label_selector_errors(ps, "spec.podSelector", &mut errs);
    }
    let cp = spec.get("completionPolicy").unwrap_or(&null);
    let ty = cp.get("type").unwrap_or(&null);
    match ty.as_str() {
        // Defaulting sets Always; absent means the mutating webhook did not run (dry runs).
        _ if ty.is_null() => {}
        Some("Always") => {}
        Some("Never") => {
            if set(cp, "activeDeadlineSeconds") || set(cp, "ttlSecondsAfterFinished") {
                errs.push(FieldError::forbidden(
                    "spec.completionPolicy",
                    "activeDeadlineSeconds and ttlSecondsAfterFinished can only work with Always CompletionPolicyType",
                ));
            }
        }
        _ => errs.push(FieldError::not_supported(
            "spec.completionPolicy.type",
            ty,
            &["Always", "Never"],
        )),
    }
    for key in ["timeoutSeconds", "backoffLimit"] {
        if let Some(v) = get(spec, &["pullPolicy", key]).filter(|v| !v.is_null())
            && v.as_i64().is_none_or(|n| n < 0)
        {
            errs.push(FieldError::invalid(
                format!("spec.pullPolicy.{key}"),
                v,
                "must be a non-negative integer",
            ));
        }
    }
    // Not checked upstream; a negative count of seconds means nothing (Kubernetes refuses it
    // on a Job).
    for key in ["activeDeadlineSeconds", "ttlSecondsAfterFinished"] {
        if let Some(v) = cp.get(key).filter(|v| !v.is_null())
            && v.as_i64().is_none_or(|n| n < 0)
        {
            errs.push(FieldError::invalid(
                format!("spec.completionPolicy.{key}"),
                v,
                "must be a non-negative integer",
            ));
        }
    }
    if let Some(p) = spec.get("parallelism").filter(|v| !v.is_null()) {
        parallelism_errors(p, &mut errs);
    }
    match spec.get("pullSecrets") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            for (i, n) in names.iter().enumerate() {
                let path = format!("spec.pullSecrets[{i}]");
                match n.as_str() {
                    Some("") => errs.push(FieldError::required(path, "")),
                    Some(name) => {
                        if let Some(rule) = crate::field::dns_subdomain_problem(name) {
                            errs.push(FieldError::invalid(path, n, rule));
                        }
                    }
                    None => errs.push(FieldError::invalid(path, n, "must be a Secret name")),
                }
            }
        }
        Some(other) => errs.push(FieldError::invalid(
            "spec.pullSecrets",
            other,
            "must be a list of Secret names",
        )),
    }
    errs
}

/// The rules apimachinery's `LabelSelectorAsSelector` enforces on `matchExpressions` (see
/// `kruise_api::selector`), reported operator first, then key.
fn label_selector_errors(sel: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) else {
        return;
    };
    for (i, e) in exprs.iter().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = e
            .get("values")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let op = e.get("operator").unwrap_or(&Value::Null);
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let violations =
            selector::requirement_violations(key, op.as_str().unwrap_or_default(), values);
        for v in &violations {
            match v {
                Violation::ValuesRequired => errs.push(FieldError::required(
                    format!("{at}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                )),
                Violation::ValuesForbidden => errs.push(FieldError::forbidden(
                    format!("{at}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                )),
                Violation::InvalidOperator(_) => errs.push(FieldError::not_supported(
                    format!("{at}.operator"),
                    op,
                    &selector::Operator::NAMES,
                )),
                Violation::KeyRequired => {}
            }
        }
        if violations.contains(&Violation::KeyRequired) {
            errs.push(FieldError::required(format!("{at}.key"), ""));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::field::{FieldError, aggregate};
    use crate::imagelistpulljob::validation::imagelistpulljob_errors;
    use crate::imagepulljob::validation::imagepulljob_errors;

    fn job(spec: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
            "metadata": {"name": "j", "namespace": "ns"}, "spec": spec})
    }

    fn messages(errs: &[FieldError]) -> String {
        aggregate(errs)
    }

    #[test]
    fn template_rules_apply_to_both_kinds() {
        let cases = [
            (
                json!({"selector": {"names": ["n", "m", "n"]}}),
                "spec.selector.names[2]: Invalid value: \"n\": duplicated name in selector names",
            ),
            (
                json!({"selector": {"names": ["n"]}, "podSelector": {"matchLabels": {"a": "b"}}}),
                "spec.podSelector: Forbidden: can not set both selector and podSelector",
            ),
            (
                json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}),
                "spec.podSelector.matchExpressions[0].values: Required value",
            ),
            (
                json!({"selector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}),
                "spec.selector.matchExpressions[0].operator: Unsupported value: \"Is\"",
            ),
            (
                json!({"parallelism": -2}),
                "spec.parallelism: Invalid value: -2: must be greater than or equal to 0",
            ),
            (
                json!({"parallelism": "-2"}),
                "spec.parallelism: Invalid value: \"-2\": must be greater than or equal to 0",
            ),
            (
                json!({"parallelism": "50%"}),
                "spec.parallelism: Invalid value: \"50%\": parallelism does not support percentage value",
            ),
            (
                json!({"parallelism": "two"}),
                "spec.parallelism: Invalid value: \"two\": must be a 32-bit integer",
            ),
            (
                json!({"parallelism": 4294967296_i64}),
                "spec.parallelism: Invalid value: 4294967296: must be a 32-bit integer",
            ),
            (
                json!({"completionPolicy": {"ttlSecondsAfterFinished": -1}}),
                "spec.completionPolicy.ttlSecondsAfterFinished: Invalid value: -1: must be a non-negative integer",
            ),
            (
                json!({"completionPolicy": {"activeDeadlineSeconds": -5}}),
                "spec.completionPolicy.activeDeadlineSeconds: Invalid value: -5: must be a non-negative integer",
            ),
            (
                json!({"pullSecrets": ["Bad_Secret"]}),
                "spec.pullSecrets[0]: Invalid value: \"Bad_Secret\": a lowercase RFC 1123 subdomain",
            ),
            (
                json!({"pullSecrets": ["ok", ""]}),
                "spec.pullSecrets[1]: Required value",
            ),
            (
                json!({"pullSecrets": "ok"}),
                "spec.pullSecrets: Invalid value: \"ok\": must be a list of Secret names",
            ),
        ];
        for (template, want) in cases {
            let mut one = template.clone();
            one["image"] = json!("nginx:1");
            let got = messages(&imagepulljob_errors(&job(one)));
            assert!(got.contains(want), "ImagePullJob {template}: {got}");
            let mut list = template.clone();
            list["images"] = json!(["nginx:1"]);
            let got = messages(&imagelistpulljob_errors(&job(list)));
            assert!(got.contains(want), "ImageListPullJob {template}: {got}");
        }
    }
}
