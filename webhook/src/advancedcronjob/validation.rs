//! AdvancedCronJob validation (upstream `validateAdvancedCronJob` and
//! `validateAdvancedCronJobUpdate`): the name (`^[a-zA-Z0-9-]+$`, at most 63 characters), the
//! schedule as robfig/cron parses it, `timeZone` (non-empty, not `Local`, a known IANA zone; not
//! together with a `TZ=` in the schedule), non-negative deadline and history limits, exactly one
//! template and that template's rules (a Job's or BroadcastJob's Pod template; an
//! ImageListPullJob's images, selectors and pull policy, completionPolicy Always without TTL,
//! concurrencyPolicy Replace or Forbid), and on update only the schedule, the policies, the
//! limits, `paused`, `timeZone` and an existing ImageListPullJob template may change. Every
//! message names the field.

use std::collections::BTreeSet;

use kruise_api::apps::v1beta1::AdvancedCronJobSpec;
use kruise_api::cron;
use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::broadcastjob::validation::broadcastjob_errors;
use crate::field::FieldError;
use crate::imagelistpulljob::validation::imagelistpulljob_errors;
use crate::json::get;
use crate::review::{Outcome, Request, creating_or_updating, verdict};

/// Longest AdvancedCronJob name (upstream's).
const NAME_MAX_LEN: usize = 63;
/// Longest `activeDeadlineSeconds` of an ImageListPullJob template (upstream's one day).
const MAX_ACTIVE_DEADLINE_SECONDS: i64 = 3600 * 24;
const TEMPLATE_KEYS: [&str; 3] = [
    "jobTemplate",
    "broadcastJobTemplate",
    "imageListPullJobTemplate",
];

/// `/validate-apps-kruise-io-advancedcronjob`.
pub fn validate(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut errs = advancedcronjob_errors(obj);
    if matches!(req.operation, Operation::Update)
        && let Some(old) = &req.old_object
    {
        errs.extend(update_errors(old, obj));
    }
    verdict(&errs)
}

/// Every problem of an AdvancedCronJob.
pub fn advancedcronjob_errors(acj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(name) = get(acj, &["metadata", "name"]).and_then(Value::as_str)
        && !name.is_empty()
    {
        name_errors(name, &mut errs);
    }
    let Some(spec) = get(acj, &["spec"]).filter(|s| s.is_object()) else {
        errs.push(FieldError::required(
            "spec",
            "an AdvancedCronJob needs a spec",
        ));
        return errs;
    };
    schedule_errors(spec, &mut errs);
    template_errors(spec, &mut errs);
    for key in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        if let Some(v) = spec.get(key).filter(|v| !v.is_null())
            && v.as_i64().is_none_or(|n| n < 0)
        {
            errs.push(FieldError::invalid(
                format!("spec.{key}"),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
    if let Some(p) = spec.get("concurrencyPolicy").filter(|v| !v.is_null())
        && !matches!(p.as_str(), Some("Allow" | "Forbid" | "Replace"))
    {
        errs.push(FieldError::not_supported(
            "spec.concurrencyPolicy",
            p,
            &["Allow", "Forbid", "Replace"],
        ));
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
    errs
}

fn name_errors(name: &str, errs: &mut Vec<FieldError>) {
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        errs.push(FieldError::invalid(
            "metadata.name",
            &json!(name),
            "AdvancedCronJob name must consist of alphanumeric characters or '-' \
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

fn schedule_errors(spec: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let raw = spec.get("schedule").unwrap_or(&null);
    let Some(schedule) = raw.as_str() else {
        errs.push(FieldError::required(
            "spec.schedule",
            "schedule cannot be empty, please provide valid cron schedule.",
        ));
        return;
    };
    if schedule.is_empty() {
        errs.push(FieldError::invalid(
            "spec.schedule",
            raw,
            "schedule cannot be empty, please provide valid cron schedule.",
        ));
        return;
    }
    if let Err(e) = cron::parse_standard(schedule) {
        errs.push(FieldError::invalid("spec.schedule", raw, e.to_string()));
    }
    let tz = spec.get("timeZone").filter(|v| !v.is_null());
    if schedule.contains("TZ") && tz.is_some() {
        errs.push(FieldError::invalid(
            "spec.schedule",
            raw,
            "cannot use both timeZone field and TZ or CRON_TZ in schedule",
        ));
    }
    let Some(tz) = tz else {
        return;
    };
    let rule = match tz.as_str() {
        None => Some("must be a string".to_owned()),
        Some("") => Some("timeZone must be nil or non-empty string".to_owned()),
        Some(name) if name.eq_ignore_ascii_case("Local") => Some(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .to_owned(),
        ),
        Some(name) => cron::load_location(name).err().map(|e| e.to_string()),
    };
    if let Some(rule) = rule {
        errs.push(FieldError::invalid("spec.timeZone", tz, rule));
    }
}

fn template_errors(spec: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let tpl = spec.get("template").unwrap_or(&null);
    let set: Vec<&str> = TEMPLATE_KEYS
        .into_iter()
        .filter(|k| tpl.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    match set.len() {
        0 => errs.push(FieldError::forbidden(
            "spec.template",
            "spec must have one template, either JobTemplate or BroadcastJobTemplate or \
             ImageListPullJobTemplate should be provided",
        )),
        1 => {}
        _ => errs.push(FieldError::forbidden(
            "spec.template",
            format!(
                "spec can have only one template, either JobTemplate or BroadcastJobTemplate or \
                 ImageListPullJobTemplate should be provided (set: {})",
                set.join(", ")
            ),
        )),
    }
    if let Some(job) = tpl.get("jobTemplate").filter(|v| !v.is_null()) {
        job_template_errors(job, errs);
    }
    if let Some(bcj) = tpl.get("broadcastJobTemplate").filter(|v| !v.is_null()) {
        let spec = bcj.get("spec").cloned().unwrap_or(Value::Null);
        nested(
            broadcastjob_errors(&json!({ "spec": spec })),
            "spec.template.broadcastJobTemplate.",
            errs,
        );
    }
    if let Some(ilpj) = tpl.get("imageListPullJobTemplate").filter(|v| !v.is_null()) {
        pull_template_errors(spec, ilpj, errs);
    }
}

/// A template kind's own errors, their paths moved under the template.
fn nested(found: Vec<FieldError>, prefix: &str, errs: &mut Vec<FieldError>) {
    errs.extend(found.into_iter().map(|mut e| {
        e.path = format!("{prefix}{}", e.path);
        e
    }));
}

/// The Job's Pod template (upstream `ValidatePodTemplateSpec`, and the Job's restartPolicy rule
/// that the API server would apply only when the run creates the Job).
fn job_template_errors(job: &Value, errs: &mut Vec<FieldError>) {
    const BASE: &str = "spec.template.jobTemplate.spec.template";
    let Some(pod) = get(job, &["spec", "template", "spec"]).filter(|v| v.is_object()) else {
        errs.push(FieldError::required(
            format!("{BASE}.spec"),
            "a Job template needs the Pod it runs",
        ));
        return;
    };
    let rp = pod.get("restartPolicy");
    if !matches!(rp.and_then(Value::as_str), Some("Never" | "OnFailure")) {
        errs.push(FieldError::not_supported(
            format!("{BASE}.spec.restartPolicy"),
            rp.unwrap_or(&Value::Null),
            &["OnFailure", "Never"],
        ));
    }
    let Some(cs) = pod
        .get("containers")
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    else {
        errs.push(FieldError::required(
            format!("{BASE}.spec.containers"),
            "a Job template needs at least one container",
        ));
        return;
    };
    let mut seen = BTreeSet::new();
    for (i, c) in cs.iter().enumerate() {
        let path = format!("{BASE}.spec.containers[{i}]");
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

/// upstream `validateImageListPullJobTemplateSpec` and the concurrency rule that goes with it.
fn pull_template_errors(acj_spec: &Value, ilpj: &Value, errs: &mut Vec<FieldError>) {
    const BASE: &str = "spec.template.imageListPullJobTemplate.spec";
    let null = Value::Null;
    let policy = acj_spec.get("concurrencyPolicy").unwrap_or(&null);
    if !matches!(policy.as_str(), Some("Replace" | "Forbid")) {
        errs.push(FieldError::invalid(
            "spec.concurrencyPolicy",
            policy,
            format!(
                "concurrencyPolicy should be Replace or Forbid, but current value is: {}",
                policy.as_str().unwrap_or_default()
            ),
        ));
    }
    let spec = ilpj.get("spec").unwrap_or(&null);
    nested(
        imagelistpulljob_errors(&json!({ "spec": spec })),
        "spec.template.imageListPullJobTemplate.",
        errs,
    );
    let cp = spec.get("completionPolicy").unwrap_or(&null);
    let ty = cp.get("type").unwrap_or(&null);
    if ty.as_str() != Some("Always") {
        errs.push(FieldError::invalid(
            format!("{BASE}.completionPolicy.type"),
            ty,
            format!(
                "completionPolicy should be Always, but current value is: {}",
                ty.as_str().unwrap_or_default()
            ),
        ));
        return;
    }
    let deadline = cp.get("activeDeadlineSeconds").and_then(Value::as_i64);
    if let Some(d) = deadline {
        if d > MAX_ACTIVE_DEADLINE_SECONDS {
            errs.push(FieldError::invalid(
                format!("{BASE}.completionPolicy.activeDeadlineSeconds"),
                &json!(d),
                format!(
                    "activeDeadlineSeconds must be less than {MAX_ACTIVE_DEADLINE_SECONDS}, \
                     current value is: {d}"
                ),
            ));
        }
        if let Some(t) = get(spec, &["pullPolicy", "timeoutSeconds"]).and_then(Value::as_i64)
            && t > d
        {
            errs.push(FieldError::invalid(
                format!("{BASE}.completionPolicy.activeDeadlineSeconds"),
                &json!(d),
                format!(
                    "completionPolicy.activeDeadlineSeconds must be greater than \
                     pullPolicy.timeoutSeconds({t})"
                ),
            ));
        }
    }
    if let Some(ttl) = cp.get("ttlSecondsAfterFinished").filter(|v| !v.is_null()) {
        errs.push(FieldError::invalid(
            format!("{BASE}.completionPolicy.ttlSecondsAfterFinished"),
            ttl,
            "ttlSecondsAfterFinished is not supported in advancedCronJob",
        ));
    }
}

/// Fields an update may change (upstream `validateAdvancedCronJobUpdate`); the rest of the spec
/// must stay as it was, compared as typed values (as upstream's semantic equality does).
fn update_errors(old: &Value, new: &Value) -> Vec<FieldError> {
    let decode = |v: &Value| {
        get(v, &["spec"])
            .cloned()
            .and_then(|s| serde_json::from_value::<AdvancedCronJobSpec>(s).ok())
    };
    let (Some(old), Some(mut new)) = (decode(old), decode(new)) else {
        return Vec::new();
    };
    new.schedule.clone_from(&old.schedule);
    new.concurrency_policy = old.concurrency_policy;
    new.successful_jobs_history_limit = old.successful_jobs_history_limit;
    new.failed_jobs_history_limit = old.failed_jobs_history_limit;
    new.starting_deadline_seconds = old.starting_deadline_seconds;
    new.paused = old.paused;
    new.time_zone.clone_from(&old.time_zone);
    if old.template.image_list_pull_job_template.is_some() {
        new.template
            .image_list_pull_job_template
            .clone_from(&old.template.image_list_pull_job_template);
    }
    if new == old {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        "spec",
        "updates to advancedcronjob spec for fields other than 'imageListPullJobTemplate', \
         'schedule', 'concurrencyPolicy', 'successfulJobsHistoryLimit', \
         'failedJobsHistoryLimit', 'startingDeadlineSeconds', 'timeZone' and 'paused' are \
         forbidden",
    )]
}
