//! AdmissionReview decoding and encoding shared by every admission handler.
//!
//! Handlers are pure functions from a decoded [`Request`] to an [`Outcome`]. Whatever the body
//! contains, [`admit`] answers with a well-formed `admission.k8s.io/v1` AdmissionReview: a body
//! that cannot be decoded, or a handler that panics, becomes `allowed: false` with a message, so
//! the API server never sees an HTTP 500 from us.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};

use futures::FutureExt;

use kube::core::{
    DynamicObject, Status, TypeMeta,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation},
};
use serde_json::Value;

use crate::field::{FieldError, aggregate};

/// The parts of an AdmissionRequest our handlers look at. Objects stay raw JSON so that nothing
/// the API server sent is lost before a patch is computed against it.
#[derive(Debug, Clone)]
pub struct Request {
    /// Request uid, echoed in the response.
    pub uid: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: Operation,
    /// Group of the resource (`""` for core).
    pub group: String,
    /// Version of the object as sent to us (after any apiserver conversion).
    pub version: String,
    /// Kind of the object.
    pub kind: String,
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
    /// Subresource, if any (`status`, `scale`, …).
    pub sub_resource: Option<String>,
    /// Namespace of the request.
    pub namespace: Option<String>,
    /// Name of the object (empty on CREATE with generateName).
    pub name: String,
    /// The new object (absent on DELETE).
    pub object: Option<Value>,
    /// The existing object (UPDATE and DELETE).
    pub old_object: Option<Value>,
    /// The operation's options (`DeleteOptions`, `UpdateOptions`, `CreateOptions`), if sent.
    pub options: Option<Value>,
    /// Whether the change will not be persisted.
    pub dry_run: bool,
    /// Who asked (`userInfo.username`), for the refusal counters.
    pub username: String,
}

/// What a handler decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Admit unchanged.
    Allow,
    /// Admit with these changes (an empty patch is the same as [`Outcome::Allow`]).
    Patch(json_patch::Patch),
    /// Reject. `code` is the HTTP-style code shown to the user (400 malformed, 403 forbidden,
    /// 422 invalid).
    Deny {
        /// HTTP status code for the Status.
        code: u16,
        /// Machine-readable reason (`Invalid`, `Forbidden`, `BadRequest`).
        reason: &'static str,
        /// Human-readable message naming the field, the value and the rule.
        message: String,
    },
}

impl Outcome {
    /// 422 Invalid.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Deny {
            code: 422,
            reason: "Invalid",
            message: message.into(),
        }
    }

    /// 400 BadRequest (the request itself could not be understood).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::Deny {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
        }
    }

    /// 500 InternalError (the webhook failed, as upstream's `admission.Errored(500, ..)`).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Deny {
            code: 500,
            reason: "InternalError",
            message: message.into(),
        }
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::Deny {
            code: 403,
            reason: "Forbidden",
            message: message.into(),
        }
    }
}

const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";
const REVIEW_KIND: &str = "AdmissionReview";

fn review_types() -> TypeMeta {
    TypeMeta {
        api_version: REVIEW_API_VERSION.to_owned(),
        kind: REVIEW_KIND.to_owned(),
    }
}

/// Decodes `body`, runs `handler`, and always returns a serialized AdmissionReview.
pub fn admit<F>(body: &[u8], handler: F) -> Vec<u8>
where
    F: Fn(&Request) -> Outcome,
{
    encode(&admit_review(body, handler))
}

fn encode(review: &AdmissionReview<DynamicObject>) -> Vec<u8> {
    serde_json::to_vec(review).unwrap_or_else(|e| {
        // Serializing our own response cannot realistically fail; answer minimally if it does.
        tracing::error!(error = %e, "serializing AdmissionReview failed");
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false,"status":{"message":"webhook failed to encode its response","code":500}}}"#.to_vec()
    })
}

/// Like [`admit`] but returns the typed review (used by tests).
pub fn admit_review<F>(body: &[u8], handler: F) -> AdmissionReview<DynamicObject>
where
    F: Fn(&Request) -> Outcome,
{
    let (req, resp) = match decode(body) {
        Ok(pair) => pair,
        Err(review) => return *review,
    };
    let about = About::of(&req);
    let outcome =
        catch_unwind(AssertUnwindSafe(|| handler(&req))).unwrap_or_else(|_| panicked(&about));
    respond(&about, resp, outcome)
}

/// [`admit`] for handlers that must wait on something (the API server): same guarantees, a
/// well-formed review whatever the body, a panic in the handler becomes a denial.
pub async fn admit_async<F, Fut>(body: &[u8], handler: F) -> Vec<u8>
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Outcome>,
{
    let review = match decode(body) {
        Ok((req, resp)) => {
            // Only what the answer and its log lines name is kept aside: the handler takes the
            // request, objects and all, without a copy.
            let about = About::of(&req);
            let outcome = AssertUnwindSafe(handler(req))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| panicked(&about));
            respond(&about, resp, outcome)
        }
        Err(review) => *review,
    };
    encode(&review)
}

/// The serialized review admitting the request `uid` unchanged, for a caller that decided
/// without decoding the request.
pub fn allowed(uid: String) -> Vec<u8> {
    // The response type is non-exhaustive: built from its one request-free constructor, then
    // made what `AdmissionResponse::from(&request)` answers.
    let mut resp = AdmissionResponse::invalid("");
    resp.types = review_types();
    resp.uid = uid;
    resp.allowed = true;
    resp.result = Status::default();
    encode(&resp.into_review())
}

/// The request as the answer's log lines name it.
struct About {
    uid: String,
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl About {
    fn of(req: &Request) -> Self {
        Self {
            uid: req.uid.clone(),
            kind: req.kind.clone(),
            namespace: req.namespace.clone(),
            name: req.name.clone(),
        }
    }
}

fn panicked(req: &About) -> Outcome {
    tracing::error!(uid = %req.uid, kind = %req.kind, "admission handler panicked");
    Outcome::Deny {
        code: 500,
        reason: "InternalError",
        message: "internal error in kruise webhook handler".to_owned(),
    }
}

/// The review answering `req` with `outcome`.
fn respond(
    req: &About,
    mut resp: AdmissionResponse,
    outcome: Outcome,
) -> AdmissionReview<DynamicObject> {
    resp.types = review_types();
    let resp = match outcome {
        Outcome::Allow => resp,
        Outcome::Patch(patch) if patch.0.is_empty() => resp,
        Outcome::Patch(patch) => match resp.clone().with_patch(patch) {
            Ok(r) => r,
            Err(e) => deny(resp, 500, "InternalError", &format!("encoding patch: {e}")),
        },
        Outcome::Deny {
            code,
            reason,
            message,
        } => {
            tracing::info!(uid = %req.uid, kind = %req.kind, namespace = ?req.namespace,
                name = %req.name, %message, "admission denied");
            deny(resp, code, reason, &message)
        }
    };
    resp.into_review()
}

fn deny(resp: AdmissionResponse, code: u16, reason: &str, message: &str) -> AdmissionResponse {
    let mut resp = resp.deny(message);
    resp.result = Status::failure(message, reason).with_code(code);
    resp
}

/// Decodes the body; on failure, the review rejecting it (with the uid, if one was found).
fn decode(
    body: &[u8],
) -> Result<(Request, AdmissionResponse), Box<AdmissionReview<DynamicObject>>> {
    decode_parts(body).map_err(|(uid, message)| {
        tracing::warn!(%uid, %message, "rejecting undecodable AdmissionReview");
        let mut resp = AdmissionResponse::invalid(&message);
        resp.uid = uid;
        resp.result = Status::failure(&message, "BadRequest").with_code(400);
        resp.types = review_types();
        Box::new(resp.into_review())
    })
}

fn decode_parts(body: &[u8]) -> Result<(Request, AdmissionResponse), (String, String)> {
    let mut raw: Value = serde_json::from_slice(body)
        .map_err(|e| (String::new(), format!("request body is not JSON: {e}")))?;
    let uid = raw
        .pointer("/request/uid")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // The objects are moved out of the raw JSON, not copied: the typed decode below then reads
    // only the request's small fields (required ones checked), and each handler decodes the
    // objects it needs itself.
    let mut take = |key: &str| {
        raw.get_mut("request")
            .and_then(Value::as_object_mut)
            .and_then(|r| r.remove(key))
            .filter(|v| !v.is_null())
    };
    let (object, old_object, options) = (take("object"), take("oldObject"), take("options"));
    let typed: AdmissionReview<DynamicObject> = crate::json::typed(&raw)
        .map_err(|e| (uid.clone(), format!("malformed AdmissionReview: {e}")))?;
    let typed: AdmissionRequest<DynamicObject> = typed
        .try_into()
        .map_err(|_| (uid.clone(), "AdmissionReview has no request".to_owned()))?;
    let resp = AdmissionResponse::from(&typed);
    let req = Request {
        uid: typed.uid.clone(),
        operation: typed.operation.clone(),
        group: typed.kind.group.clone(),
        version: typed.kind.version.clone(),
        kind: typed.kind.kind.clone(),
        resource: typed.resource.resource.clone(),
        sub_resource: typed.sub_resource.clone().filter(|s| !s.is_empty()),
        namespace: typed.namespace.clone(),
        name: typed.name.clone(),
        object,
        old_object,
        options,
        dry_run: typed.dry_run,
        username: typed.user_info.username.clone().unwrap_or_default(),
    };
    Ok((req, resp))
}

/// JSON patch turning `before` into `after`.
pub fn diff(before: &Value, after: &Value) -> json_patch::Patch {
    json_patch::diff(before, after)
}

/// The object of a CREATE or UPDATE (`None` for other operations, which the defaulting and
/// validating handlers of most kinds admit); a 400 when it is missing or not an object.
pub fn creating_or_updating(req: &Request) -> Result<Option<&Value>, Outcome> {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(None);
    }
    match &req.object {
        Some(o) if o.is_object() => Ok(Some(o)),
        Some(_) => Err(Outcome::bad_request("object must be a JSON object")),
        None => Err(Outcome::bad_request("request carries no object")),
    }
}

/// The typed object of a CREATE or UPDATE and, for an UPDATE, the old one; `Ok(None)` for other
/// operations. `kind` names the type in the refusal when either does not decode.
pub fn decoded_with_old<T: serde::de::DeserializeOwned>(
    req: &Request,
    kind: &str,
) -> Result<Option<(T, Option<T>)>, Outcome> {
    let Some(obj) = creating_or_updating(req)? else {
        return Ok(None);
    };
    let new: T = crate::json::typed(obj)
        .map_err(|e| Outcome::bad_request(format!("cannot decode {kind}: {e}")))?;
    let old = match (&req.operation, &req.old_object) {
        (Operation::Update, Some(old)) => Some(
            crate::json::typed(old)
                .map_err(|e| Outcome::bad_request(format!("cannot decode the old {kind}: {e}")))?,
        ),
        _ => None,
    };
    Ok(Some((new, old)))
}

/// The patch from `before` to `after`, or admit unchanged.
pub fn patch_or_allow(before: &Value, after: &Value) -> Outcome {
    if before == after {
        Outcome::Allow
    } else {
        Outcome::Patch(diff(before, after))
    }
}

/// 422 naming every error, or admit when there is none.
pub fn verdict(errors: &[FieldError]) -> Outcome {
    if errors.is_empty() {
        Outcome::Allow
    } else {
        Outcome::invalid(aggregate(errors))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// Builds an AdmissionReview body for tests.
    pub fn review_body(
        operation: &str,
        gvk: (&str, &str, &str),
        resource: &str,
        object: Option<Value>,
        old: Option<Value>,
    ) -> Vec<u8> {
        let v = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "uid-1",
                "kind": {"group": gvk.0, "version": gvk.1, "kind": gvk.2},
                "resource": {"group": gvk.0, "version": gvk.1, "resource": resource},
                "name": "n",
                "namespace": "default",
                "operation": operation,
                "userInfo": {"username": "tester"},
                "object": object,
                "oldObject": old,
                "dryRun": false
            }
        });
        serde_json::to_vec(&v).expect("test body")
    }

    pub fn response(body: &[u8]) -> Value {
        let v: Value = serde_json::from_slice(body).expect("response is JSON");
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(v["kind"], "AdmissionReview");
        v["response"].clone()
    }

    #[test]
    fn garbage_is_denied_with_message() {
        let out = response(&admit(b"not json", |_| Outcome::Allow));
        assert_eq!(out["allowed"], false);
        assert!(
            out["status"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("not JSON")
        );
    }

    #[test]
    fn missing_request_keeps_no_uid_but_is_well_formed() {
        let out = response(&admit(br#"{"kind":"AdmissionReview"}"#, |_| Outcome::Allow));
        assert_eq!(out["allowed"], false);
        assert_eq!(out["uid"], "");
    }

    #[test]
    fn uid_echoed_even_when_request_is_malformed() {
        let body = br#"{"request":{"uid":"abc","operation":"NOPE"}}"#;
        let out = response(&admit(body, |_| Outcome::Allow));
        assert_eq!(out["uid"], "abc");
        assert_eq!(out["allowed"], false);
    }

    #[test]
    fn panic_becomes_denial() {
        let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(json!({})), None);
        let out = response(&admit(&body, |_| panic!("boom")));
        assert_eq!(out["allowed"], false);
        assert_eq!(out["uid"], "uid-1");
    }

    #[test]
    fn deny_carries_code_and_message() {
        let body = review_body("CREATE", ("", "v1", "Pod"), "pods", Some(json!({})), None);
        let out = response(&admit(&body, |_| Outcome::invalid("spec.x: bad")));
        assert_eq!(out["allowed"], false);
        assert_eq!(out["status"]["code"], 422);
        assert_eq!(out["status"]["message"], "spec.x: bad");
    }

    /// The review of a request admitted undecoded is the one the decoding path answers.
    #[test]
    fn allowed_answers_as_an_admitting_handler() {
        let body = review_body("UPDATE", ("", "v1", "Pod"), "pods", Some(json!({})), None);
        let decoded: Value =
            serde_json::from_slice(&admit(&body, |_| Outcome::Allow)).expect("json");
        let direct: Value = serde_json::from_slice(&allowed("uid-1".into())).expect("json");
        assert_eq!(direct, decoded);
    }

    /// The async path hands the handler the request whole (objects and options moved out of
    /// the parsed body), and still answers with the uid when the handler panics.
    #[tokio::test]
    async fn async_handler_gets_objects_and_options() {
        let mut v: Value = serde_json::from_slice(&review_body(
            "DELETE",
            ("", "v1", "Pod"),
            "pods",
            None,
            Some(json!({"metadata": {"name": "p"}})),
        ))
        .expect("body");
        v["request"]["options"] = json!({"kind": "DeleteOptions", "dryRun": ["All"]});
        let body = serde_json::to_vec(&v).expect("body");
        let out = response(
            &admit_async(&body, |req| async move {
                assert_eq!(
                    req.options.as_ref().map(|o| &o["dryRun"][0]),
                    Some(&json!("All"))
                );
                assert_eq!(
                    req.old_object.as_ref().map(|o| &o["metadata"]["name"]),
                    Some(&json!("p"))
                );
                assert!(req.object.is_none());
                Outcome::invalid("seen")
            })
            .await,
        );
        assert_eq!(out["status"]["message"], "seen");
        assert_eq!(out["uid"], "uid-1");
        let out = response(&admit_async(&body, |_| async { panic!("boom") }).await);
        assert_eq!(
            (out["allowed"].clone(), out["uid"].clone()),
            (json!(false), json!("uid-1"))
        );
        assert_eq!(out["status"]["code"], 500);
    }
}
