//! ImagePullJob, ImageListPullJob and NodeImage admission (defaulting and validation), after
//! upstream's `pkg/webhook/{imagepulljob,imagelistpulljob,nodeimage}`. Both versions share one
//! shape, so one handler serves v1alpha1 and v1beta1. Raw JSON for the same reason as the CloneSet handlers:
//! a wrongly typed field is reported by path instead of failing to decode.

use std::collections::BTreeSet;

use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::cloneset::{default_field, default_string, get, obj_mut};
use crate::field::{FieldError, aggregate};
use crate::review::{Outcome, Request, diff};
use kruise_api::selector::{self, Violation};

/// Upstream's per-tag pull timeout default, seconds.
const DEFAULT_PULL_TIMEOUT_SECONDS: i64 = 600;
/// Upstream's per-tag retry default.
const DEFAULT_BACKOFF_LIMIT: i64 = 3;
/// Upstream caps the images one node may be asked to hold.
const MAX_IMAGES_PER_NODE: usize = 256;
/// Upstream caps the images of one ImageListPullJob.
const MAX_IMAGES_PER_LIST: usize = 255;

fn creating_or_updating(req: &Request) -> Result<Option<&Value>, Outcome> {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(None);
    }
    match &req.object {
        Some(o) if o.is_object() => Ok(Some(o)),
        Some(_) => Err(Outcome::bad_request("object must be a JSON object")),
        None => Err(Outcome::bad_request("request carries no object")),
    }
}

fn patch_or_allow(before: &Value, after: &Value) -> Outcome {
    if before == after {
        Outcome::Allow
    } else {
        Outcome::Patch(diff(before, after))
    }
}

fn verdict(errs: &[FieldError]) -> Outcome {
    if errs.is_empty() {
        Outcome::Allow
    } else {
        Outcome::invalid(aggregate(errs))
    }
}

// ---------------------------------------------------------------------------------------------
// ImagePullJob
// ---------------------------------------------------------------------------------------------

/// `/mutate-apps-kruise-io-imagepulljob`.
pub fn mutate_imagepulljob(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut after = obj.clone();
    if !default_imagepulljob(&mut after) {
        return Outcome::bad_request("ImagePullJob has a non-object where an object is expected");
    }
    patch_or_allow(obj, &after)
}

/// Upstream's `SetDefaultsImagePullJob`; `false` when a field that must be an object is not.
pub fn default_imagepulljob(job: &mut Value) -> bool {
    if !default_template(job) {
        return false;
    }
    let Some(spec) = obj_mut(job, &["spec"]) else {
        return false;
    };
    default_string(spec, "imagePullPolicy", "IfNotPresent");
    true
}

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

/// `/validate-apps-kruise-io-imagepulljob`.
pub fn validate_imagepulljob(req: &Request) -> Outcome {
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
                        if let Some(rule) = crate::cloneset::validation::dns_subdomain_problem(name)
                        {
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

// ---------------------------------------------------------------------------------------------
// ImageListPullJob
// ---------------------------------------------------------------------------------------------

/// `/mutate-apps-kruise-io-v1alpha1-imagelistpulljob`.
pub fn mutate_imagelistpulljob(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut after = obj.clone();
    if !default_template(&mut after) {
        return Outcome::bad_request(
            "ImageListPullJob has a non-object where an object is expected",
        );
    }
    patch_or_allow(obj, &after)
}

/// `/validate-apps-kruise-io-v1alpha1-imagelistpulljob`.
pub fn validate_imagelistpulljob(req: &Request) -> Outcome {
    match creating_or_updating(req) {
        Ok(Some(o)) => verdict(&imagelistpulljob_errors(o)),
        Ok(None) => Outcome::Allow,
        Err(o) => o,
    }
}

/// Every problem of an ImageListPullJob: its images, then the template's.
pub fn imagelistpulljob_errors(job: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let null = Value::Null;
    let spec = get(job, &["spec"]).unwrap_or(&null);
    match spec.get("images") {
        None | Some(Value::Null) => {
            errs.push(FieldError::required(
                "spec.images",
                "images can not be empty",
            ));
        }
        Some(Value::Array(images)) => {
            if images.is_empty() {
                errs.push(FieldError::required(
                    "spec.images",
                    "images can not be empty",
                ));
            }
            if images.len() > MAX_IMAGES_PER_LIST {
                errs.push(FieldError::invalid(
                    "spec.images",
                    &json!(images.len()),
                    format!("the number of images can not be more than {MAX_IMAGES_PER_LIST}"),
                ));
            }
            let mut first_at = std::collections::BTreeMap::new();
            for (i, image) in images.iter().enumerate() {
                let path = format!("spec.images[{i}]");
                let Some(name) = image.as_str() else {
                    errs.push(FieldError::invalid(path, image, "must be a string"));
                    continue;
                };
                if name.is_empty() {
                    errs.push(FieldError::required(path, "image can not be empty"));
                    continue;
                }
                if let Some(first) = first_at.get(name) {
                    errs.push(FieldError::invalid(
                        path,
                        image,
                        format!(
                            "images cannot have duplicate values (same as spec.images[{first}])"
                        ),
                    ));
                    continue;
                }
                first_at.insert(name, i);
                if let Some(rule) = image_reference_problem(name) {
                    errs.push(FieldError::invalid(path, image, rule));
                }
            }
        }
        Some(other) => errs.push(FieldError::invalid(
            "spec.images",
            other,
            "must be a list of images",
        )),
    }
    errs.extend(template_errors(spec));
    errs
}

/// Why `image` is not a pullable reference (`[registry/]repo[:tag][@digest]`), if it is not.
/// Looser than the daemon's full parser; catches what a person would mistype.
pub fn image_reference_problem(image: &str) -> Option<&'static str> {
    if image.chars().any(char::is_whitespace) {
        return Some("invalid reference format: must not contain whitespace");
    }
    let (name, digest) = match image.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let valid = d.split_once(':').is_some_and(|(alg, hex)| {
            !alg.is_empty() && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit())
        });
        if !valid {
            return Some("invalid reference format: bad digest");
        }
    }
    // A ':' after the last '/' starts the tag; before it, it is a registry port.
    let last_slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[last_slash..].rfind(':') {
        Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
        None => (name, None),
    };
    if let Some(t) = tag {
        let ok = !t.is_empty()
            && t.len() <= 128
            && t.bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !ok {
            return Some("invalid reference format: bad tag");
        }
    }
    if repo.is_empty() || repo.split('/').any(str::is_empty) {
        return Some("invalid reference format: empty path component");
    }
    // The first component may be a registry host (with dots, a port, capitals); the rest is
    // repository path, which must be lowercase.
    let mut parts: Vec<&str> = repo.split('/').collect();
    let first_is_host = parts.len() > 1
        && (parts[0].contains('.') || parts[0].contains(':') || parts[0] == "localhost");
    if first_is_host {
        parts.remove(0);
    }
    let path_ok = parts.iter().all(|p| {
        p.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        }) && p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
    });
    if !path_ok {
        return Some("invalid reference format: repository name must be lowercase");
    }
    None
}

// ---------------------------------------------------------------------------------------------
// NodeImage
// ---------------------------------------------------------------------------------------------

/// `/mutate-apps-kruise-io-nodeimage`: `now` is the creation time given to tags without one.
pub fn mutate_nodeimage(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut after = obj.clone();
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    default_nodeimage(&mut after, &now);
    patch_or_allow(obj, &after)
}

/// Upstream's `SetDefaultsNodeImage`: every tag gets a creation time and a pull policy.
pub fn default_nodeimage(ni: &mut Value, now: &str) {
    let Some(images) = ni
        .get_mut("spec")
        .and_then(|s| s.get_mut("images"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    for image in images.values_mut() {
        let Some(tags) = image.get_mut("tags").and_then(Value::as_array_mut) else {
            continue;
        };
        for tag in tags.iter_mut().filter_map(Value::as_object_mut) {
            default_field(tag, "createdAt", json!(now));
            default_field(tag, "pullPolicy", json!({}));
            if let Some(pp) = tag.get_mut("pullPolicy").and_then(Value::as_object_mut) {
                default_field(pp, "timeoutSeconds", json!(DEFAULT_PULL_TIMEOUT_SECONDS));
                default_field(pp, "backoffLimit", json!(DEFAULT_BACKOFF_LIMIT));
            }
        }
    }
}

/// `/validate-apps-kruise-io-nodeimage`.
pub fn validate_nodeimage(req: &Request) -> Outcome {
    match creating_or_updating(req) {
        Ok(Some(o)) => verdict(&nodeimage_errors(o)),
        Ok(None) => Outcome::Allow,
        Err(o) => o,
    }
}

/// Every problem of a NodeImage.
pub fn nodeimage_errors(ni: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(images) = get(ni, &["spec", "images"]).and_then(Value::as_object) else {
        return errs;
    };
    if images.len() > MAX_IMAGES_PER_NODE {
        errs.push(FieldError::invalid(
            "spec.images",
            &json!(images.len()),
            format!("spec images length can not be more than {MAX_IMAGES_PER_NODE}"),
        ));
    }
    for (name, spec) in images {
        let base = format!("spec.images[{name}]");
        if name.is_empty() {
            errs.push(FieldError::required(
                "spec.images",
                "image name can not be empty",
            ));
        }
        let tags = spec.get("tags").and_then(Value::as_array);
        let mut seen = BTreeSet::new();
        for (i, t) in tags.into_iter().flatten().enumerate() {
            let path = format!("{base}.tags[{i}]");
            let tag = t.get("tag").and_then(Value::as_str).unwrap_or_default();
            if tag.is_empty() {
                errs.push(FieldError::required(
                    format!("{path}.tag"),
                    format!("tag for image {name} can not be empty"),
                ));
                continue;
            }
            if !seen.insert(tag) {
                errs.push(FieldError::invalid(
                    format!("{path}.tag"),
                    &json!(tag),
                    format!("duplicated tag {tag} for image {name}"),
                ));
            }
            let full = format!("{name}/{tag}");
            let set = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
            if !set(t.get("createdAt")) {
                errs.push(FieldError::required(
                    format!("{path}.createdAt"),
                    format!("createdAt field for {full} can not be empty"),
                ));
            }
            if let Some(v) = t.get("version").filter(|v| !v.is_null())
                && v.as_i64().is_none_or(|n| n < 0)
            {
                errs.push(FieldError::invalid(
                    format!("{path}.version"),
                    v,
                    format!("version for {full} can not be less than 0"),
                ));
            }
            match t.get("pullPolicy").filter(|v| !v.is_null()) {
                None => errs.push(FieldError::required(
                    format!("{path}.pullPolicy"),
                    format!("pullPolicy field for {full} must set"),
                )),
                Some(pp) if !set(pp.get("ttlSecondsAfterFinished")) => {
                    errs.push(FieldError::required(
                        format!("{path}.pullPolicy.ttlSecondsAfterFinished"),
                        format!("pullPolicy.ttlSecondsAfterFinished for {full} must set"),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(spec: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "ImagePullJob",
            "metadata": {"name": "j", "namespace": "ns"}, "spec": spec})
    }

    fn messages(errs: &[FieldError]) -> String {
        aggregate(errs)
    }

    #[test]
    fn imagepulljob_defaults() {
        let mut j = job(json!({"image": "nginx:1"}));
        assert!(default_imagepulljob(&mut j));
        assert_eq!(j["spec"]["completionPolicy"]["type"], "Always");
        assert_eq!(j["spec"]["pullPolicy"]["timeoutSeconds"], 600);
        assert_eq!(j["spec"]["pullPolicy"]["backoffLimit"], 3);
        assert_eq!(j["spec"]["imagePullPolicy"], "IfNotPresent");
        // What the user set stays.
        let mut j = job(
            json!({"image": "nginx:1", "completionPolicy": {"type": "Never"},
            "pullPolicy": {"timeoutSeconds": 5}, "imagePullPolicy": "Always"}),
        );
        assert!(default_imagepulljob(&mut j));
        assert_eq!(j["spec"]["completionPolicy"]["type"], "Never");
        assert_eq!(j["spec"]["pullPolicy"]["timeoutSeconds"], 5);
        assert_eq!(j["spec"]["imagePullPolicy"], "Always");
        assert!(!default_imagepulljob(&mut job(
            json!({"completionPolicy": 3})
        )));
    }

    #[test]
    fn imagepulljob_rules() {
        let ok = job(json!({"image": "127.0.0.1:5000/kruise-rs/testapp:v1",
            "selector": {"names": ["n1"]}, "completionPolicy": {"type": "Always",
            "ttlSecondsAfterFinished": 10}}));
        assert!(imagepulljob_errors(&ok).is_empty());
        let cases = [
            (
                json!({"image": ""}),
                "spec.image: Required value: image can not be empty",
            ),
            (
                json!({"image": "Nginx:1"}),
                "repository name must be lowercase",
            ),
            (json!({"image": "nginx:"}), "bad tag"),
            (json!({"image": "nginx@sha256:12"}), "bad digest"),
            (
                json!({"image": "a", "selector": {"names": ["n"], "matchLabels": {"a": "b"}}}),
                "spec.selector: Forbidden: can not set both names and labelSelector",
            ),
            (
                json!({"image": "a", "completionPolicy": {"type": "Never", "activeDeadlineSeconds": 3}}),
                "can only work with Always CompletionPolicyType",
            ),
            (
                json!({"image": "a", "completionPolicy": {"type": "Sometimes"}}),
                "spec.completionPolicy.type: Unsupported value: \"Sometimes\"",
            ),
            (
                json!({"image": "a", "pullPolicy": {"backoffLimit": -1}}),
                "spec.pullPolicy.backoffLimit: Invalid value: -1",
            ),
            (
                json!({"image": "a", "completionPolicy": {"activeDeadlineSeconds": 300}}),
                "spec.completionPolicy.activeDeadlineSeconds: Invalid value: 300: must be greater than or equal to spec.pullPolicy.timeoutSeconds (600, default 600)",
            ),
            (
                json!({"image": "a", "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 30},
                    "pullPolicy": {"timeoutSeconds": 60}}),
                "spec.completionPolicy.activeDeadlineSeconds: Invalid value: 30: must be greater than or equal to spec.pullPolicy.timeoutSeconds (60, default 600)",
            ),
        ];
        for (spec, want) in cases {
            let got = messages(&imagepulljob_errors(&job(spec.clone())));
            assert!(got.contains(want), "{spec}: {got}");
        }
    }

    #[test]
    fn valid_parallelism_and_deadlines_pass() {
        for spec in [
            json!({"image": "a", "parallelism": 0}),
            json!({"image": "a", "parallelism": "3"}),
            json!({"image": "a", "completionPolicy": {"activeDeadlineSeconds": 600}}),
            json!({"image": "a", "completionPolicy": {"activeDeadlineSeconds": 60},
                "pullPolicy": {"timeoutSeconds": 60}}),
            json!({"image": "a", "pullSecrets": ["reg-cred", "other.cred"]}),
        ] {
            assert!(
                imagepulljob_errors(&job(spec.clone())).is_empty(),
                "{spec}: {}",
                messages(&imagepulljob_errors(&job(spec.clone())))
            );
        }
    }

    #[test]
    fn pull_secrets_are_immutable() {
        let body = |old: Value, new: Value| {
            crate::review::tests::review_body(
                "UPDATE",
                ("apps.kruise.io", "v1beta1", "ImagePullJob"),
                "imagepulljobs",
                Some(job(new)),
                Some(job(old)),
            )
        };
        let run = |old: Value, new: Value| {
            crate::review::tests::response(&crate::review::admit(
                &body(old, new),
                validate_imagepulljob,
            ))
        };
        let r = run(
            json!({"image": "a", "pullSecrets": ["s1"]}),
            json!({"image": "a", "pullSecrets": ["s2"]}),
        );
        assert_eq!(r["allowed"], false, "{r}");
        assert_eq!(
            r["status"]["message"],
            "spec.pullSecrets: Forbidden: field is immutable"
        );
        let r = run(
            json!({"image": "a"}),
            json!({"image": "a", "pullSecrets": ["s1"]}),
        );
        assert_eq!(r["allowed"], false, "{r}");
        // Other fields may change; absent and empty are the same list.
        let r = run(
            json!({"image": "a", "pullSecrets": []}),
            json!({"image": "a", "parallelism": 3}),
        );
        assert_eq!(r["allowed"], true, "{r}");
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

    #[test]
    fn imagelistpulljob_defaults_without_pull_policy_of_images() {
        let mut j = job(json!({"images": ["nginx:1"]}));
        assert!(default_template(&mut j));
        assert_eq!(j["spec"]["completionPolicy"]["type"], "Always");
        assert_eq!(j["spec"]["pullPolicy"]["timeoutSeconds"], 600);
        assert_eq!(j["spec"]["pullPolicy"]["backoffLimit"], 3);
        // Upstream leaves imagePullPolicy to each ImagePullJob's own defaulting.
        assert!(j["spec"].get("imagePullPolicy").is_none());
        assert!(imagelistpulljob_errors(&j).is_empty());
    }

    #[test]
    fn imagelistpulljob_rules() {
        let cases = [
            (
                json!({}),
                "spec.images: Required value: images can not be empty",
            ),
            (
                json!({"images": []}),
                "spec.images: Required value: images can not be empty",
            ),
            (
                json!({"images": ["nginx:1", "redis", "nginx:1"]}),
                "spec.images[2]: Invalid value: \"nginx:1\": images cannot have duplicate values (same as spec.images[0])",
            ),
            (
                json!({"images": ["nginx:1", "Bad/Image"]}),
                "spec.images[1]: Invalid value: \"Bad/Image\": invalid reference format: repository name must be lowercase",
            ),
            (
                json!({"images": ["nginx:1", ""]}),
                "spec.images[1]: Required value: image can not be empty",
            ),
            (
                json!({"images": "nginx"}),
                "spec.images: Invalid value: \"nginx\": must be a list of images",
            ),
            (
                json!({"images": ["a"], "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 1}}),
                "can only work with Always CompletionPolicyType",
            ),
        ];
        for (spec, want) in cases {
            let got = messages(&imagelistpulljob_errors(&job(spec.clone())));
            assert!(got.contains(want), "{spec}: {got}");
        }
        let many: Vec<String> = (0..=MAX_IMAGES_PER_LIST)
            .map(|i| format!("img{i}"))
            .collect();
        let got = messages(&imagelistpulljob_errors(&job(json!({"images": many}))));
        assert!(got.contains("can not be more than 255"), "{got}");
        // Every problem is reported, not only the first.
        let got = messages(&imagelistpulljob_errors(&job(
            json!({"images": ["A", "A"], "pullPolicy": {"timeoutSeconds": -1}}),
        )));
        assert!(
            got.starts_with('[')
                && got.contains("spec.images[0]")
                && got.contains("spec.images[1]")
                && got.contains("spec.pullPolicy.timeoutSeconds"),
            "{got}"
        );
    }

    #[test]
    fn image_references() {
        for good in [
            "nginx",
            "nginx:1.25",
            "library/nginx:latest",
            "registry.example.com:5000/team/app:v1-rc.2",
            "localhost/app",
            "nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(image_reference_problem(good), None, "{good}");
        }
        for bad in ["a b", "/nginx", "nginx//x", "Team/app", "app:-x", "app@md5"] {
            assert!(image_reference_problem(bad).is_some(), "{bad}");
        }
    }

    fn nodeimage(images: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
            "metadata": {"name": "node-1"}, "spec": {"images": images}})
    }

    #[test]
    fn nodeimage_defaults_then_validates() {
        let mut ni = nodeimage(json!({"nginx": {"tags": [{"tag": "1", "pullPolicy":
            {"ttlSecondsAfterFinished": 60, "timeoutSeconds": 10}}]}}));
        default_nodeimage(&mut ni, "2026-01-01T00:00:00Z");
        let t = &ni["spec"]["images"]["nginx"]["tags"][0];
        assert_eq!(t["createdAt"], "2026-01-01T00:00:00Z");
        assert_eq!(t["pullPolicy"]["timeoutSeconds"], 10);
        assert_eq!(t["pullPolicy"]["backoffLimit"], 3);
        assert!(
            nodeimage_errors(&ni).is_empty(),
            "{:?}",
            nodeimage_errors(&ni)
        );
    }

    #[test]
    fn nodeimage_rules() {
        let tag = |t: &str| {
            json!({"tag": t, "createdAt": "2026-01-01T00:00:00Z",
            "pullPolicy": {"ttlSecondsAfterFinished": 1}})
        };
        let cases = [
            (
                json!({"nginx": {"tags": [tag(""), ]}}),
                "tag for image nginx can not be empty",
            ),
            (
                json!({"nginx": {"tags": [tag("1"), tag("1")]}}),
                "spec.images[nginx].tags[1].tag: Invalid value: \"1\": duplicated tag 1 for image nginx",
            ),
            (
                json!({"nginx": {"tags": [{"tag": "1", "pullPolicy": {"ttlSecondsAfterFinished": 1}}]}}),
                "createdAt field for nginx/1 can not be empty",
            ),
            (
                json!({"nginx": {"tags": [{"tag": "1", "createdAt": "2026-01-01T00:00:00Z"}]}}),
                "pullPolicy field for nginx/1 must set",
            ),
            (
                json!({"nginx": {"tags": [{"tag": "1", "createdAt": "2026-01-01T00:00:00Z",
                    "pullPolicy": {}}]}}),
                "pullPolicy.ttlSecondsAfterFinished for nginx/1 must set",
            ),
            (
                json!({"nginx": {"tags": [{"tag": "1", "createdAt": "2026-01-01T00:00:00Z",
                    "version": -1, "pullPolicy": {"ttlSecondsAfterFinished": 1}}]}}),
                "version for nginx/1 can not be less than 0",
            ),
        ];
        for (images, want) in cases {
            let got = messages(&nodeimage_errors(&nodeimage(images.clone())));
            assert!(got.contains(want), "{images}: {got}");
        }
        let many: serde_json::Map<String, Value> = (0..=MAX_IMAGES_PER_NODE)
            .map(|i| (format!("img{i}"), json!({"tags": []})))
            .collect();
        let got = messages(&nodeimage_errors(&nodeimage(Value::Object(many))));
        assert!(got.contains("can not be more than 256"), "{got}");
    }
}
