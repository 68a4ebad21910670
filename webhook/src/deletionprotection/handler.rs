//! The DELETE admission handlers of deletion protection: upstream's `/validate-namespace`,
//! `/validate-customresourcedefinition`, `/validate-service`, `/validate-ingress`,
//! `/validate-apps-{deployment,replicaset,statefulset}`, and the DELETE branch of the Kruise
//! workloads' validating paths (CloneSet, Advanced StatefulSet, Advanced DaemonSet), which the
//! server runs here before the kind's own validation.

use kube::core::admission::Operation;
use serde_json::Value;

use super::{Counts, CrdResource, Decision, Lookup, ProtectionLookup, Target, decide};
use crate::json::get;
use crate::metrics::Protected;
use crate::paths;
use crate::review::{self, Outcome, Request};
use kruise_api::features::FeatureGates;
use kruise_api::keys;

/// The paths that exist for deletion protection alone.
pub const PATHS: &[&str] = &[
    paths::VALIDATE_NAMESPACE,
    paths::VALIDATE_CRD,
    paths::VALIDATE_SERVICE,
    paths::VALIDATE_INGRESS,
    paths::VALIDATE_APPS_DEPLOYMENT,
    paths::VALIDATE_APPS_REPLICASET,
    paths::VALIDATE_APPS_STATEFULSET,
];

/// The Kruise workloads' validating paths, whose DELETE requests are answered here.
const WORKLOAD_PATHS: &[&str] = &[
    paths::VALIDATE_CLONESET,
    paths::VALIDATE_CLONESET_V1ALPHA1,
    paths::VALIDATE_CLONESET_V1BETA1,
    paths::VALIDATE_STATEFULSET,
    paths::VALIDATE_DAEMONSET,
];

/// Answers `body` when `path` is one of [`PATHS`], or a Kruise workload's validating path and
/// the request a DELETE; `None` leaves the request to the path's other handler.
pub async fn admit<C: ProtectionLookup>(
    path: &str,
    body: &[u8],
    cluster: &C,
    gates: &FeatureGates,
) -> Option<Vec<u8>> {
    let ours = PATHS.contains(&path) || (WORKLOAD_PATHS.contains(&path) && is_delete(body));
    if !ours {
        return None;
    }
    Some(review::admit_async(body, |req| check(req, cluster, gates)).await)
}

/// Whether the review is a DELETE, read without decoding the objects.
fn is_delete(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Review {
        request: Option<Op>,
    }
    #[derive(serde::Deserialize)]
    struct Op {
        operation: Option<String>,
    }
    serde_json::from_slice::<Review>(body)
        .ok()
        .and_then(|r| r.request?.operation)
        .is_some_and(|op| op == "DELETE")
}

/// One DELETE request: what it deletes, then [`decide`] with the counts it asks for.
pub async fn check<C: ProtectionLookup>(
    req: Request,
    cluster: &C,
    gates: &FeatureGates,
) -> Outcome {
    if req.operation != Operation::Delete || req.sub_resource.is_some() {
        return Outcome::Allow;
    }
    // API servers before 1.16 send no oldObject on DELETE; upstream lets those through.
    let Some(old) = req.old_object.as_ref().filter(|o| o.is_object()) else {
        tracing::debug!(kind = %req.kind, name = %req.name, "DELETE without oldObject: not checked");
        return Outcome::Allow;
    };
    let Some(target) = target(&req, old) else {
        return Outcome::Allow;
    };
    let label =
        get(old, &["metadata", "labels", keys::DELETE_PROTECTION_LABEL]).and_then(Value::as_str);
    let deleting = get(old, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null());
    let mut counts = Counts::default();
    // Each count is asked for once at most: three rounds and a last answer.
    for _ in 0..4 {
        match decide(&target, label, deleting, gates, &counts) {
            Decision::Allow => return Outcome::Allow,
            Decision::Refuse(message) => {
                tracing::info!(kind = %req.kind, namespace = ?req.namespace, name = %req.name,
                    %message, "deletion protection refused a DELETE");
                if let Some(what) = counted_as(&target, &req) {
                    cluster.refused(what, &req.username);
                }
                return Outcome::forbidden(message);
            }
            Decision::Need(lookup) => {
                let count = match &lookup {
                    Lookup::ActivePods(ns) => cluster.active_pods(ns).await,
                    Lookup::BoundPvcs(ns) => cluster.bound_pvcs(ns).await,
                    Lookup::ActiveObjects(r) => cluster.active_objects(r).await,
                };
                counts.record(&lookup, count);
            }
        }
    }
    Outcome::forbidden("deletion protection could not decide; retry")
}

/// Which upstream counter a refusal of `target` goes to (Services and Ingresses have none).
fn counted_as<'a>(target: &'a Target, req: &'a Request) -> Option<Protected<'a>> {
    Some(match target {
        Target::Namespace { name } => Protected::Namespace(name),
        Target::Crd { .. } => Protected::Crd(&req.name),
        Target::Workload { kind, .. } => Protected::Workload(
            kind,
            req.namespace.as_deref().unwrap_or_default(),
            &req.name,
        ),
        Target::AlwaysOnly => return None,
    })
}

/// What the request deletes, by its kind; `None` for kinds deletion protection leaves alone
/// (upstream's handlers admit those).
fn target(req: &Request, old: &Value) -> Option<Target> {
    let replicas = || get(old, &["spec", "replicas"]).and_then(Value::as_i64);
    let workload = |kind: &str| Target::Workload {
        kind: kind.to_owned(),
        replicas: replicas(),
    };
    let kind = req.kind.as_str();
    Some(match (req.group.as_str(), kind) {
        ("", "Namespace") => Target::Namespace {
            name: get(old, &["metadata", "name"])
                .and_then(Value::as_str)
                .unwrap_or(&req.name)
                .to_owned(),
        },
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Target::Crd {
            resource: crd_resource(old),
        },
        ("", "Service") | ("networking.k8s.io", "Ingress") => Target::AlwaysOnly,
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet") => workload(kind),
        (keys::APPS_GROUP, "CloneSet" | "StatefulSet" | "DaemonSet") => workload(kind),
        _ => return None,
    })
}

/// The CRD's storage version and names (upstream lists the storage version's objects).
fn crd_resource(crd: &Value) -> Option<CrdResource> {
    let spec = get(crd, &["spec"])?;
    let text = |path: &[&str]| get(spec, path).and_then(Value::as_str).map(str::to_owned);
    let version = get(spec, &["versions"])?
        .as_array()?
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))?
        .get("name")?
        .as_str()?
        .to_owned();
    Some(CrdResource {
        group: text(&["group"])?,
        version,
        plural: text(&["names", "plural"])?,
        kind: text(&["names", "kind"]).unwrap_or_default(),
    })
}
