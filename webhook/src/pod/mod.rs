//! `/mutate-pod`: Pod CREATE mutation, one handler per file, run in upstream's fixed order.
//!
//! Upstream's `pkg/webhook/pod/mutating/pod_create_update_handler.go` (`Handle`) runs, after
//! the `KruisePodReady` readiness gate: WorkloadSpread → SidecarSet → container launch priority
//! → PodUnavailableBudget → PersistentPodState → the enhanced liveness probe → PodProbeMarker on
//! serverless Pods. The order matters: launch priority must see the
//! containers the SidecarSet step injected. [`MUTATING_ORDER`] is that order and
//! [`mutate_with`] runs exactly it; handlers not ported yet hold their slot as a no-op.
//!
//! `/validate-pod` (upstream `pkg/webhook/pod/validating/pod_create_update_handler.go`): Pod
//! UPDATE and DELETE and `pods/eviction` CREATE, through the handlers of [`VALIDATING_ORDER`]
//! ([`validate_pod`]).

pub mod enhanced_liveness;
pub mod launch_priority;
pub mod persistent_pod_state;
pub mod probe_marker;
pub mod readiness_gate;
mod sidecarset;
pub mod unavailable_budget;
pub mod workload_spread;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys::MATCHED_WORKLOADSPREAD_ANNOTATION;
use kruise_api::policy::v1alpha1::pubcontrol::related_budget_name_in;
use kube::core::admission::Operation;
use serde_json::Value;

use crate::configuration::scope::ScopeLookup;
use crate::crr::mutation::PodLookup;
use crate::persistentpodstate::PpsLookup;
use crate::podprobemarker::PpmLookup;
use crate::podunavailablebudget::PubLookup;
use crate::review::{Outcome, Request, diff};
use crate::sidecarset::SidecarSetLookup;
use crate::sidecarset::inject::InjectContext;
use crate::workloadspread::WsLookup;

/// One handler of `/mutate-pod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutatingHandler {
    /// Upstream `injectPodReadinessGate`: the `KruisePodReady` gate on Kruise-owned Pods.
    ReadinessGate,
    /// Upstream `workloadSpreadMutatingPod`: the subset reserved for the Pod.
    WorkloadSpread,
    /// Upstream `sidecarsetMutatingPod`: SidecarSet injection.
    SidecarSet,
    /// Upstream `containerLaunchPriorityInitialization`: the launch barrier env.
    LaunchPriority,
    /// Upstream `pubMutatingPod`: the related-PodUnavailableBudget annotation.
    PodUnavailableBudget,
    /// Upstream `persistentPodStateMutatingPod`: the recorded topology of a recreated
    /// StatefulSet Pod.
    PersistentPodState,
    /// Upstream `enhancedLivenessProbeWhenPodCreate` (gate `EnhancedLivenessProbe`): the
    /// liveness probes moved into an annotation.
    EnhancedLiveness,
    /// Upstream `podProbeMarkerMutatingPod` (gate `EnablePodProbeMarkerOnServerless`): the
    /// PodProbeMarkers' probes written for a serverless node's agent.
    PodProbeMarker,
}

/// Upstream's order of the `/mutate-pod` handlers; [`mutate_with`] runs them in this order.
pub const MUTATING_ORDER: &[MutatingHandler] = &[
    MutatingHandler::ReadinessGate,
    MutatingHandler::WorkloadSpread,
    MutatingHandler::SidecarSet,
    MutatingHandler::LaunchPriority,
    MutatingHandler::PodUnavailableBudget,
    MutatingHandler::PersistentPodState,
    MutatingHandler::EnhancedLiveness,
    MutatingHandler::PodProbeMarker,
];

/// One handler of `/validate-pod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidatingHandler {
    /// Upstream `workloadSpreadValidatingPod`: deletes and evictions recorded in `deletingPods`.
    WorkloadSpread,
    /// Upstream `podUnavailableBudgetValidatingPod` (UPDATE, DELETE, eviction CREATE).
    PodUnavailableBudget,
}

/// Upstream's order of the `/validate-pod` handlers; [`validate_pod`] runs them in this order.
pub const VALIDATING_ORDER: &[ValidatingHandler] = &[
    ValidatingHandler::WorkloadSpread,
    ValidatingHandler::PodUnavailableBudget,
];

/// What the handlers read besides the Pod.
#[derive(Debug, Clone, Default)]
pub struct PodContext {
    /// `KruisePodReadinessGate`: every Pod gets the `KruisePodReady` readiness gate, not only
    /// Pods of Kruise workloads.
    pub readiness_gate_for_all: bool,
    /// The SidecarSets (and what they need) the SidecarSet step injects.
    pub sidecars: InjectContext,
    /// The PodUnavailableBudget covering the Pod, if any (see [`unavailable_budget`]).
    pub related_budget: Option<String>,
    /// What the PersistentPodState slot injects, if any (see [`persistent_pod_state`]).
    pub persistent: Option<persistent_pod_state::Injection>,
    /// The WorkloadSpread subset reserved for the Pod, if any (see [`workload_spread`]).
    pub workload_spread: Option<workload_spread::Injection>,
    /// Mark the Pod as admitted by this webhook: the admission policy that refuses, while the
    /// manager is down, the Pods in its scope the webhook did not see looks for the mark
    /// (`configuration::scope`). Only Pods such a policy may cover are marked.
    pub mark_admitted: bool,
    /// `EnhancedLivenessProbe`: run the [`enhanced_liveness`] slot.
    pub enhanced_liveness: bool,
    /// `EnablePodProbeMarkerOnServerless`: the PodProbeMarkers whose probes the
    /// [`probe_marker`] slot writes, in order (empty with the gate off).
    pub probe_markers: Vec<kruise_api::apps::v1alpha1::PodProbeMarker>,
}

/// `/mutate-pod` as served: reads what the handlers need from `cluster` (the SidecarSets, the
/// revisions they pin, the namespace's labels), then runs them ([`mutate_with`]).
pub async fn mutate_pod<
    C: SidecarSetLookup + PubLookup + PpsLookup + WsLookup + PpmLookup + ScopeLookup,
>(
    req: Request,
    cluster: &C,
    gates: &FeatureGates,
) -> Outcome {
    if !is_pod_create(&req) {
        return Outcome::Allow;
    }
    let mut sidecars = match sidecarset::read_context(&req, cluster).await {
        Ok(c) => c,
        Err(refusal) => return refusal,
    };
    sidecars.sort_containers_by_name = gates.enabled(Gate::EnableSortSidecarContainerByName);
    // Decoded once for the lookups below; `mutate_with` decodes its own copy to mutate.
    let pod = req
        .object
        .as_ref()
        .and_then(|o| crate::json::typed::<Pod>(o).ok());
    // Upstream marks Pods only while one of the budget gates is on.
    let budgets_on = gates.enabled(Gate::PodUnavailableBudgetDeleteGate)
        || gates.enabled(Gate::PodUnavailableBudgetUpdateGate);
    let related_budget = match (budgets_on, &pod, &req.namespace) {
        (true, Some(pod), Some(ns)) => unavailable_budget::related_budget(pod, ns, cluster).await,
        _ => None,
    };
    // First: the reservation is written before anything else can refuse the Pod, as upstream.
    let workload_spread = match &pod {
        Some(pod) => match workload_spread::injection_for(&req, pod, cluster, gates).await {
            Ok(i) => i,
            Err(refusal) => return refusal,
        },
        None => None,
    };
    let persistent = match (&pod, &req.namespace) {
        (Some(pod), Some(ns)) => persistent_pod_state::injection_for(pod, ns, cluster).await,
        _ => None,
    };
    let probe_markers = match (&pod, &req.namespace) {
        (Some(pod), Some(ns)) if gates.enabled(Gate::EnablePodProbeMarkerOnServerless) => {
            // As upstream, a Pod whose markers cannot be read is refused: a serverless Pod
            // created without its probes would never be probed.
            match cluster.pod_probe_markers(ns).await {
                Ok(all) => probe_marker::markers_for(pod, &all)
                    .into_iter()
                    .cloned()
                    .collect(),
                Err(e) => return Outcome::internal(e),
            }
        }
        _ => Vec::new(),
    };
    let ctx = PodContext {
        readiness_gate_for_all: gates.enabled(Gate::KruisePodReadinessGate),
        sidecars,
        related_budget,
        persistent,
        workload_spread,
        mark_admitted: match (&pod, &req.namespace) {
            (Some(pod), Some(ns)) => cluster.must_mark(ns, pod),
            _ => false,
        },
        enhanced_liveness: gates.enabled(Gate::EnhancedLivenessProbe),
        probe_markers,
    };
    mutate_with(&req, &ctx)
}

/// Handles one decoded Pod admission request without SidecarSets (the server uses
/// [`mutate_pod`], which reads them and calls [`mutate_with`]).
pub fn mutate(req: &Request) -> Outcome {
    mutate_with(req, &PodContext::default())
}

fn is_pod_create(req: &Request) -> bool {
    req.operation == Operation::Create && req.resource == "pods" && req.sub_resource.is_none()
}

/// Handles one decoded Pod admission request: runs every handler of [`MUTATING_ORDER`] on the
/// Pod and answers with the patch of all their changes.
pub fn mutate_with(req: &Request, ctx: &PodContext) -> Outcome {
    if !is_pod_create(req) {
        return Outcome::Allow;
    }
    let Some(raw) = &req.object else {
        return Outcome::bad_request("pod CREATE request carries no object");
    };
    let mut pod: Pod = match crate::json::typed(raw) {
        Ok(p) => p,
        Err(e) => return Outcome::bad_request(format!("cannot decode Pod: {e}")),
    };
    // Diff against the re-encoded pod so only our own changes end up in the patch.
    let before = match serde_json::to_value(&pod) {
        Ok(v) => v,
        Err(e) => return Outcome::bad_request(format!("cannot encode Pod: {e}")),
    };
    let now = Time(jiff::Timestamp::now());
    let mut changed = false;
    for handler in MUTATING_ORDER {
        match run(*handler, &mut pod, ctx, &now) {
            Ok(c) => changed |= c,
            Err(refusal) => return refusal,
        }
    }
    // A real Pod always has metadata; the patch is a diff of re-encoded Pods, which must still
    // apply to an object sent without it.
    if ctx.mark_admitted && raw.get("metadata").is_some_and(Value::is_object) {
        changed |= pod
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                kruise_api::keys::POD_WEBHOOK_ADMITTED_ANNOTATION.to_owned(),
                "true".to_owned(),
            )
            .is_none();
    }
    if !changed {
        return Outcome::Allow;
    }
    match serde_json::to_value(&pod) {
        Ok(after) => Outcome::Patch(diff(&before, &after)),
        Err(e) => Outcome::bad_request(format!("cannot encode mutated Pod: {e}")),
    }
}

/// Runs one handler: whether it changed the Pod, or the refusal to answer with.
fn run(
    handler: MutatingHandler,
    pod: &mut Pod,
    ctx: &PodContext,
    now: &Time,
) -> Result<bool, Outcome> {
    match handler {
        MutatingHandler::ReadinessGate => Ok(readiness_gate::inject_readiness_gate(
            pod,
            ctx.readiness_gate_for_all,
        )),
        MutatingHandler::SidecarSet => sidecarset::mutate(pod, &ctx.sidecars, now),
        MutatingHandler::LaunchPriority => launch_priority::inject_launch_priority(pod)
            .map_err(|invalid| Outcome::invalid(invalid.to_string())),
        MutatingHandler::PodUnavailableBudget => {
            Ok(unavailable_budget::mark(pod, ctx.related_budget.as_deref()))
        }
        MutatingHandler::PersistentPodState => {
            Ok(persistent_pod_state::inject(pod, ctx.persistent.as_ref()))
        }
        MutatingHandler::WorkloadSpread => {
            workload_spread::inject(pod, ctx.workload_spread.as_ref())
        }
        MutatingHandler::EnhancedLiveness if ctx.enhanced_liveness => {
            enhanced_liveness::mutate(pod)
                .map_err(|e| Outcome::internal(format!("cannot back up the liveness probes: {e}")))
        }
        MutatingHandler::EnhancedLiveness => Ok(false),
        MutatingHandler::PodProbeMarker => {
            let markers: Vec<_> = ctx.probe_markers.iter().collect();
            probe_marker::inject(pod, &markers)
                .map_err(|e| Outcome::internal(format!("cannot encode the Pod's probes: {e}")))
        }
    }
}

/// The uid of a `/validate-pod` review every handler of [`VALIDATING_ORDER`] admits without
/// reading the Pods:
/// - an UPDATE (the WorkloadSpread handler judges only deletes and evictions) of a Pod that
///   names no budget in `kruise.io/related-pub` (the PodUnavailableBudget handler admits those,
///   its gate on or off);
/// - a DELETE of a Pod (not of a subresource) that names no budget and no WorkloadSpread in
///   `apps.kruise.io/matched-workloadspread` (the WorkloadSpread handler has nothing to record).
///
/// Every Pod write of every controller, and every Pod delete (the controllers' and then the
/// kubelet's), comes here, so this is read by one scan of the body that builds no JSON tree
/// and skips the Pods' other fields. `None` for any other review, or one that does not read as
/// expected: [`validate_pod`] then decides on the whole request.
pub fn admitted_unread(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Review {
        request: Option<Req>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Req {
        uid: String,
        operation: String,
        sub_resource: Option<String>,
        object: Option<Object>,
        old_object: Option<Object>,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Option<Metadata>,
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        annotations: Option<std::collections::BTreeMap<String, String>>,
    }
    let req = serde_json::from_slice::<Review>(body).ok()?.request?;
    let (pod, spread_matters) = match req.operation.as_str() {
        "UPDATE" => (req.object?, false),
        "DELETE" if req.sub_resource.as_deref().unwrap_or_default().is_empty() => {
            (req.old_object?, true)
        }
        _ => return None,
    };
    let annotations = pod.metadata.and_then(|m| m.annotations).unwrap_or_default();
    let named = related_budget_name_in(&annotations).is_some()
        || (spread_matters && annotations.contains_key(MATCHED_WORKLOADSPREAD_ANNOTATION));
    (!named).then_some(req.uid)
}

/// `/validate-pod` as served: every handler of [`VALIDATING_ORDER`] in turn; the first
/// refusal wins. `options` is the request's `options` (the delete or update options).
pub async fn validate_pod<C: PubLookup + PodLookup + WsLookup>(
    req: Request,
    options: Option<Value>,
    cluster: &C,
    gates: &FeatureGates,
) -> Outcome {
    let adm = unavailable_budget::Admission {
        options: options.as_ref(),
        gates,
    };
    for handler in VALIDATING_ORDER {
        let out = match handler {
            ValidatingHandler::WorkloadSpread => {
                let dry_run = req.dry_run || unavailable_budget::dry_run_in(options.as_ref());
                workload_spread::validate(&req, dry_run, cluster, gates).await
            }
            ValidatingHandler::PodUnavailableBudget => {
                unavailable_budget::validate(&req, &adm, cluster).await
            }
        };
        if out != Outcome::Allow {
            return out;
        }
    }
    Outcome::Allow
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unavailable_budget_tests;
