//! ContainerRecreateRequest admission, after upstream's `pkg/webhook/containerrecreaterequest`.
//!
//! On CREATE the mutating handler ([`mutate`]) GETs the request's Pod and, through the pure
//! [`admit`], defaults the strategy, stamps the `crr.apps.kruise.io/{active,node-name,pod-uid}`
//! labels and copies each container's preStop, ports and current status (`statusContext`) from
//! the Pod. The validating handler ([`validate`]) keeps the spec and the Pod labels immutable
//! once admitted. The manager's CRR controller applies [`admit`] itself to requests created while
//! the webhook was off (`--disable-webhook`), which is why it is pure and public.
//!
//! Every problem found is reported, not just the first, each naming the field and the value.

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::apps::v1beta1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainerContext,
    ContainerRecreateRequestFailurePolicyType, ContainerRecreateRequestSpec, ProbeHandler,
};
use kruise_api::keys;
use kube::core::admission::Operation;
use serde_json::{Map, Value, json};

use crate::review::{Outcome, Request, diff};

/// Smallest accepted `activeDeadlineSeconds`.
pub const MIN_DEADLINE_SECONDS: i64 = 3;

const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];

/// One reason a request cannot be admitted; the text is what a person sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdmitError {
    /// `spec.podName` is empty.
    #[error("spec.podName: Required value: podName can not be empty")]
    NoPodName,
    /// `spec.containers` is empty.
    #[error("spec.containers: Required value: containers list can not be empty")]
    NoContainers,
    /// A container entry without a name.
    #[error("spec.containers[{index}].name: Required value: container name can not be empty")]
    NoContainerName {
        /// Index in `spec.containers`.
        index: usize,
    },
    /// `activeDeadlineSeconds` below [`MIN_DEADLINE_SECONDS`].
    #[error(
        "spec.activeDeadlineSeconds: Invalid value: {0}: can not be less than {MIN_DEADLINE_SECONDS}s"
    )]
    DeadlineTooShort(i64),
    /// A negative grace period.
    #[error("spec.strategy.{field}: Invalid value: {value}: must be a non-negative integer")]
    Negative {
        /// Field under `spec.strategy`.
        field: &'static str,
        /// The value given.
        value: i64,
    },
    /// A failure policy other than Fail or Ignore.
    #[error(
        "spec.strategy.failurePolicy: Unsupported value: {0}: supported values: \"Fail\", \"Ignore\""
    )]
    UnknownFailurePolicy(String),
    /// The same container listed twice.
    #[error(
        "spec.containers[{index}].name: Duplicate value: {name:?}: can not recreate a container more than once"
    )]
    Duplicate {
        /// Index of the second occurrence.
        index: usize,
        /// Container name.
        name: String,
    },
    /// preStop, ports or statusContext given by the user.
    #[error(
        "spec.containers[{index}]: Forbidden: preStop, ports and statusContext of container {name:?} are read-only (copied from the Pod)"
    )]
    ReadOnlyFields {
        /// Index in `spec.containers`.
        index: usize,
        /// Container name.
        name: String,
    },
    /// The Pod does not exist.
    #[error("spec.podName: Not found: Pod {pod:?} not found in namespace {namespace:?}")]
    PodNotFound {
        /// Namespace of the request.
        namespace: String,
        /// `spec.podName`.
        pod: String,
    },
    /// The Pod has finished or is being deleted.
    #[error(
        "Pod {pod:?} is not active ({why}): not allowed to recreate containers in an inactive Pod"
    )]
    InactivePod {
        /// Pod name.
        pod: String,
        /// Its phase, or that it is being deleted.
        why: String,
    },
    /// The Pod is not on a node yet.
    #[error(
        "Pod {pod:?} is pending (not scheduled to a node yet): not allowed to recreate containers in a pending Pod"
    )]
    PendingPod {
        /// Pod name.
        pod: String,
    },
    /// The Pod has no container of that name.
    #[error(
        "spec.containers[{index}].name: Not found: container {name:?} not found in Pod {pod:?} (its containers: {available})"
    )]
    NoContainer {
        /// Index in `spec.containers`.
        index: usize,
        /// Container name.
        name: String,
        /// Pod name.
        pod: String,
        /// The Pod's container names, comma separated.
        available: String,
    },
    /// The kubelet has not reported the container yet.
    #[error(
        "spec.containers[{index}].name: container {name:?} has no status in Pod {pod:?} yet (not reported by the kubelet)"
    )]
    NoStatus {
        /// Index in `spec.containers`.
        index: usize,
        /// Container name.
        name: String,
        /// Pod name.
        pod: String,
    },
    /// The container has not been created yet.
    #[error(
        "spec.containers[{index}].name: container {name:?} of Pod {pod:?} has no containerID yet (not started)"
    )]
    NoContainerId {
        /// Index in `spec.containers`.
        index: usize,
        /// Container name.
        name: String,
        /// Pod name.
        pod: String,
    },
}

/// Every reason a request was refused (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection(pub Vec<AdmitError>);

impl fmt::Display for Rejection {
    /// Like apimachinery's aggregate: one error as is, several in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                let parts: Vec<String> = many.iter().map(ToString::to_string).collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

impl std::error::Error for Rejection {}

/// Whether the request already carries what [`admit`] adds (so neither the webhook nor the
/// controller has to do it again).
pub fn is_admitted(crr: &ContainerRecreateRequest) -> bool {
    let labels = crr.metadata.labels.as_ref();
    let has = |k: &str| labels.is_some_and(|l| l.contains_key(k));
    has(keys::CRR_POD_UID_LABEL)
        && has(keys::CRR_NODE_NAME_LABEL)
        && crr
            .spec
            .containers
            .iter()
            .all(|c| c.status_context.is_some())
}

/// What is wrong with the spec alone (no Pod needed).
pub fn spec_errors(spec: &ContainerRecreateRequestSpec) -> Vec<AdmitError> {
    let mut errs = Vec::new();
    if spec.pod_name.is_empty() {
        errs.push(AdmitError::NoPodName);
    }
    if spec.containers.is_empty() {
        errs.push(AdmitError::NoContainers);
    }
    if let Some(d) = spec
        .active_deadline_seconds
        .filter(|d| *d < MIN_DEADLINE_SECONDS)
    {
        errs.push(AdmitError::DeadlineTooShort(d));
    }
    if let Some(s) = &spec.strategy {
        let graces = [
            (
                "terminationGracePeriodSeconds",
                s.termination_grace_period_seconds,
            ),
            ("unreadyGracePeriodSeconds", s.unready_grace_period_seconds),
        ];
        for (field, v) in graces {
            if let Some(value) = v.filter(|v| *v < 0) {
                errs.push(AdmitError::Negative { field, value });
            }
        }
    }
    let mut seen = BTreeSet::new();
    for (index, c) in spec.containers.iter().enumerate() {
        if c.name.is_empty() {
            errs.push(AdmitError::NoContainerName { index });
        } else if !seen.insert(c.name.as_str()) {
            errs.push(AdmitError::Duplicate {
                index,
                name: c.name.clone(),
            });
        }
    }
    errs
}

fn inactive_reason(pod: &Pod) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Some("it is being deleted".to_owned());
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    match phase {
        Some(p @ ("Succeeded" | "Failed")) => Some(format!("phase {p}")),
        _ => None,
    }
}

/// The request as the webhook stores it, or every reason it cannot be admitted.
pub fn admit(
    crr: &ContainerRecreateRequest,
    pod: &Pod,
) -> Result<ContainerRecreateRequest, Rejection> {
    let mut errs = spec_errors(&crr.spec);
    let mut out = crr.clone();
    let pod_name = crr.spec.pod_name.clone();
    let spec = pod.spec.clone().unwrap_or_default();
    let node = spec.node_name.clone().unwrap_or_default();
    if let Some(why) = inactive_reason(pod) {
        errs.push(AdmitError::InactivePod {
            pod: pod_name.clone(),
            why,
        });
    } else if node.is_empty() {
        errs.push(AdmitError::PendingPod {
            pod: pod_name.clone(),
        });
    }
    let strategy = out.spec.strategy.get_or_insert_with(Default::default);
    strategy
        .failure_policy
        .get_or_insert(ContainerRecreateRequestFailurePolicyType::Fail);
    if strategy.termination_grace_period_seconds.is_none() {
        strategy.termination_grace_period_seconds = spec.termination_grace_period_seconds;
    }
    let labels = out.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(keys::CRR_ACTIVE_LABEL.into(), "true".into());
    labels.insert(keys::CRR_NODE_NAME_LABEL.into(), node);
    labels.insert(
        keys::CRR_POD_UID_LABEL.into(),
        pod.metadata.uid.clone().unwrap_or_default(),
    );
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let available = || {
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        names.join(", ")
    };
    for (index, c) in out.spec.containers.iter_mut().enumerate() {
        if c.pre_stop.is_some() || !c.ports.is_empty() || c.status_context.is_some() {
            errs.push(AdmitError::ReadOnlyFields {
                index,
                name: c.name.clone(),
            });
            continue;
        }
        if c.name.is_empty() {
            continue;
        }
        let Some(pc) = spec.containers.iter().find(|p| p.name == c.name) else {
            errs.push(AdmitError::NoContainer {
                index,
                name: c.name.clone(),
                pod: pod_name.clone(),
                available: available(),
            });
            continue;
        };
        let Some(st) = statuses.iter().find(|s| s.name == c.name) else {
            errs.push(AdmitError::NoStatus {
                index,
                name: c.name.clone(),
                pod: pod_name.clone(),
            });
            continue;
        };
        let id = st.container_id.clone().unwrap_or_default();
        if id.is_empty() {
            errs.push(AdmitError::NoContainerId {
                index,
                name: c.name.clone(),
                pod: pod_name.clone(),
            });
            continue;
        }
        if let Some(h) = pc.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
            c.pre_stop = Some(ProbeHandler {
                exec: h.exec.clone(),
                http_get: h.http_get.clone(),
                tcp_socket: h.tcp_socket.clone(),
            });
            // Named ports of an httpGet hook resolve against the container's ports.
            if h.http_get.is_some() {
                c.ports = pc.ports.clone().unwrap_or_default();
            }
        }
        c.status_context = Some(ContainerRecreateRequestContainerContext {
            container_id: id,
            restart_count: st.restart_count,
        });
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(Rejection(errs))
    }
}

// ---------------------------------------------------------------------------------------------
// Handlers
// ---------------------------------------------------------------------------------------------

/// Where the mutating handler finds the request's Pod.
pub trait PodLookup: Sync {
    /// The Pod; `Ok(None)` when it does not exist, `Err` with why it could not be read.
    fn pod(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Pod>, String>> + Send;
}

/// Pods read from (and dry-run created through, see [`crate::cloneset::template`]) the API
/// server. A call gives up after `timeout`, shorter than the webhook's own, so the API server
/// relays our reason instead of a bare webhook timeout.
#[derive(Clone)]
pub struct ApiPods {
    /// `None` when the server runs without a cluster (tests): every lookup fails.
    pub client: Option<kube::Client>,
    /// Bound on one call.
    pub timeout: Duration,
    /// Whether CloneSet templates are dry-run as Pods ([`crate::WebhookConfig::template_dry_run`]).
    pub template_dry_run: bool,
    /// Where SidecarSets are read once it has loaded (they are listed before that, and when
    /// `None`).
    pub sidecar_sets: Option<crate::sidecarset_cache::SidecarSetCache>,
}

impl PodLookup for ApiPods {
    async fn pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, String> {
        let Some(client) = &self.client else {
            return Err("the webhook has no Kubernetes client".to_owned());
        };
        let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), namespace);
        match tokio::time::timeout(self.timeout, api.get_opt(name)).await {
            Ok(res) => res.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "no answer from the API server within {:?}",
                self.timeout
            )),
        }
    }
}

fn object(req: &Request) -> Result<&Value, Outcome> {
    match &req.object {
        Some(o) if o.is_object() => Ok(o),
        Some(_) => Err(Outcome::bad_request("object must be a JSON object")),
        None => Err(Outcome::bad_request("request carries no object")),
    }
}

/// Decodes the parts of a request we use. A failure policy we do not know is reported (and left
/// out of the decode, so the rest can still be checked); a wrongly typed field is a 400 naming it.
fn decode(obj: &Value) -> Result<(ContainerRecreateRequest, Vec<AdmitError>), Outcome> {
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

fn reject(errs: Vec<AdmitError>) -> Outcome {
    Outcome::invalid(Rejection(errs).to_string())
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

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// Top-level spec fields that differ between two raw specs.
fn changed_spec_fields(old: &Value, new: &Value) -> Vec<String> {
    let empty = Map::new();
    let o = old.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let n = new.get("spec").and_then(Value::as_object).unwrap_or(&empty);
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    keys.into_iter()
        .filter(|k| o.get(*k) != n.get(*k))
        .cloned()
        .collect()
}

/// `/validate-apps-kruise-io-v1alpha1-containerrecreaterequest`: the spec's rules on CREATE;
/// on UPDATE, once admitted, the spec, the pod-uid and node-name labels and the unready-acquired
/// annotation can not change.
pub fn validate(req: &Request) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let raw = match object(req) {
        Ok(o) => o,
        Err(o) => return o,
    };
    let (crr, mut errs) = match decode(raw) {
        Ok(x) => x,
        Err(o) => return o,
    };
    if matches!(req.operation, Operation::Create) {
        errs.extend(spec_errors(&crr.spec));
        return if errs.is_empty() {
            Outcome::Allow
        } else {
            reject(errs)
        };
    }
    let Some(old_raw) = req.old_object.as_ref().filter(|o| o.is_object()) else {
        return Outcome::bad_request("UPDATE carries no oldObject");
    };
    let old_meta: ObjectMeta = match serde_json::from_value(
        old_raw
            .get("metadata")
            .cloned()
            .unwrap_or_else(|| json!({})),
    ) {
        Ok(m) => m,
        Err(e) => return Outcome::bad_request(format!("oldObject.metadata: {e}")),
    };
    // Only an admitted request is frozen: one created while the webhook was off gets its
    // labels and container contexts from the controller through an update.
    let admitted = label(&old_meta, keys::CRR_POD_UID_LABEL).is_some();
    let changed = changed_spec_fields(old_raw, raw);
    let mut msgs: Vec<String> = Vec::new();
    if !changed.is_empty() {
        if admitted {
            msgs.push(format!(
                "spec: Forbidden: spec of ContainerRecreateRequest is immutable (changed: {})",
                changed.join(", ")
            ));
        } else {
            errs.extend(spec_errors(&crr.spec));
        }
    }
    msgs.extend(errs.iter().map(ToString::to_string));
    for key in [keys::CRR_POD_UID_LABEL, keys::CRR_NODE_NAME_LABEL] {
        let (was, now) = (label(&old_meta, key), label(&crr.metadata, key));
        if was.is_some() && was != now {
            msgs.push(format!(
                "metadata.labels[{key}]: Forbidden: label is immutable (was {:?}, now {:?})",
                was.unwrap_or_default(),
                now.unwrap_or_default()
            ));
        }
    }
    // The v1alpha1 form of the PreRecreateGrace condition.
    let key = keys::CRR_UNREADY_ACQUIRED_FINALIZER;
    let (was, now) = (annotation(&old_meta, key), annotation(&crr.metadata, key));
    if was.is_some() && was != now {
        msgs.push(format!(
            "metadata.annotations[{key}]: Forbidden: annotation is immutable once set"
        ));
    }
    match msgs.as_slice() {
        [] => Outcome::Allow,
        [one] => Outcome::invalid(one.clone()),
        many => Outcome::invalid(format!("[{}]", many.join(", "))),
    }
}

#[cfg(test)]
pub(crate) mod tests;
