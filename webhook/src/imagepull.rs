//! ImagePullJob and NodeImage admission (defaulting and validation), after upstream's
//! `pkg/webhook/imagepulljob` and `pkg/webhook/nodeimage`. Both versions share one shape, so one
//! handler serves v1alpha1 and v1beta1. Raw JSON for the same reason as the CloneSet handlers:
//! a wrongly typed field is reported by path instead of failing to decode.

use std::collections::BTreeSet;

use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::cloneset::{default_field, default_string, get, obj_mut};
use crate::field::{FieldError, aggregate};
use crate::review::{Outcome, Request, diff};

/// Upstream's per-tag pull timeout default, seconds.
const DEFAULT_PULL_TIMEOUT_SECONDS: i64 = 600;
/// Upstream's per-tag retry default.
const DEFAULT_BACKOFF_LIMIT: i64 = 3;
/// Upstream caps the images one node may be asked to hold.
const MAX_IMAGES_PER_NODE: usize = 256;

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
    let Some(cp) = obj_mut(job, &["spec", "completionPolicy"]) else {
        return false;
    };
    default_string(cp, "type", "Always");
    let Some(pp) = obj_mut(job, &["spec", "pullPolicy"]) else {
        return false;
    };
    default_field(pp, "timeoutSeconds", json!(DEFAULT_PULL_TIMEOUT_SECONDS));
    default_field(pp, "backoffLimit", json!(DEFAULT_BACKOFF_LIMIT));
    let Some(spec) = obj_mut(job, &["spec"]) else {
        return false;
    };
    default_string(spec, "imagePullPolicy", "IfNotPresent");
    true
}

/// `/validate-apps-kruise-io-imagepulljob`.
pub fn validate_imagepulljob(req: &Request) -> Outcome {
    match creating_or_updating(req) {
        Ok(Some(o)) => verdict(&imagepulljob_errors(o)),
        Ok(None) => Outcome::Allow,
        Err(o) => o,
    }
}

/// Every problem of an ImagePullJob.
pub fn imagepulljob_errors(job: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let null = Value::Null;
    let spec = get(job, &["spec"]).unwrap_or(&null);
    if let Some(sel) = spec.get("selector").filter(|s| !s.is_null()) {
        let set = |k: &str| sel.get(k).is_some_and(|v| !v.is_null());
        if set("names") && (set("matchLabels") || set("matchExpressions")) {
            errs.push(FieldError::forbidden(
                "spec.selector",
                "can not set both names and labelSelector in this spec.selector",
            ));
        }
    }
    match spec.get("image").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("spec.image", "image can not be empty")),
        Some(image) => {
            if let Some(rule) = image_reference_problem(image) {
                errs.push(FieldError::invalid("spec.image", &json!(image), rule));
            }
        }
    }
    let cp = spec.get("completionPolicy").unwrap_or(&null);
    let ty = cp.get("type").unwrap_or(&null);
    match ty.as_str() {
        // Defaulting sets Always; absent means the mutating webhook did not run (dry runs).
        _ if ty.is_null() => {}
        Some("Always") => {}
        Some("Never") => {
            let set = |k: &str| cp.get(k).is_some_and(|v| !v.is_null());
            if set("activeDeadlineSeconds") || set("ttlSecondsAfterFinished") {
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
        ];
        for (spec, want) in cases {
            let got = messages(&imagepulljob_errors(&job(spec.clone())));
            assert!(got.contains(want), "{spec}: {got}");
        }
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
