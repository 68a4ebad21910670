//! PodUnavailableBudget on Pods (upstream `pkg/webhook/pod/{mutating,validating}/
//! pod_unavailable_budget.go` and `pubcontrol.PodUnavailableBudgetValidatePod`):
//!
//! - at creation, the Pod is marked with the budget that covers it (`kruise.io/related-pub`);
//! - a delete, an eviction and (with `PodUnavailableBudgetUpdateGate`) an update that may make
//!   a marked Pod unavailable is charged to its budget: refused when nothing is allowed,
//!   otherwise recorded in the budget's status with a conflict-safe write.
//!
//! A Pod without the annotation pays nothing; one with it pays a read of its budget. Refused
//! deletes and updates are 403s with upstream's message; refused evictions are 429s, as
//! Kubernetes' own PodDisruptionBudget answers, so `kubectl drain` waits and retries instead of
//! giving up (a deliberate difference from upstream, which answers 403).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PubOperation;
use kruise_api::policy::v1alpha1::pubcontrol::{
    can_resize_in_place, charge, is_exempt, is_unavailable_changed, needs_charge,
    related_budget_name,
};
use kruise_api::selector;
use kube::core::admission::Operation;
use serde_json::Value;

use crate::crr::mutation::PodLookup;
use crate::podunavailablebudget::{PubLookup, StatusWrite};
use crate::review::{Outcome, Request};

/// Attempts of the charge against concurrent status writes (upstream's `ConflictRetry`).
const ATTEMPTS: usize = 4;

/// The budget covering a new Pod (upstream `GetPubForPod` of the mutating handler): the first
/// of its namespace that targets the Pod's workload, or whose selector matches its labels.
/// A failed lookup marks nothing (upstream logs it and lets the Pod through).
pub async fn related_budget<C: PubLookup>(
    pod: &Pod,
    namespace: &str,
    cluster: &C,
) -> Option<String> {
    let budgets = match cluster.budgets(namespace).await {
        Ok(b) if b.is_empty() => return None,
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, namespace, "cannot list PodUnavailableBudgets; Pod not marked");
            return None;
        }
    };
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    // The workload is looked up only when a budget targets one.
    let workload = match owner {
        Some(o) if budgets.iter().any(|b| b.spec.target_reference.is_some()) => {
            cluster.workload_of(namespace, o).await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "cannot find the workload of a new Pod");
                None
            })
        }
        _ => None,
    };
    let empty = Default::default();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    budgets
        .iter()
        .find(|b| match (&b.spec.target_reference, &workload) {
            (Some(target), Some(w)) => target.same_workload(w),
            _ => b
                .spec
                .selector
                .as_ref()
                .is_some_and(|s| !selector::is_empty(s) && selector::matches(s, labels)),
        })
        .and_then(|b| b.metadata.name.clone())
}

/// Sets the annotation (the `/mutate-pod` slot).
pub fn mark(pod: &mut Pod, budget: Option<&str>) -> bool {
    let Some(name) = budget else { return false };
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(keys::PUB_RELATED_ANNOTATION.to_owned(), name.to_owned());
    true
}

/// What `/validate-pod` reads besides the request: the request's options and the gates.
pub struct Admission<'a> {
    /// `request.options` (DeleteOptions or UpdateOptions).
    pub options: Option<&'a Value>,
    pub gates: &'a FeatureGates,
}

pub(crate) fn dry_run_in(options: Option<&Value>) -> bool {
    options
        .and_then(|o| o.get("dryRun"))
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

fn decode(v: Option<&Value>, what: &str) -> Result<Pod, Outcome> {
    let v = v.ok_or_else(|| Outcome::bad_request(format!("request carries no {what}")))?;
    crate::json::typed(v).map_err(|e| Outcome::bad_request(format!("cannot decode {what}: {e}")))
}

/// The PodUnavailableBudget slot of `/validate-pod` (upstream
/// `podUnavailableBudgetValidatingPod` under its gates).
pub async fn validate<C: PubLookup + PodLookup>(
    req: &Request,
    adm: &Admission<'_>,
    cluster: &C,
) -> Outcome {
    let (pod, op, dry_run) = match req.operation {
        Operation::Update if adm.gates.enabled(Gate::PodUnavailableBudgetUpdateGate) => {
            let new = match decode(req.object.as_ref(), "Pod") {
                Ok(p) => p,
                Err(o) => return o,
            };
            if !has_related(&new) {
                return Outcome::Allow;
            }
            let old = match decode(req.old_object.as_ref(), "old Pod") {
                Ok(p) => p,
                Err(o) => return o,
            };
            if !is_unavailable_changed(&old, &new) {
                return Outcome::Allow;
            }
            let op = if can_resize_in_place(&old, &new) {
                PubOperation::Resize
            } else {
                PubOperation::Update
            };
            (old, op, req.dry_run || dry_run_in(adm.options))
        }
        Operation::Delete if adm.gates.enabled(Gate::PodUnavailableBudgetDeleteGate) => {
            // No old object (very old API servers) or a subresource: nothing to judge.
            if req.sub_resource.is_some() || req.old_object.is_none() {
                return Outcome::Allow;
            }
            match decode(req.old_object.as_ref(), "Pod") {
                Ok(p) => (
                    p,
                    PubOperation::Delete,
                    req.dry_run || dry_run_in(adm.options),
                ),
                Err(o) => return o,
            }
        }
        Operation::Create
            if adm.gates.enabled(Gate::PodUnavailableBudgetDeleteGate)
                && req.sub_resource.as_deref() == Some("eviction") =>
        {
            let ns = req.namespace.clone().unwrap_or_default();
            let pod = match cluster.pod(&ns, &req.name).await {
                Ok(Some(p)) => p,
                // The API server answers 404 itself.
                Ok(None) => return Outcome::Allow,
                Err(e) => return Outcome::bad_request(e),
            };
            // policy/v1 and v1beta1 Evictions carry their DeleteOptions alike.
            let opts = req.object.as_ref().and_then(|o| o.get("deleteOptions"));
            (pod, PubOperation::Evict, req.dry_run || dry_run_in(opts))
        }
        _ => return Outcome::Allow,
    };
    if !has_related(&pod) {
        return Outcome::Allow;
    }
    let inplace_vertical = adm.gates.enabled(Gate::InPlacePodVerticalScaling);
    check_and_charge(&pod, op, dry_run, inplace_vertical, &req.username, cluster).await
}

fn has_related(pod: &Pod) -> bool {
    related_budget_name(pod).is_some()
}

/// The refusal of an operation the budget does not allow.
fn refusal(op: PubOperation, message: String) -> Outcome {
    if op == PubOperation::Evict {
        Outcome::Deny {
            code: 429,
            reason: "TooManyRequests",
            message,
        }
    } else {
        Outcome::forbidden(message)
    }
}

/// Upstream `PodUnavailableBudgetValidatePod`: skips Pods that do not count, then charges one
/// disruption to the budget, reading it again after a conflicting write.
pub async fn check_and_charge<C: PubLookup>(
    pod: &Pod,
    op: PubOperation,
    dry_run: bool,
    inplace_vertical: bool,
    username: &str,
    cluster: &C,
) -> Outcome {
    if is_exempt(pod) {
        return Outcome::Allow;
    }
    let (Some(name), Some(ns)) = (related_budget_name(pod), pod.metadata.namespace.as_deref())
    else {
        return Outcome::Allow;
    };
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut budget = match cluster.budget(ns, name).await {
        Ok(Some(b)) => b,
        Ok(None) => return Outcome::Allow,
        Err(e) => return Outcome::bad_request(e),
    };
    if !needs_charge(&budget, &pod_name, op, inplace_vertical) {
        return Outcome::Allow;
    }
    for _ in 0..ATTEMPTS {
        if let Err(refused) = charge(&mut budget, &pod_name, op, Timestamp::now()) {
            tracing::info!(pod = %pod_name, budget = name, operation = %op, "PodUnavailableBudget refused a disruption");
            cluster.refused(pod, username);
            return refusal(op, refused.to_string());
        }
        if dry_run {
            return Outcome::Allow;
        }
        match cluster.write_budget_status(&budget).await {
            Ok(StatusWrite::Written | StatusWrite::Gone) => return Outcome::Allow,
            Ok(StatusWrite::Conflict) => match cluster.budget(ns, name).await {
                Ok(Some(b)) if needs_charge(&b, &pod_name, op, inplace_vertical) => budget = b,
                Ok(_) => return Outcome::Allow,
                Err(e) => return Outcome::forbidden(e),
            },
            Err(e) => return Outcome::forbidden(e),
        }
    }
    Outcome::forbidden(format!(
        "Timeout: couldn't update PodUnavailableBudget {name} due to conflicts"
    ))
}
