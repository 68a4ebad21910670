//! What one reconcile of a budget decides, from the budget, its Pods and the expected count
//! (upstream `syncPodUnavailableBudget` without its API calls). Pure: time is a parameter.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::pubcontrol::{
    self, BudgetError, compute_status, desired_available, is_active, prune_entries,
};
use kruise_api::policy::v1alpha1::{
    PodUnavailableBudget, PodUnavailableBudgetStatus, TargetReference,
};
use kruise_api::selector;

/// The status to write and what else the reconcile does.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusPlan {
    /// The status as upstream computes it.
    pub status: PodUnavailableBudgetStatus,
    /// Whether it differs from the stored one (or was computed for an older generation).
    pub changed: bool,
    /// When the next `disruptedPods`/`unavailablePods` entry expires.
    pub recheck: Option<Timestamp>,
    /// Pods whose admitted deletion did not happen in time (a Warning Event each).
    pub not_deleted: Vec<String>,
}

/// The active Pods a selector budget covers (upstream lists by selector and keeps active
/// ones; an empty selector, which the webhook refuses, selects everything as upstream's).
pub fn select_pods(pods: &[Arc<Pod>], sel: &LabelSelector) -> Vec<Arc<Pod>> {
    let empty = Default::default();
    pods.iter()
        .filter(|p| is_active(p))
        .filter(|p| selector::matches(sel, p.metadata.labels.as_ref().unwrap_or(&empty)))
        .cloned()
        .collect()
}

/// The Pods that do not name a budget yet: the controller marks them with this one (upstream
/// `patchRelatedPubAnnotationInPod` patches only those without the annotation).
pub fn pods_to_annotate(pods: &[Arc<Pod>]) -> Vec<Arc<Pod>> {
    pods.iter()
        .filter(|p| {
            p.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(keys::PUB_RELATED_ANNOTATION))
                .is_none_or(String::is_empty)
        })
        .cloned()
        .collect()
}

/// The expected count: the `pub.kruise.io/protect-total-replicas` override when set, else
/// what the workloads say.
pub fn expected_count(budget: &PodUnavailableBudget, from_workloads: i32) -> i32 {
    pubcontrol::protect_total_replicas(budget.metadata.annotations.as_ref())
        .unwrap_or(from_workloads)
}

/// The desired count, or why it cannot be computed.
pub fn desired(budget: &PodUnavailableBudget, expected: i32) -> Result<i32, BudgetError> {
    desired_available(&budget.spec, expected)
}

/// The status of `budget` (as stored now) recomputed at `now` (upstream
/// `buildDisruptedAndUnavailablePods`, `countAvailablePods`, `updatePubStatus`).
pub fn plan_status(
    budget: &PodUnavailableBudget,
    pods: &[Arc<Pod>],
    expected: i32,
    desired: i32,
    now: Timestamp,
) -> StatusPlan {
    let old = budget.status.clone().unwrap_or_default();
    let refs: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
    let entries = prune_entries(&old, &refs, now);
    let generation = budget.metadata.generation.unwrap_or_default();
    let status = compute_status(generation, expected, desired, &refs, &entries);
    StatusPlan {
        changed: budget.status.as_ref() != Some(&status),
        status,
        recheck: entries.recheck,
        not_deleted: entries.not_deleted,
    }
}

/// A selector in Kubernetes' string form (`a=b,c in (d,e),!f`), as a scale subresource
/// reports it in `status.selector` (upstream `metav1.ParseToLabelSelector`); `None` when it
/// does not parse.
pub fn parse_selector(s: &str) -> Option<LabelSelector> {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement as Req;
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1)?,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    let mut sel = LabelSelector::default();
    let req = |key: &str, op: &str, values: Option<Vec<String>>| Req {
        key: key.trim().to_owned(),
        operator: op.to_owned(),
        values,
    };
    let set = |rest: &str| -> Option<Vec<String>> {
        let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
        Some(inner.split(',').map(|v| v.trim().to_owned()).collect())
    };
    for p in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        let r = if let Some((k, v)) = p.split_once("!=") {
            req(k, "NotIn", Some(vec![v.trim().to_owned()]))
        } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
            sel.match_labels
                .get_or_insert_with(Default::default)
                .insert(k.trim().to_owned(), v.trim().to_owned());
            continue;
        } else if let Some((k, rest)) = p.split_once(" notin ") {
            req(k, "NotIn", Some(set(rest)?))
        } else if let Some((k, rest)) = p.split_once(" in ") {
            req(k, "In", Some(set(rest)?))
        } else if let Some(k) = p.strip_prefix('!') {
            req(k, "DoesNotExist", None)
        } else {
            req(p, "Exists", None)
        };
        sel.match_expressions.get_or_insert_with(Vec::new).push(r);
    }
    Some(sel)
}

/// A workload whose change may move a budget's expected count: its namespace, what a
/// `targetRef` naming it says, and its Pod template's labels.
#[derive(Debug, Clone)]
pub struct WorkloadChange {
    pub namespace: String,
    pub target: TargetReference,
    pub template_labels: BTreeMap<String, String>,
}

/// Whether a workload's watch event should wake its budgets (upstream's predicates: created,
/// replicas changed, deleted); `before` is the replicas last seen, `None` when first seen.
/// `spec.replicas` is `None` only when unset, which the API server defaults, so it counts as
/// a value of its own.
pub fn replicas_changed(before: Option<Option<i64>>, now: Option<i64>) -> bool {
    before != Some(now)
}

/// The budgets a workload's change concerns (upstream `SetEnqueueRequestForPUB`): in its
/// namespace, those targeting it, and those without a target whose non-empty selector matches
/// its Pod template's labels. Upstream wakes only the first match; waking all costs a
/// reconcile each and leaves none stale.
pub fn workload_budgets<'a>(
    budgets: impl IntoIterator<Item = &'a PodUnavailableBudget>,
    change: &WorkloadChange,
) -> Vec<&'a PodUnavailableBudget> {
    budgets
        .into_iter()
        .filter(|b| b.metadata.namespace.as_deref() == Some(change.namespace.as_str()))
        .filter(|b| match (&b.spec.target_reference, &b.spec.selector) {
            (Some(t), _) => t.same_workload(&change.target),
            (None, Some(sel)) => {
                let empty = sel.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
                    && sel.match_expressions.as_ref().is_none_or(Vec::is_empty);
                !empty && selector::matches(sel, &change.template_labels)
            }
            (None, None) => false,
        })
        .collect()
}
