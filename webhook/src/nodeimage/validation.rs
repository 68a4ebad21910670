//! NodeImage validation: the tags of every image.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::field::FieldError;
use crate::json::get;
use crate::review::{Outcome, Request, creating_or_updating, verdict};

/// Upstream caps the images one node may be asked to hold.
pub const MAX_IMAGES_PER_NODE: usize = 256;

/// `/validate-apps-kruise-io-nodeimage`.
pub fn validate(req: &Request) -> Outcome {
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
