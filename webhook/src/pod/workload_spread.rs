//! WorkloadSpread on Pods (upstream `pkg/webhook/pod/{mutating,validating}/workloadspread.go`
//! over `pkg/util/workloadspread`), the first slot of `/mutate-pod` and of `/validate-pod`:
//!
//! - at creation, a Pod of a workload some WorkloadSpread targets takes the first subset with
//!   room among the statuses of its revision (`versionedSubsetStatuses`, keyed by
//!   `pod-template-hash` for Deployments and ReplicaSets, `versionIgnored` otherwise); the
//!   place is reserved by recording the Pod in the subset's `creatingPods` with a
//!   conflict-checked status write (re-read and retried on conflict), so concurrent creates
//!   never overfill a subset; then the subset's affinity, tolerations and patch are injected
//!   and the choice recorded in `apps.kruise.io/matched-workloadspread`;
//! - at deletion or eviction, a Pod carrying that annotation is recorded in its subset's
//!   `deletingPods`, giving its place back at once;
//! - a StatefulSet's Pods (apps/v1 or Advanced) are placed by ordinal instead, as upstream: the
//!   first `maxReplicas` ordinals in the first open subset, and so on; nothing is reserved.
//!
//! A Pod whose controller is not a supported workload pays nothing; one that is pays a lookup
//! in the watch cache of its namespace's WorkloadSpreads.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kruise_api::apps::v1alpha1::{
    CustomWorkloadWhiteList, MatchedWorkloadSpread, WorkloadSpread, WorkloadSpreadSubset,
    is_builtin_target, pod_version, selects,
};
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::TargetReference;
use kube::core::admission::Operation;

use crate::crr::mutation::PodLookup;
use crate::podunavailablebudget::PubLookup;
use crate::review::{Outcome, Request};
use crate::workloadspread::subset::{
    Created, by_ordinal, inject as inject_subset, needs_replicas, record_delete, reserve_create,
    targets_statefulset,
};
use crate::workloadspread::{WsLookup, WsWrite};

/// Attempts of a status write against concurrent writers (upstream `retry.DefaultBackoff`).
const ATTEMPTS: usize = 5;

/// The pause before attempt `n + 1` after a conflict (upstream `retry.DefaultBackoff`: 10 ms
/// × 5ⁿ, 10 % jitter), so a burst of creates for one WorkloadSpread spreads out instead of
/// colliding again at once.
async fn back_off(n: usize) {
    if n + 1 >= ATTEMPTS {
        // No attempt follows.
        return;
    }
    let base = 10u64.saturating_mul(5u64.saturating_pow(u32::try_from(n).unwrap_or(u32::MAX)));
    let jitter = rand::random_range(0..=base / 10);
    tokio::time::sleep(std::time::Duration::from_millis(base + jitter)).await;
}

/// What the slot injects: the subset and the annotation's value.
#[derive(Clone, Debug, PartialEq)]
pub struct Injection {
    pub subset: WorkloadSpreadSubset,
    pub matched: MatchedWorkloadSpread,
}

/// Upstream `matchReference`: the Pod controllers a WorkloadSpread may sit above.
fn supported_owner(o: &OwnerReference) -> bool {
    let group = o.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match o.kind.as_str() {
        "CloneSet" => group == keys::APPS_GROUP,
        "ReplicaSet" => group == "apps",
        "Job" => group == "batch",
        "StatefulSet" => group == "apps" || group == keys::APPS_GROUP,
        _ => false,
    }
}

fn active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// How many owners up from a Pod's own controller a custom workload is looked for.
const MAX_OWNER_DEPTH: usize = 4;

fn reference(o: &OwnerReference) -> TargetReference {
    TargetReference {
        api_version: o.api_version.clone(),
        kind: o.kind.clone(),
        name: o.name.clone(),
    }
}

/// The custom workload whitelist; empty (custom kinds not spread) when it cannot be read.
async fn read_whitelist<C: WsLookup>(cluster: &C) -> CustomWorkloadWhiteList {
    cluster.ws_whitelist().await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot read the custom workload whitelist");
        CustomWorkloadWhiteList::default()
    })
}

/// The WorkloadSpread targeting the Pod's workload (upstream `isReferenceEqual`: a ReplicaSet
/// is looked through to its Deployment when a WorkloadSpread targets a Deployment; for a kind
/// of the `kruise-configuration` whitelist the owner chain is walked up, through the kinds the
/// whitelist lists, to the targeted workload).
async fn matching<C: WsLookup + PubLookup>(
    pod: &Pod,
    namespace: &str,
    cluster: &C,
) -> Option<WorkloadSpread> {
    let owner = controller_of(pod)?;
    let builtin = supported_owner(owner);
    let spreads = match cluster.workload_spreads(namespace).await {
        Ok(s) if s.is_empty() => return None,
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, namespace, "cannot list WorkloadSpreads; Pod not spread");
            return None;
        }
    };
    let custom_wanted = spreads.iter().any(|w| {
        w.spec
            .target_reference
            .as_ref()
            .is_some_and(|t| !is_builtin_target(&t.api_version, &t.kind))
    });
    if !builtin && !custom_wanted {
        return None;
    }
    // Read only when a custom kind can be involved: an owner that is not built in, or an owner
    // chain to walk up; a Pod its own built-in workload's WorkloadSpread takes never pays it.
    let mut whitelist = None;
    if !builtin {
        let list = read_whitelist(cluster).await;
        if !list.owns_pods(&owner.api_version, &owner.kind) {
            return None;
        }
        whitelist = Some(list);
    }
    let labels = pod.metadata.labels.as_ref();
    let targets = |r: &TargetReference| {
        spreads.iter().find(|w| {
            w.metadata.deletion_timestamp.is_none()
                && w.spec
                    .target_reference
                    .as_ref()
                    .is_some_and(|t| t.same_workload(r))
                && selects(w.spec.target_filter.as_ref(), labels)
        })
    };
    if let Some(w) = targets(&reference(owner)) {
        return Some(w.clone());
    }
    let wants_deployment = spreads.iter().any(|w| {
        w.spec
            .target_reference
            .as_ref()
            .is_some_and(|t| t.kind == "Deployment")
    });
    if owner.kind == "ReplicaSet" && wants_deployment {
        match cluster.workload_of(namespace, owner).await {
            Ok(Some(d)) if d.kind == "Deployment" => {
                if let Some(w) = targets(&d) {
                    return Some(w.clone());
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "cannot find the Deployment of a new Pod");
                return None;
            }
        }
    }
    if !custom_wanted {
        return None;
    }
    let whitelist = match whitelist {
        Some(w) => w,
        None => read_whitelist(cluster).await,
    };
    let supported =
        |o: &OwnerReference| supported_owner(o) || whitelist.owns_pods(&o.api_version, &o.kind);
    let mut current = owner.clone();
    for _ in 0..MAX_OWNER_DEPTH {
        let next = match cluster.owner_controller(namespace, &current).await {
            Ok(Some(n)) => n,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read an owner of a new Pod");
                return None;
            }
        };
        if let Some(w) = targets(&reference(&next)) {
            return Some(w.clone());
        }
        if !supported(&next) {
            return None;
        }
        current = next;
    }
    None
}

/// The `/mutate-pod` read-and-reserve step (upstream `HandlePodCreation`): `Ok(None)` when no
/// WorkloadSpread concerns the Pod or every subset is full; a refusal when the reservation
/// could not be written (the workload's controller retries the create).
pub async fn injection_for<C: WsLookup + PubLookup>(
    req: &Request,
    pod: &Pod,
    cluster: &C,
    gates: &FeatureGates,
) -> Result<Option<Injection>, Outcome> {
    if !gates.enabled(Gate::WorkloadSpread) || !active(pod) {
        return Ok(None);
    }
    let Some(ns) = req.namespace.as_deref() else {
        return Ok(None);
    };
    let Some(mut ws) = matching(pod, ns, cluster).await else {
        return Ok(None);
    };
    let pod_name = pod.metadata.name.as_deref().filter(|n| !n.is_empty());
    if targets_statefulset(&ws) {
        return Ok(by_ordinal(&ws, pod_name.unwrap_or_default()).and_then(|m| found(&ws, m)));
    }
    let ws_name = ws.metadata.name.clone().unwrap_or_default();
    let version = pod_version(pod);
    let generated = random_uuid();
    let mut replicas = None;
    for attempt in 0..ATTEMPTS {
        if replicas.is_none() && needs_replicas(&ws, &version) {
            replicas = target_replicas(&ws, cluster)
                .await
                .map_err(Outcome::forbidden)?;
        }
        let now = Time(Timestamp::now());
        let created = reserve_create(
            &mut ws,
            &version,
            pod_name,
            replicas,
            || generated.clone(),
            now,
        );
        let matched = match created {
            Ok(Created::Reserved(m)) => m,
            Ok(Created::Recorded(m)) => return Ok(found(&ws, m)),
            Ok(Created::NoSubset) => return Ok(None),
            Err(e) => return Err(Outcome::forbidden(e.to_string())),
        };
        if req.dry_run {
            return Ok(found(&ws, matched));
        }
        match cluster.write_workload_spread_status(&ws).await {
            Ok(WsWrite::Written) => {
                tracing::debug!(workloadspread = %ws_name, subset = %matched.subset, "reserved a subset for a new Pod");
                return Ok(found(&ws, matched));
            }
            Ok(WsWrite::Gone) => return Ok(None),
            Ok(WsWrite::Conflict) => {
                back_off(attempt).await;
                match cluster.workload_spread(ns, &ws_name).await {
                    Ok(Some(fresh)) => ws = fresh,
                    Ok(None) => return Ok(None),
                    Err(e) => return Err(Outcome::forbidden(e)),
                }
            }
            Err(e) => return Err(Outcome::forbidden(e)),
        }
    }
    Err(Outcome::forbidden(format!(
        "Timeout: couldn't update WorkloadSpread {ws_name} due to conflicts"
    )))
}

/// The replicas of the workload `ws` targets, for a percentage cap without a status yet.
async fn target_replicas<C: WsLookup>(
    ws: &WorkloadSpread,
    cluster: &C,
) -> Result<Option<i32>, String> {
    cluster.workload_replicas(ws).await
}

/// A random (version 4) UUID, as upstream's `uuid.NewUUID()` names a Pod that has no name yet.
fn random_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn found(ws: &WorkloadSpread, matched: MatchedWorkloadSpread) -> Option<Injection> {
    let subset = ws
        .spec
        .subsets
        .iter()
        .find(|s| s.name == matched.subset)?
        .clone();
    Some(Injection { subset, matched })
}

/// Applies the injection (the `/mutate-pod` slot); whether it changed the Pod.
pub fn inject(pod: &mut Pod, injection: Option<&Injection>) -> Result<bool, Outcome> {
    let Some(inj) = injection else {
        return Ok(false);
    };
    inject_subset(pod, &inj.subset, &inj.matched)
        .map(|()| true)
        .map_err(|e| {
            Outcome::bad_request(format!("cannot apply the WorkloadSpread subset patch: {e}"))
        })
}

/// The `/validate-pod` slot (upstream `workloadSpreadValidatingPod`): records a delete or an
/// eviction of a spread Pod in its subset's `deletingPods`. Never refuses the operation for
/// the budget's sake; refuses only when the record cannot be written, as upstream.
pub async fn validate<C: WsLookup + PodLookup>(
    req: &Request,
    dry_run: bool,
    cluster: &C,
    gates: &FeatureGates,
) -> Outcome {
    if !gates.enabled(Gate::WorkloadSpread) || dry_run {
        return Outcome::Allow;
    }
    let ns = req.namespace.clone().unwrap_or_default();
    let pod: Pod = match (req.operation.clone(), req.sub_resource.as_deref()) {
        (Operation::Delete, None) => {
            match req
                .old_object
                .as_ref()
                .and_then(|o| crate::json::typed(o).ok())
            {
                Some(p) => p,
                None => return Outcome::Allow,
            }
        }
        (Operation::Create, Some("eviction")) => match cluster.pod(&ns, &req.name).await {
            Ok(Some(p)) => p,
            _ => return Outcome::Allow,
        },
        _ => return Outcome::Allow,
    };
    let Some(matched) = MatchedWorkloadSpread::of(pod.metadata.annotations.as_ref()) else {
        return Outcome::Allow;
    };
    if !active(&pod) || controller_of(&pod).is_none() {
        return Outcome::Allow;
    }
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let version = pod_version(&pod);
    let mut replicas = None;
    for attempt in 0..ATTEMPTS {
        let mut ws = match cluster.workload_spread(&ns, &matched.name).await {
            Ok(Some(w)) => w,
            Ok(None) => return Outcome::Allow,
            Err(e) => return Outcome::forbidden(e),
        };
        // A StatefulSet's Pods are placed by ordinal: nothing is reserved, nothing given back.
        if targets_statefulset(&ws) {
            return Outcome::Allow;
        }
        if replicas.is_none() && needs_replicas(&ws, &version) {
            replicas = match target_replicas(&ws, cluster).await {
                Ok(r) => r,
                Err(e) => return Outcome::forbidden(e),
            };
        }
        let now = Time(Timestamp::now());
        match record_delete(&mut ws, &version, &pod_name, &matched.subset, replicas, now) {
            Ok(true) => {}
            // Nothing to record, or a percentage cap against a workload that is gone.
            Ok(false) | Err(_) => return Outcome::Allow,
        }
        match cluster.write_workload_spread_status(&ws).await {
            Ok(WsWrite::Written | WsWrite::Gone) => return Outcome::Allow,
            Ok(WsWrite::Conflict) => back_off(attempt).await,
            Err(e) => return Outcome::forbidden(e),
        }
    }
    Outcome::forbidden(format!(
        "Timeout: couldn't update WorkloadSpread {} due to conflicts",
        matched.name
    ))
}
