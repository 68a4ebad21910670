//! Decoding of a ContainerRecreateRequest admission request, shared by both handlers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::apps::v1beta1::{ContainerRecreateRequest, ContainerRecreateRequestSpec};
use serde_json::{Value, json};

use super::admit::{AdmitError, Rejection};
use crate::review::{Outcome, Request};

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];

pub(super) fn object(req: &Request) -> Result<&Value, Outcome> {
    match &req.object {
        Some(o) if o.is_object() => Ok(o),
        Some(_) => Err(Outcome::bad_request("object must be a JSON object")),
        None => Err(Outcome::bad_request("request carries no object")),
    }
}

/// Decodes the parts of a request we use. A failure policy we do not know is reported (and left
/// out of the decode, so the rest can still be checked); a wrongly typed field is a 400 naming it.
pub(super) fn decode(obj: &Value) -> Result<(ContainerRecreateRequest, Vec<AdmitError>), Outcome> {
    let mut errs = Vec::new();
    let mut spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let Some(s) = spec.as_object_mut() else {
        return Err(Outcome::bad_request("spec: must be an object"));
    };
    // Missing required fields are reported as the rules' messages, not as decode errors.
    s.entry("podName").or_insert_with(|| json!(""));
    s.entry("containers").or_insert_with(|| json!([]));
    if let Some(fp) = s
        .get_mut("strategy")
        .and_then(Value::as_object_mut)
        .and_then(|st| st.remove("failurePolicy"))
    {
        match fp.as_str() {
            Some(p) if FAILURE_POLICIES.contains(&p) => {
                if let Some(st) = s.get_mut("strategy").and_then(Value::as_object_mut) {
                    st.insert("failurePolicy".to_owned(), fp);
                }
            }
            _ if fp.is_null() => {}
            _ => errs.push(AdmitError::UnknownFailurePolicy(fp.to_string())),
        }
    }
    let spec: ContainerRecreateRequestSpec =
        serde_json::from_value(spec).map_err(|e| Outcome::bad_request(format!("spec: {e}")))?;
    let metadata: ObjectMeta =
        serde_json::from_value(obj.get("metadata").cloned().unwrap_or_else(|| json!({})))
            .map_err(|e| Outcome::bad_request(format!("metadata: {e}")))?;
    let mut crr = ContainerRecreateRequest::new("", spec);
    crr.metadata = metadata;
    Ok((crr, errs))
}

pub(super) fn reject(errs: Vec<AdmitError>) -> Outcome {
    Outcome::invalid(Rejection(errs).to_string())
}
