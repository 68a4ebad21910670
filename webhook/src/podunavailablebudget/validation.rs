//! PodUnavailableBudget validation (upstream `PodUnavailableBudgetCreateUpdateHandler`):
//! refused while both of its gates are off; exactly one of selector/targetRef and of
//! maxUnavailable/minAvailable; percentages at most 100 %; selector and targetRef immutable;
//! no two budgets of a namespace over the same Pods; the annotations parse. A v1beta1 budget
//! is checked by the same rules through its v1alpha1 form, and refused when it sets
//! `spec.ignoredPodSelector`, which Kruise-rs cannot honour yet. Refusals are 400s as
//! upstream's `admission.Errored(http.StatusBadRequest, ...)`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::pubcontrol::invalid_protect_operations;
use kruise_api::policy::v1alpha1::{PodUnavailableBudget, PubOperation, TargetReference};
use kruise_api::selector::{self, Violation};
use serde_json::{Value, json};

use super::{PubLookup, conversion};
use crate::field::{FieldError, aggregate};
use crate::review::{Outcome, Request, decoded_with_old};

/// Upstream's refusal while neither PodUnavailableBudget gate is on.
pub fn gate_message() -> String {
    format!(
        "feature PodUnavailableBudget is invalid, please open via feature-gate({}, {})",
        Gate::PodUnavailableBudgetDeleteGate,
        Gate::PodUnavailableBudgetUpdateGate
    )
}

/// `/validate-policy-kruise-io-podunavailablebudget`.
pub async fn validate<C: PubLookup>(req: Request, cluster: &C, gates: &FeatureGates) -> Outcome {
    if !gates.enabled(Gate::PodUnavailableBudgetDeleteGate)
        && !gates.enabled(Gate::PodUnavailableBudgetUpdateGate)
    {
        return Outcome::bad_request(gate_message());
    }
    let (req, mut errs) = as_v1alpha1(req);
    let (budget, old) = match decoded_with_old::<PodUnavailableBudget>(&req, "PodUnavailableBudget")
    {
        Ok(Some(both)) => both,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    errs.extend(budget_errors(&budget));
    if let Some(old) = &old {
        errs.extend(update_errors(&budget, old));
    }
    let ns = budget
        .metadata
        .namespace
        .clone()
        .or_else(|| req.namespace.clone())
        .unwrap_or_default();
    match cluster.budgets_live(&ns).await {
        Ok(others) => errs.extend(conflict_errors(&budget, &others)),
        Err(e) => errs.push(FieldError::reported(
            "metadata.namespace",
            format!("Internal error: query other podUnavailableBudget failed, err: {e}"),
        )),
    }
    if errs.is_empty() {
        Outcome::Allow
    } else {
        Outcome::bad_request(aggregate(&errs))
    }
}

/// Why a budget that sets `spec.ignoredPodSelector` is refused, and what to do instead.
pub fn ignored_pod_selector_message() -> String {
    format!(
        "Kruise-rs does not support spec.ignoredPodSelector yet: its budget controller and Pod webhook cannot honour it; annotate such Pods {}=true instead",
        keys::PUB_NO_PROTECT_ANNOTATION
    )
}

/// The request as the v1alpha1 checks read it, and what they cannot see. The rule admits both
/// versions, so a v1beta1 object arrives as written: its v1beta1-only problems are reported
/// here and it is checked further through the plain v1beta1 → v1alpha1 mapping (the fields
/// become the annotations). A v1alpha1 object is checked as it is, and refused as well if
/// its v1beta1 form (through the conversion record) sets `spec.ignoredPodSelector`.
fn as_v1alpha1(mut req: Request) -> (Request, Vec<FieldError>) {
    let Some(obj) = req.object.as_ref() else {
        return (req, Vec::new());
    };
    if obj.get("apiVersion").and_then(Value::as_str) != Some(keys::POLICY_V1BETA1) {
        let beta = conversion::convert(obj, keys::POLICY_V1BETA1).ok();
        let errs = beta
            .as_ref()
            .map(ignored_selector_errors)
            .unwrap_or_default();
        return (req, errs);
    }
    let (errs, valid) = v1beta1_errors(obj);
    req.object = Some(conversion::to_v1alpha1(&valid));
    if let Some(old) = req.old_object.as_mut()
        && old.get("apiVersion").and_then(Value::as_str) == Some(keys::POLICY_V1BETA1)
    {
        *old = conversion::to_v1alpha1(old);
    }
    (req, errs)
}

fn ignored_selector_errors(beta: &Value) -> Vec<FieldError> {
    match beta.get("spec").and_then(|s| s.get("ignoredPodSelector")) {
        None | Some(Value::Null) => Vec::new(),
        Some(_) => vec![FieldError::forbidden(
            "spec.ignoredPodSelector",
            ignored_pod_selector_message(),
        )],
    }
}

/// What only a v1beta1 budget can get wrong (upstream `validatingPodUnavailableBudgetFnV1beta1`
/// beyond the v1alpha1 rules), and the object with unsupported operations left out so the
/// v1alpha1 checks do not report them again.
fn v1beta1_errors(obj: &Value) -> (Vec<FieldError>, Value) {
    let mut errs = ignored_selector_errors(obj);
    let total = obj
        .pointer("/spec/protectTotalReplicas")
        .and_then(Value::as_i64);
    let annotation = obj
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION))
        .and_then(Value::as_str);
    if let Some(v) = annotation {
        let path = format!(
            "metadata.annotations[{}]",
            keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION
        );
        if v.parse::<i32>().is_err() {
            errs.push(FieldError::invalid(
                path,
                &json!(v),
                "must be a valid int32",
            ));
        } else if total.is_some_and(|t| t.to_string() != v) {
            errs.push(FieldError::invalid(
                path,
                &json!(v),
                "must match spec.protectTotalReplicas when both are set",
            ));
        }
    }
    let mut valid = obj.clone();
    if let Some(ops) = valid
        .pointer_mut("/spec/protectOperations")
        .and_then(Value::as_array_mut)
    {
        let allowed = [
            PubOperation::Delete,
            PubOperation::Update,
            PubOperation::Evict,
            PubOperation::Resize,
        ]
        .map(PubOperation::as_str);
        for (i, op) in ops.iter().enumerate() {
            if op.as_str().and_then(PubOperation::parse).is_none() {
                errs.push(FieldError::not_supported(
                    format!("spec.protectOperations[{i}]"),
                    op,
                    &allowed,
                ));
            }
        }
        ops.retain(|op| op.as_str().and_then(PubOperation::parse).is_some());
    }
    (errs, valid)
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Every problem of one budget on its own (upstream `validatingPodUnavailableBudgetFn` up to
/// the conflict check).
pub fn budget_errors(budget: &PodUnavailableBudget) -> Vec<FieldError> {
    let mut errs = annotation_errors(budget);
    let spec = &budget.spec;
    const PAIR: &str = "spec.selector, targetRef";
    match (&spec.selector, &spec.target_reference) {
        (None, None) => errs.push(FieldError::required(
            PAIR,
            "no selector or targetRef defined in PodUnavailableBudget",
        )),
        (Some(_), Some(_)) => errs.push(FieldError::required(
            PAIR,
            "selector and targetRef are mutually exclusive",
        )),
        (None, Some(r)) => {
            if r.api_version.is_empty() || r.kind.is_empty() || r.name.is_empty() {
                errs.push(FieldError::invalid(
                    "spec.targetRef",
                    &to_json(r),
                    "empty TargetReference is not valid for PodUnavailableBudget: set apiVersion, kind and name",
                ));
            }
            if r.group().is_none() {
                errs.push(FieldError::invalid(
                    "spec.targetRef.apiVersion",
                    &json!(r.api_version),
                    "unexpected GroupVersion string: use group/version or version",
                ));
            }
        }
        (Some(sel), None) => errs.extend(selector_errors(sel)),
    }
    const BOUNDS: &str = "spec.maxUnavailable, minAvailable";
    match (&spec.max_unavailable, &spec.min_available) {
        (None, None) => errs.push(FieldError::required(
            BOUNDS,
            "no maxUnavailable or minAvailable defined in PodUnavailableBudget",
        )),
        (Some(_), Some(_)) => errs.push(FieldError::required(
            BOUNDS,
            "maxUnavailable and minAvailable are mutually exclusive",
        )),
        (Some(v), None) => errs.extend(int_or_percent_errors(v, "spec.maxUnavailable")),
        (None, Some(v)) => errs.extend(int_or_percent_errors(v, "spec.minAvailable")),
    }
    errs
}

fn annotation_errors(budget: &PodUnavailableBudget) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(ann) = budget.metadata.annotations.as_ref() else {
        return errs;
    };
    if let Some(v) = ann.get(keys::PUB_PROTECT_OPERATIONS_ANNOTATION) {
        let allowed: Vec<&str> = PubOperation::ALL.iter().map(|o| o.as_str()).collect();
        for bad in invalid_protect_operations(v) {
            errs.push(FieldError::not_supported(
                format!(
                    "metadata.annotations[{}]",
                    keys::PUB_PROTECT_OPERATIONS_ANNOTATION
                ),
                &json!(bad),
                &allowed,
            ));
        }
    }
    if let Some(v) = ann.get(keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION)
        && v.parse::<i32>().is_err()
    {
        errs.push(FieldError::invalid(
            format!(
                "metadata.annotations[{}]",
                keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION
            ),
            &json!(v),
            "annotation is invalid: must be a 32-bit integer",
        ));
    }
    errs
}

fn selector_errors(sel: &LabelSelector) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, v) in selector::violations(sel) {
        let path = format!("spec.selector.matchExpressions[{i}]");
        errs.push(match v {
            Violation::KeyRequired => FieldError::required(format!("{path}.key"), ""),
            Violation::ValuesRequired => FieldError::required(
                format!("{path}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            ),
            Violation::ValuesForbidden => FieldError::forbidden(
                format!("{path}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            Violation::InvalidOperator(op) => FieldError::not_supported(
                format!("{path}.operator"),
                &json!(op),
                &selector::Operator::NAMES,
            ),
        });
    }
    if selector::is_empty(sel) {
        errs.push(FieldError::invalid(
            "spec.selector",
            &to_json(sel),
            "empty selector is not valid for PodUnavailableBudget.",
        ));
    }
    errs
}

/// Upstream `ValidatePositiveIntOrPercent` and `IsNotMoreThan100Percent`.
fn int_or_percent_errors(v: &IntOrString, path: &str) -> Vec<FieldError> {
    match v {
        IntOrString::Int(i) if *i < 0 => vec![FieldError::invalid(
            path,
            &json!(i),
            "must be greater than or equal to 0",
        )],
        IntOrString::Int(_) => Vec::new(),
        IntOrString::String(s) => {
            let pct = s
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .map(|d| d.parse::<u64>().unwrap_or(u64::MAX));
            match pct {
                None => vec![FieldError::invalid(
                    path,
                    &json!(s),
                    "must be an integer or percentage (e.g '5%')",
                )],
                Some(p) if p > 100 => vec![FieldError::invalid(
                    path,
                    &json!(s),
                    "must not be greater than 100%",
                )],
                Some(_) => Vec::new(),
            }
        }
    }
}

/// Upstream `validateUpdatePubConflict`: what a budget covers never changes.
pub fn update_errors(budget: &PodUnavailableBudget, old: &PodUnavailableBudget) -> Vec<FieldError> {
    if budget.spec.selector == old.spec.selector
        && budget.spec.target_reference == old.spec.target_reference
    {
        return Vec::new();
    }
    vec![FieldError::required(
        "spec.selector, targetRef",
        "selector and targetRef cannot be modified",
    )]
}

/// Upstream `validatePubConflict`: the first other budget of the namespace over the same
/// workload (same group, kind, name) or with a loosely overlapping selector.
pub fn conflict_errors(
    budget: &PodUnavailableBudget,
    others: &[PodUnavailableBudget],
) -> Vec<FieldError> {
    let name = budget.metadata.name.as_deref().unwrap_or_default();
    for other in others {
        let other_name = other.metadata.name.as_deref().unwrap_or_default();
        if other_name == name {
            continue;
        }
        let spec = &budget.spec;
        if let (Some(a), Some(b)) = (&spec.target_reference, &other.spec.target_reference) {
            let group = |r: &TargetReference| r.group().unwrap_or_default().to_owned();
            if group(a) == group(b) && a.kind == b.kind && a.name == b.name {
                return vec![FieldError::invalid(
                    "spec.targetRef",
                    &to_json(a),
                    format!(
                        "pub.spec.targetReference is in conflict with other PodUnavailableBudget {other_name}"
                    ),
                )];
            }
        } else if let (Some(a), Some(b)) = (&spec.selector, &other.spec.selector)
            && selector::loose_overlap(a, b)
        {
            return vec![FieldError::invalid(
                "spec.selector",
                &to_json(a),
                format!(
                    "pub.spec.selector is in conflict with other PodUnavailableBudget {other_name}"
                ),
            )];
        }
    }
    Vec::new()
}
