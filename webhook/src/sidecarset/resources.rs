//! A sidecar's `resourcesPolicy` at injection (upstream `sidecarset_resources.go`): the
//! sidecar's cpu/memory limits and requests are expressions over the sum or the max of the
//! Pod's target containers' values. Targets are the Pod's containers and native sidecars
//! (init containers with `restartPolicy: Always`) whose names match the regex, never a
//! container a matching SidecarSet injects. A target without a limit makes the aggregate
//! limit unlimited, and then the sidecar gets no such limit; a missing request counts as 0.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use kruise_api::apps::v1beta1::{ResourceExprs, ResourcesPolicy, TargetContainersMode};

use super::quantity::{ExprError, Quantity, Value, evaluate};

const RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Why a policy cannot be applied to a Pod (the Pod is then refused, as upstream does).
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The regex does not compile (validation refuses it; a stored one may predate that).
    #[error("invalid regex pattern {0:?}: {1}")]
    Regex(String, regex::Error),
    /// No container of the Pod is a target.
    #[error("no containers match the regex pattern {0:?}")]
    NoTarget(String),
    /// The mode is neither `sum` nor `max`.
    #[error("unsupported targetContainersMode {0:?}")]
    Mode(String),
    /// An expression failed on the Pod's values.
    #[error("failed to evaluate {resource} {kind} expression {expr:?}: {source}")]
    Expr {
        resource: &'static str,
        kind: &'static str,
        expr: String,
        source: ExprError,
    },
}

/// The sidecar's resources under `policy` for `pod`; `kruise_sidecars` are the names every
/// matching SidecarSet injects (never targets).
pub fn compute(
    policy: &ResourcesPolicy,
    pod: &Pod,
    kruise_sidecars: &BTreeSet<String>,
) -> Result<ResourceRequirements, PolicyError> {
    let regex = &policy.target_containers_name_regex;
    let targets = targets(pod, regex, kruise_sidecars)?;
    if targets.is_empty() {
        return Err(PolicyError::NoTarget(regex.clone()));
    }
    let mode = policy
        .mode()
        .ok_or_else(|| PolicyError::Mode(policy.target_containers_mode.clone()))?;
    let exprs = &policy.resources_expr;
    let limits = match &exprs.limits {
        Some(e) => {
            let agg = aggregate(&targets, mode, |c| c.limits.as_ref(), true);
            apply(e, &agg, "limits")?
        }
        None => BTreeMap::new(),
    };
    let requests = match &exprs.requests {
        Some(e) => {
            let agg = aggregate(&targets, mode, |c| c.requests.as_ref(), false);
            apply(e, &agg, "requests")?
        }
        None => BTreeMap::new(),
    };
    Ok(ResourceRequirements {
        limits: (!limits.is_empty()).then_some(limits),
        requests: (!requests.is_empty()).then_some(requests),
        ..Default::default()
    })
}

/// The target containers of the Pod, native sidecars first.
fn targets<'a>(
    pod: &'a Pod,
    regex: &str,
    kruise_sidecars: &BTreeSet<String>,
) -> Result<Vec<&'a Container>, PolicyError> {
    let re = regex::Regex::new(regex).map_err(|e| PolicyError::Regex(regex.to_owned(), e))?;
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(Vec::new());
    };
    let native = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    Ok(native
        .chain(&spec.containers)
        .filter(|c| !kruise_sidecars.contains(&c.name) && re.is_match(&c.name))
        .collect())
}

/// cpu/memory aggregated over `targets`. For limits (`unset_is_unlimited`), one target
/// without the resource drops it (unlimited); for requests a missing value is 0 and a zero
/// aggregate is left out.
fn aggregate(
    targets: &[&Container],
    mode: TargetContainersMode,
    list: impl Fn(&ResourceRequirements) -> Option<&BTreeMap<String, K8sQuantity>>,
    unset_is_unlimited: bool,
) -> BTreeMap<&'static str, Quantity> {
    let mut out = BTreeMap::new();
    for r in RESOURCES {
        let mut acc: Option<Quantity> = None;
        let mut unlimited = false;
        for c in targets {
            let value = c
                .resources
                .as_ref()
                .and_then(&list)
                .and_then(|l| l.get(r))
                .and_then(|q| Quantity::parse(&q.0));
            let Some(v) = value else {
                unlimited = true;
                continue;
            };
            acc = Some(match (acc, mode) {
                (None, _) => v,
                (Some(a), TargetContainersMode::Sum) => Quantity {
                    milli: a.milli + v.milli,
                    binary: if a.milli == 0 { v.binary } else { a.binary },
                },
                (Some(a), TargetContainersMode::Max) if v.milli > a.milli => v,
                (Some(a), TargetContainersMode::Max) => a,
            });
        }
        match acc {
            _ if unset_is_unlimited && unlimited => {}
            Some(q) if unset_is_unlimited || q.milli != 0 => {
                out.insert(r, q);
            }
            _ => {}
        }
    }
    out
}

/// Evaluates the expressions of one list (`kind`: limits or requests) over `agg`. A limit whose
/// aggregate is unlimited is left unset; a request's missing aggregate is 0.
fn apply(
    exprs: &ResourceExprs,
    agg: &BTreeMap<&'static str, Quantity>,
    kind: &'static str,
) -> Result<BTreeMap<String, K8sQuantity>, PolicyError> {
    let mut out = BTreeMap::new();
    for (resource, expr) in [("cpu", &exprs.cpu), ("memory", &exprs.memory)] {
        if expr.is_empty() {
            continue;
        }
        let aggregated = match agg.get(resource) {
            Some(q) => *q,
            None if kind == "limits" => continue,
            None => Quantity::decimal(0),
        };
        let q = evaluate_for(resource, expr, aggregated).map_err(|source| PolicyError::Expr {
            resource,
            kind,
            expr: expr.clone(),
            source,
        })?;
        out.insert(resource.to_owned(), K8sQuantity(q.canonical()));
    }
    Ok(out)
}

/// One expression with its variable bound to `aggregated`. A plain-number result (only an
/// expression without the variable gives one) is read as upstream reads it: `0.5` is `500m`,
/// for memory too.
fn evaluate_for(
    resource: &'static str,
    expr: &str,
    aggregated: Quantity,
) -> Result<Quantity, ExprError> {
    let vars = BTreeMap::from([(resource, Value::Quantity(aggregated))]);
    Ok(match evaluate(expr, &vars)? {
        Value::Quantity(q) => q,
        Value::Number(n) => Quantity::decimal(i128::from((n * 1000.0) as i64)),
    })
}

/// Checks one expression of a SidecarSet (upstream validates with the variable bound to the
/// number 1): the error message, if any.
pub fn check_expression(resource: &'static str, expr: &str) -> Option<String> {
    let vars = BTreeMap::from([(resource, Value::Number(1.0))]);
    evaluate(expr, &vars)
        .err()
        .map(|e| format!("invalid expression: {e}"))
}
