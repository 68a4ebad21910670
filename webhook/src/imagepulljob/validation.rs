//! ImagePullJob validation: the image, the shared pull template and upstream's deadline rule;
//! the pull secrets are immutable.

use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::field::FieldError;
use crate::image_reference::image_reference_problem;
use crate::json::get;
use crate::pull_template::{DEFAULT_PULL_TIMEOUT_SECONDS, template_errors};
use crate::review::{Outcome, Request, creating_or_updating, verdict};

/// `/validate-apps-kruise-io-imagepulljob`.
pub fn validate(req: &Request) -> Outcome {
    match creating_or_updating(req) {
        Ok(Some(o)) => {
            let mut errs = imagepulljob_errors(o);
            if req.operation == Operation::Update
                && let Some(old) = &req.old_object
            {
                errs.extend(imagepulljob_update_errors(o, old));
            }
            verdict(&errs)
        }
        Ok(None) => Outcome::Allow,
        Err(o) => o,
    }
}

/// Upstream refuses changing the pull secrets of a running job (the daemon's copies follow
/// the names the job was created with).
pub fn imagepulljob_update_errors(job: &Value, old: &Value) -> Vec<FieldError> {
    let secrets = |v: &Value| {
        get(v, &["spec", "pullSecrets"])
            .filter(|s| !s.is_null())
            .cloned()
            .unwrap_or_else(|| json!([]))
    };
    if secrets(job) == secrets(old) {
        Vec::new()
    } else {
        vec![FieldError::forbidden(
            "spec.pullSecrets",
            "field is immutable",
        )]
    }
}

/// Every problem of an ImagePullJob.
pub fn imagepulljob_errors(job: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let null = Value::Null;
    let spec = get(job, &["spec"]).unwrap_or(&null);
    match spec.get("image").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("spec.image", "image can not be empty")),
        Some(image) => {
            if let Some(rule) = image_reference_problem(image) {
                errs.push(FieldError::invalid("spec.image", &json!(image), rule));
            }
        }
    }
    errs.extend(template_errors(spec));
    // Upstream: under Always, the deadline must leave room for one pull (default 600 s).
    let deadline = get(spec, &["completionPolicy", "activeDeadlineSeconds"]);
    let always = get(spec, &["completionPolicy", "type"])
        .is_none_or(|t| t.is_null() || t.as_str() == Some("Always"));
    let timeout = match get(spec, &["pullPolicy", "timeoutSeconds"]) {
        None | Some(Value::Null) => Some(DEFAULT_PULL_TIMEOUT_SECONDS),
        Some(v) => v.as_i64(),
    };
    if always
        && let Some(d) = deadline
        && let (Some(dl), Some(t)) = (d.as_i64(), timeout)
        && dl >= 0
        && t > dl
    {
        errs.push(FieldError::invalid(
            "spec.completionPolicy.activeDeadlineSeconds",
            d,
            format!(
                "must be greater than or equal to spec.pullPolicy.timeoutSeconds ({t}, default {DEFAULT_PULL_TIMEOUT_SECONDS})"
            ),
        ));
    }
    errs
}
