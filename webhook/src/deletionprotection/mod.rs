//! Deletion protection: a DELETE of an object labelled `policy.kruise.io/delete-protection` is
//! refused while gate `ResourcesDeletionProtection` is on (upstream
//! `pkg/webhook/util/deletionprotection` and the DELETE handlers of Namespaces, CRDs, Services,
//! Ingresses, Deployments, ReplicaSets, StatefulSets, CloneSets and Advanced StatefulSets).
//!
//! [`decide`] is the whole rule, pure: the object's kind and label and the counts read so far go
//! in, and out comes allow, refuse (upstream's message, then what to do), or the next count it
//! needs. [`handler`] turns an AdmissionReview into that call and asks the cluster, through
//! [`ProtectionLookup`], for the counts one at a time, as upstream does (PVCs are counted only
//! once no active Pod is left).

pub mod handler;

use std::future::Future;

use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;

/// What is being deleted, with what upstream reads from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Deployment, ReplicaSet, StatefulSet, CloneSet, Advanced StatefulSet (and our Advanced
    /// DaemonSet, which has no replicas): `spec.replicas`, `None` when unset.
    Workload {
        /// The kind, for the message.
        kind: String,
        /// `spec.replicas`.
        replicas: Option<i64>,
    },
    /// A Namespace: its active Pods and Bound PVCs count.
    Namespace {
        /// Its name.
        name: String,
    },
    /// A CustomResourceDefinition: the objects of its storage version count.
    Crd {
        /// Where its objects are listed; `None` when it names no storage version.
        resource: Option<CrdResource>,
    },
    /// Service and Ingress honour `Always` only.
    AlwaysOnly,
}

/// The objects of a CRD, as upstream lists them: the storage version, every namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdResource {
    /// `spec.group`.
    pub group: String,
    /// The version with `storage: true`.
    pub version: String,
    /// `spec.names.plural`.
    pub plural: String,
    /// `spec.names.kind`.
    pub kind: String,
}

impl std::fmt::Display for CrdResource {
    /// Upstream's `%v` of the GroupVersionKind it lists (`group/version, Kind=…List`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}, Kind={}List", self.group, self.version, self.kind)
    }
}

/// A count [`decide`] needs before it can answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Pods of the namespace that are active (upstream `IsPodActive`: not Succeeded, not
    /// Failed, no deletionTimestamp).
    ActivePods(String),
    /// PVCs of the namespace that are Bound and have no deletionTimestamp.
    BoundPvcs(String),
    /// Objects of the CRD without a deletionTimestamp, in every namespace.
    ActiveObjects(CrdResource),
}

/// A count, or why it could not be read.
pub type Count = Result<u64, String>;

/// The counts read so far (`None`: not asked yet).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// [`Lookup::ActivePods`].
    pub active_pods: Option<Count>,
    /// [`Lookup::BoundPvcs`].
    pub bound_pvcs: Option<Count>,
    /// [`Lookup::ActiveObjects`].
    pub active_objects: Option<Count>,
}

impl Counts {
    /// Records the answer to `lookup`.
    pub fn record(&mut self, lookup: &Lookup, count: Count) {
        let slot = match lookup {
            Lookup::ActivePods(_) => &mut self.active_pods,
            Lookup::BoundPvcs(_) => &mut self.bound_pvcs,
            Lookup::ActiveObjects(_) => &mut self.active_objects,
        };
        *slot = Some(count);
    }
}

/// What [`decide`] concludes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let the deletion through.
    Allow,
    /// Refuse it (403) with this message.
    Refuse(String),
    /// Read this count, record it and ask again.
    Need(Lookup),
}

/// Where the handler reads the counts. The defaults fail, so that a cluster that cannot count
/// refuses a `Cascading` deletion rather than letting it through.
pub trait ProtectionLookup: Sync {
    /// See [`Lookup::ActivePods`].
    fn active_pods(&self, _namespace: &str) -> impl Future<Output = Count> + Send {
        std::future::ready(Err(NO_CLUSTER.to_owned()))
    }
    /// See [`Lookup::BoundPvcs`].
    fn bound_pvcs(&self, _namespace: &str) -> impl Future<Output = Count> + Send {
        std::future::ready(Err(NO_CLUSTER.to_owned()))
    }
    /// See [`Lookup::ActiveObjects`].
    fn active_objects(&self, _resource: &CrdResource) -> impl Future<Output = Count> + Send {
        std::future::ready(Err(NO_CLUSTER.to_owned()))
    }
    /// Counts a refusal ([`crate::metrics::ProtectionMetrics::deletion_refused`]).
    fn refused(&self, _what: Protected<'_>, _username: &str) {}
}

use crate::metrics::Protected;

const NO_CLUSTER: &str = "the webhook has no Kubernetes client";

/// Upstream's prefix of every refusal.
const FORBIDDEN: &str = "forbidden by ResourcesProtectionDeletion for";

/// Upstream's rule (`ValidateWorkloadDeletion`, `ValidateNamespaceDeletion`,
/// `ValidateCRDDeletion`, `ValidateServiceDeletion`, `ValidateIngressDeletion`). `label` is the
/// value of `policy.kruise.io/delete-protection`; `deleting` whether the object already has a
/// deletionTimestamp. Values other than `Always` and `Cascading` protect nothing, as upstream.
pub fn decide(
    target: &Target,
    label: Option<&str>,
    deleting: bool,
    gates: &FeatureGates,
    counts: &Counts,
) -> Decision {
    if !gates.enabled(Gate::ResourcesDeletionProtection) || deleting {
        return Decision::Allow;
    }
    let label_is = format!("{}={}", keys::DELETE_PROTECTION_LABEL, label.unwrap_or(""));
    match label {
        Some(keys::DELETE_PROTECTION_ALWAYS) => Decision::Refuse(format!(
            "{FORBIDDEN} {label_is}; to delete it, first remove the label {}",
            keys::DELETE_PROTECTION_LABEL
        )),
        Some(keys::DELETE_PROTECTION_CASCADING) => cascading(target, &label_is, gates, counts),
        _ => Decision::Allow,
    }
}

fn cascading(target: &Target, label_is: &str, gates: &FeatureGates, counts: &Counts) -> Decision {
    let or_unlabel = format!("or remove the label {}", keys::DELETE_PROTECTION_LABEL);
    match target {
        Target::AlwaysOnly => Decision::Allow,
        Target::Workload { kind, replicas } => match replicas {
            Some(n) if *n > 0 => Decision::Refuse(format!(
                "{FORBIDDEN} {label_is} and replicas {n}>0; to delete the {kind}, first scale \
                 spec.replicas to 0 {or_unlabel}"
            )),
            _ => Decision::Allow,
        },
        Target::Namespace { name } => {
            let Some(pods) = &counts.active_pods else {
                return Decision::Need(Lookup::ActivePods(name.clone()));
            };
            match pods {
                Err(e) => return unknown(format!("{FORBIDDEN} list pods error: {e}"), label_is),
                Ok(n) if *n > 0 => {
                    return Decision::Refuse(format!(
                        "{FORBIDDEN} {label_is} and active pods {n}>0; to delete namespace \
                         {name}, first delete its Pods (or scale their workloads to 0) \
                         {or_unlabel}"
                    ));
                }
                Ok(_) => {}
            }
            let Some(pvcs) = &counts.bound_pvcs else {
                return Decision::Need(Lookup::BoundPvcs(name.clone()));
            };
            match pvcs {
                Err(e) => unknown(format!("{FORBIDDEN} list pvc error: {e}"), label_is),
                Ok(n) if *n > 0 => Decision::Refuse(format!(
                    "{FORBIDDEN} {label_is} and \"Bound\" status pvc {n}>0; to delete namespace \
                     {name}, first delete its Bound PersistentVolumeClaims {or_unlabel}"
                )),
                Ok(_) => Decision::Allow,
            }
        }
        Target::Crd { resource } => {
            // Upstream refuses (rather than ignores) Cascading on a CRD while this gate is off.
            let gate = Gate::DeletionProtectionForCRDCascadingGate;
            if !gates.enabled(gate) {
                return Decision::Refuse(format!(
                    "feature-gate {gate} is not enabled; the CRD is labelled {label_is}, which \
                     needs it: to delete the CRD, first remove the label {} or turn the gate on",
                    keys::DELETE_PROTECTION_LABEL
                ));
            }
            let Some(resource) = resource else {
                return unknown(
                    "failed to list CRs: the CRD names no storage version".to_owned(),
                    label_is,
                );
            };
            let Some(objects) = &counts.active_objects else {
                return Decision::Need(Lookup::ActiveObjects(resource.clone()));
            };
            match objects {
                Err(e) => unknown(format!("failed to list CRs of {resource}: {e}"), label_is),
                Ok(n) if *n > 0 => Decision::Refuse(format!(
                    "{FORBIDDEN} {label_is} and active CRs {n}>0; to delete the CRD, first \
                     delete its objects (kubectl get {}.{} -A) {or_unlabel}",
                    resource.plural, resource.group
                )),
                Ok(_) => Decision::Allow,
            }
        }
    }
}

/// A count that could not be read refuses (fail closed, as upstream), saying why and what to do.
fn unknown(upstream: String, label_is: &str) -> Decision {
    Decision::Refuse(format!(
        "{upstream}; {label_is} protects it until the count can be read: retry, or remove the \
         label {}",
        keys::DELETE_PROTECTION_LABEL
    ))
}

#[cfg(test)]
mod tests;
