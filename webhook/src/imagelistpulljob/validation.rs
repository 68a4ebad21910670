//! ImageListPullJob validation: its images, then the shared pull template.

use serde_json::{Value, json};

use crate::field::FieldError;
use crate::image_reference::image_reference_problem;
use crate::json::get;
use crate::pull_template::template_errors;
use crate::review::{Outcome, Request, creating_or_updating, verdict};

/// Upstream caps the images of one ImageListPullJob.
pub const MAX_IMAGES_PER_LIST: usize = 255;

/// `/validate-apps-kruise-io-v1alpha1-imagelistpulljob`.
pub fn validate(req: &Request) -> Outcome {
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
