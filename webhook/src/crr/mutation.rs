//! `/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest`: on CREATE, admit the request
//! against its Pod, read from the cluster through [`PodLookup`].

use std::future::Future;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::ContainerRecreateRequest;
use kube::core::admission::Operation;
use serde_json::{Map, Value, json};

use super::admit::{AdmitError, Rejection, admit, spec_errors};
use super::decode::{decode, object, reject};
use crate::review::{Outcome, Request, diff};

/// Where the mutating handler finds the request's Pod.
pub trait PodLookup: Sync {
    /// The Pod; `Ok(None)` when it does not exist, `Err` with why it could not be read.
    fn pod(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Pod>, String>> + Send;
}

/// Deep merge of `from` into `into`: objects key by key (keys only in `into` stay), arrays of
/// the same length element by element, anything else replaced.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(x) => merge(x, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (x, y) in a.iter_mut().zip(b) {
                merge(x, y);
            }
        }
        (into, from) => *into = from.clone(),
    }
}

/// The patch from the request as sent to `admitted`. Computed on the raw object so that fields
/// our types do not know are kept.
fn admission_patch(raw: &Value, admitted: &ContainerRecreateRequest) -> Result<Outcome, Outcome> {
    let encode = |e: serde_json::Error| Outcome::Deny {
        code: 500,
        reason: "InternalError",
        message: format!("encoding the admitted ContainerRecreateRequest: {e}"),
    };
    let mut after = raw.clone();
    let Some(root) = after.as_object_mut() else {
        return Err(Outcome::bad_request("object must be a JSON object"));
    };
    let labels = serde_json::to_value(&admitted.metadata.labels).map_err(encode)?;
    let meta = root.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    merge(meta, &json!({ "labels": labels }));
    let spec = serde_json::to_value(&admitted.spec).map_err(encode)?;
    merge(root.entry("spec").or_insert_with(|| json!({})), &spec);
    Ok(if &after == raw {
        Outcome::Allow
    } else {
        Outcome::Patch(diff(raw, &after))
    })
}

/// `/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest`, CREATE: admit against the Pod.
pub async fn mutate<P: PodLookup>(req: Request, pods: &P) -> Outcome {
    if !matches!(req.operation, Operation::Create) {
        return Outcome::Allow;
    }
    let raw = match object(&req) {
        Ok(o) => o,
        Err(o) => return o,
    };
    let (crr, mut errs) = match decode(raw) {
        Ok(x) => x,
        Err(o) => return o,
    };
    if crr.spec.pod_name.is_empty() {
        errs.extend(spec_errors(&crr.spec));
        return reject(errs);
    }
    let namespace = req
        .namespace
        .clone()
        .or_else(|| crr.metadata.namespace.clone())
        .unwrap_or_default();
    let pod = match pods.pod(&namespace, &crr.spec.pod_name).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            errs.extend(spec_errors(&crr.spec));
            errs.push(AdmitError::PodNotFound {
                namespace,
                pod: crr.spec.pod_name.clone(),
            });
            return reject(errs);
        }
        Err(e) => {
            tracing::warn!(%namespace, pod = %crr.spec.pod_name, error = %e, "CRR admission could not read the Pod");
            return Outcome::Deny {
                code: 500,
                reason: "InternalError",
                message: format!(
                    "failed to get Pod {:?} in namespace {namespace:?}: {e}",
                    crr.spec.pod_name
                ),
            };
        }
    };
    match admit(&crr, &pod) {
        Ok(admitted) if errs.is_empty() => {
            admission_patch(raw, &admitted).unwrap_or_else(|deny| deny)
        }
        Ok(_) => reject(errs),
        Err(Rejection(more)) => {
            errs.extend(more);
            reject(errs)
        }
    }
}
