//! `/convert`: the CRD ConversionReview endpoint.
//!
//! Always answers with a well-formed `apiextensions.k8s.io/v1` ConversionReview; a body that
//! cannot be decoded or an object that cannot be converted yields `result.status: Failure` with
//! a message (the API server then fails the request that needed the conversion).

use std::panic::{AssertUnwindSafe, catch_unwind};

use kube::core::{
    Status, TypeMeta,
    conversion::{ConversionRequest, ConversionResponse, ConversionReview},
};
use serde_json::Value;

const REVIEW_API_VERSION: &str = "apiextensions.k8s.io/v1";
const REVIEW_KIND: &str = "ConversionReview";

/// One kind's conversion of an object to `desired` (`group/version`).
pub type Convert = fn(&Value, &str) -> Result<Value, String>;

/// The conversion of a kind, by `kind`; `None` for a kind this webhook does not convert.
pub type Converters = fn(&str) -> Option<Convert>;

/// Decodes `body`, converts every object with the kind's conversion from `converters`, and
/// returns a serialized ConversionReview.
pub fn handle(body: &[u8], converters: Converters) -> Vec<u8> {
    let review = handle_review(body, converters);
    serde_json::to_vec(&review).unwrap_or_else(|e| {
        tracing::error!(error = %e, "serializing ConversionReview failed");
        br#"{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","response":{"uid":"","result":{"status":"Failure","message":"webhook failed to encode its response"},"convertedObjects":[]}}"#.to_vec()
    })
}

/// Like [`handle`] but returns the typed review.
pub fn handle_review(body: &[u8], converters: Converters) -> ConversionReview {
    let types = TypeMeta {
        api_version: REVIEW_API_VERSION.to_owned(),
        kind: REVIEW_KIND.to_owned(),
    };
    // Decoded straight into the review: going through a `Value` first built every object twice
    // (the API server sends one on each write of a CloneSet in the version it does not store).
    let request = serde_json::from_slice::<ConversionReview>(body)
        .map_err(|e| undecodable(body, &e))
        .and_then(|r| {
            ConversionRequest::from_review(r)
                .map_err(|_| (String::new(), "ConversionReview has no request".to_owned()))
        });
    let mut response = match request {
        Err((uid, message)) => {
            tracing::warn!(%uid, %message, "rejecting undecodable ConversionReview");
            let mut r = ConversionResponse::invalid(Status::failure(&message, "BadRequest"));
            r.uid = uid;
            r
        }
        Ok(mut req) => {
            let desired = std::mem::take(&mut req.desired_api_version);
            let objects = std::mem::take(&mut req.objects);
            let uid = req.uid.clone();
            let converted = catch_unwind(AssertUnwindSafe(|| {
                objects
                    .iter()
                    .map(|o| convert_object(o, &desired, converters))
                    .collect::<Result<Vec<_>, String>>()
            }))
            .unwrap_or_else(|_| Err("internal error in kruise conversion webhook".to_owned()));
            let resp = ConversionResponse::for_request(req);
            match converted {
                Ok(objs) => resp.success(objs),
                Err(message) => {
                    tracing::warn!(%uid, %desired, %message, "conversion failed");
                    resp.failure(Status::failure(&message, "ConversionFailed"))
                }
            }
        }
    };
    response.types = Some(types.clone());
    let mut review = response.into_review();
    review.types = types;
    review
}

/// The uid (when one can be read) and the message for a body that is not a ConversionReview.
fn undecodable(body: &[u8], err: &serde_json::Error) -> (String, String) {
    match serde_json::from_slice::<Value>(body) {
        Err(e) => (String::new(), format!("request body is not JSON: {e}")),
        Ok(raw) => (
            raw.pointer("/request/uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            format!("malformed ConversionReview: {err}"),
        ),
    }
}

/// Converts one object of any kind `converters` knows to `desired` (`group/version`).
pub fn convert_object(obj: &Value, desired: &str, converters: Converters) -> Result<Value, String> {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let group = |av: &str| av.split_once('/').map(|(g, _)| g.to_owned());
    if group(api_version) != group(desired) {
        return Err(format!(
            "cannot convert {kind} from {api_version:?} to {desired:?}: different API groups"
        ));
    }
    match converters(kind) {
        Some(convert) => convert(obj, desired),
        None => Err(format!(
            "conversion of kind {kind:?} ({api_version} → {desired}) is not supported by this webhook"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(objects: Value, desired: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u1", "desiredAPIVersion": desired, "objects": objects}}))
        .expect("body")
    }

    fn resp(b: &[u8]) -> Value {
        let v: Value = serde_json::from_slice(&handle(b, crate::converter)).expect("json");
        assert_eq!(v["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(v["kind"], "ConversionReview");
        v["response"].clone()
    }

    #[test]
    fn converts_alpha_to_beta_in_order() {
        let objs = json!([
            {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "a"},
             "spec": {"updateStrategy": {"type": "InPlaceOnly", "partition": 2}}},
            {"apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet", "metadata": {"name": "b"},
             "spec": {}}
        ]);
        let r = resp(&body(objs, "apps.kruise.io/v1beta1"));
        assert_eq!(r["uid"], "u1");
        assert_eq!(r["result"]["status"], "Success");
        let out = &r["convertedObjects"];
        assert_eq!(out[0]["apiVersion"], "apps.kruise.io/v1beta1");
        assert_eq!(
            out[0]["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2, "podUpdatePolicy": "InPlaceOnly"}})
        );
        assert_eq!(out[1]["metadata"]["name"], "b");
    }

    #[test]
    fn unknown_kind_fails_cleanly() {
        let objs = json!([{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "Foo"}]);
        let r = resp(&body(objs, "apps.kruise.io/v1beta1"));
        assert_eq!(r["result"]["status"], "Failure");
        assert_eq!(r["convertedObjects"], json!([]));
    }

    #[test]
    fn a_malformed_review_fails_with_its_uid() {
        let b = serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u2", "desiredAPIVersion": 7, "objects": []}}))
        .expect("body");
        let r = resp(&b);
        assert_eq!(r["result"]["status"], "Failure");
        assert_eq!(r["uid"], "u2");
        let message = r["result"]["message"].as_str().expect("message");
        assert!(
            message.starts_with("malformed ConversionReview"),
            "{message}"
        );
    }

    #[test]
    fn garbage_is_a_failure_review() {
        let r = resp(b"\x00\x01");
        assert_eq!(r["result"]["status"], "Failure");
        assert_eq!(r["uid"], "");
    }
}
