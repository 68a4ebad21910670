//! WorkloadSpread validation (upstream `WorkloadSpreadCreateUpdateHandler` and
//! `workloadspread_validation.go`): a supported target, subsets with unique names, caps all
//! counts or all percentages (at most 100 % together, counts only for StatefulSets), a known
//! schedule strategy, a `targetFilter` whose selector can be built, an unchanged `targetRef`,
//! one WorkloadSpread per workload. Kruise-rs also refuses, naming the field, what it does not
//! implement yet: the `Adaptive` strategy and custom workload kinds (see the README's
//! compatibility table). Refusals
//! are 400s, as upstream's `admission.Errored`; while the `WorkloadSpread` gate is off the
//! path answers 403 (`crate::gate_refusal`).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{SCHEDULE_ADAPTIVE, SCHEDULE_FIXED, TargetFilter, WorkloadSpread};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::TargetReference;
use kruise_api::selector::{self, Violation};
use kube::core::admission::Operation;
use serde_json::Value;

use super::WsLookup;
use crate::field::{FieldError, aggregate};
use crate::review::{Outcome, Request, creating_or_updating};

/// `/validate-apps-kruise-io-v1alpha1-workloadspread` (CREATE and UPDATE).
pub async fn validate<C: WsLookup>(req: Request, cluster: &C) -> Outcome {
    let obj = match creating_or_updating(&req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let ws: WorkloadSpread = match serde_json::from_value(obj.clone()) {
        Ok(w) => w,
        Err(e) => return Outcome::bad_request(format!("cannot decode WorkloadSpread: {e}")),
    };
    let mut errs = spec_errors(&ws);
    if req.operation == Operation::Update
        && let Some(old) = &req.old_object
    {
        match serde_json::from_value::<WorkloadSpread>(old.clone()) {
            Ok(old) => errs.extend(update_errors(&ws, &old)),
            Err(e) => {
                return Outcome::bad_request(format!("cannot decode the old WorkloadSpread: {e}"));
            }
        }
    }
    let ns = ws
        .metadata
        .namespace
        .clone()
        .or_else(|| req.namespace.clone())
        .unwrap_or_default();
    match cluster.workload_spreads_live(&ns).await {
        Ok(others) => errs.extend(conflict_errors(&ws, &others)),
        Err(e) => errs.push(FieldError::reported(
            "metadata.namespace",
            format!("Internal error: query other WorkloadSpread failed, err: {e}"),
        )),
    }
    if errs.is_empty() {
        Outcome::Allow
    } else {
        Outcome::bad_request(aggregate(&errs))
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The groups a target kind may have (upstream's built-in workloads); `None` for other kinds.
fn allowed_groups(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "CloneSet" => &[keys::APPS_GROUP],
        "Deployment" | "ReplicaSet" => &["apps"],
        "Job" => &["batch"],
        "StatefulSet" => &["apps", keys::APPS_GROUP],
        _ => return None,
    })
}

fn target_errors(r: Option<&TargetReference>) -> Vec<FieldError> {
    let Some(r) = r else {
        return vec![FieldError::required(
            "spec.targetRef",
            "no targetRef defined in WorkloadSpread",
        )];
    };
    if r.api_version.is_empty() || r.kind.is_empty() || r.name.is_empty() {
        return vec![FieldError::invalid(
            "spec.targetRef",
            &to_json(r),
            "empty TargetReference is not valid for WorkloadSpread.",
        )];
    }
    match allowed_groups(&r.kind) {
        Some(groups) if r.group().is_some_and(|g| groups.contains(&g)) => Vec::new(),
        Some(_) => vec![FieldError::invalid(
            "spec.targetRef",
            &to_json(r),
            format!("TargetReference is not valid for {}.", r.kind),
        )],
        // Upstream also accepts kinds listed in the kruise-configuration ConfigMap; Kruise-rs
        // does not read that whitelist yet.
        None => vec![FieldError::invalid(
            "spec.targetRef",
            &to_json(r),
            "TargetReference's GroupKind is not permitted. (Kruise-rs supports CloneSet, Deployment, ReplicaSet, Job, StatefulSet and Advanced StatefulSet; custom workloads are not supported yet)",
        )],
    }
}

/// Upstream: `spec.targetFilter` invalid when its selector cannot be built, with why.
fn target_filter_errors(filter: &TargetFilter) -> Vec<FieldError> {
    let Some(sel) = &filter.selector else {
        return Vec::new();
    };
    selector::violations(sel)
        .into_iter()
        .map(|(i, v)| {
            let what = match v {
                Violation::KeyRequired => "key must not be empty".to_owned(),
                Violation::ValuesRequired => {
                    "values must be specified when operator is In or NotIn".to_owned()
                }
                Violation::ValuesForbidden => {
                    "values may not be specified when operator is Exists or DoesNotExist".to_owned()
                }
                Violation::InvalidOperator(op) => format!(
                    "operator {op:?} is not one of {}",
                    selector::Operator::NAMES.join(", ")
                ),
            };
            FieldError::invalid(
                "spec.targetFilter",
                &to_json(filter),
                format!("selector.matchExpressions[{i}]: {what}"),
            )
        })
        .collect()
}

/// Every problem of one WorkloadSpread on its own.
pub fn spec_errors(ws: &WorkloadSpread) -> Vec<FieldError> {
    let spec = &ws.spec;
    let mut errs = target_errors(spec.target_reference.as_ref());
    if let Some(filter) = &spec.target_filter {
        errs.extend(target_filter_errors(filter));
    }
    let statefulset = spec
        .target_reference
        .as_ref()
        .is_some_and(|r| r.kind == "StatefulSet");
    errs.extend(subset_errors(ws, statefulset));
    let st = &spec.schedule_strategy;
    match st.type_.as_str() {
        "" | SCHEDULE_FIXED => {}
        SCHEDULE_ADAPTIVE => errs.push(FieldError::forbidden(
            "spec.scheduleStrategy.type",
            "Adaptive is not supported by Kruise-rs yet (Pods are not rescheduled between subsets): use Fixed",
        )),
        other => errs.push(FieldError::invalid(
            "spec.scheduleStrategy.type",
            &Value::String(other.to_owned()),
            "ScheduleStrategy's type is not valid",
        )),
    }
    if let Some(secs) = st
        .adaptive
        .as_ref()
        .and_then(|a| a.reschedule_critical_seconds)
        && secs <= 0
    {
        errs.push(FieldError::invalid(
            "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds",
            &Value::from(secs),
            "RescheduleCriticalSeconds <= 0 is not permitted",
        ));
    }
    errs
}

fn subset_errors(ws: &WorkloadSpread, statefulset: bool) -> Vec<FieldError> {
    let subsets = &ws.spec.subsets;
    let mut errs = Vec::new();
    if subsets.is_empty() {
        errs.push(FieldError::required(
            "spec.subsets",
            "subsets number must > 0 in WorkloadSpread",
        ));
        return errs;
    }
    let mut names = std::collections::BTreeSet::new();
    let mut percent_sum: i64 = 0;
    let mut kinds = (false, false); // (any int, any percent)
    for (i, s) in subsets.iter().enumerate() {
        let at = |f: &str| format!("spec.subsets[{i}].{f}");
        if s.name.is_empty() {
            errs.push(FieldError::required(at("name"), "a subset needs a name"));
        } else if !names.insert(s.name.as_str()) {
            errs.push(FieldError::invalid(
                at("name"),
                &Value::String(s.name.clone()),
                format!("duplicated subset name {}", s.name),
            ));
        }
        if s.required_node_selector_term.is_none()
            && s.preferred_node_selector_terms.is_empty()
            && s.tolerations.is_empty()
            && s.patch.is_none()
        {
            errs.push(FieldError::invalid(
                at("requiredNodeSelectorTerm"),
                &Value::Null,
                "The requiredNodeSelectorTerm, preferredNodeSelectorTerms, tolerations and patch of a subset cannot all be empty",
            ));
        }
        if let Some(p) = &s.patch
            && !p.is_object()
        {
            errs.push(FieldError::invalid(
                at("patch"),
                p,
                "patch must be a JSON object (a partial Pod)",
            ));
        }
        let Some(max) = &s.max_replicas else { continue };
        match max {
            IntOrString::Int(n) => {
                kinds.0 = true;
                if *n < 0 {
                    errs.push(FieldError::invalid(
                        at("maxReplicas"),
                        &Value::from(*n),
                        "maxReplicas is not valid for subset",
                    ));
                }
            }
            IntOrString::String(v) => {
                kinds.1 = true;
                if statefulset {
                    errs.push(FieldError::invalid(
                        at("maxReplicas"),
                        &Value::String(v.clone()),
                        "maxReplicas must be an integer for a StatefulSet target",
                    ));
                }
                match v.strip_suffix('%').and_then(|d| d.parse::<i64>().ok()) {
                    Some(p) if p >= 0 => {
                        percent_sum += p;
                        if percent_sum > 100 {
                            errs.push(FieldError::invalid(
                                at("maxReplicas"),
                                &Value::String(v.clone()),
                                "maxReplicas sum exceeds 100% for subset",
                            ));
                        }
                    }
                    _ => errs.push(FieldError::invalid(
                        at("maxReplicas"),
                        &Value::String(v.clone()),
                        "maxReplicas is not valid for subset",
                    )),
                }
            }
        }
    }
    if kinds.0 && kinds.1 {
        errs.push(FieldError::invalid(
            "spec.subsets",
            &Value::Null,
            "subsets' maxReplicas must be all integers or all percentages",
        ));
    }
    errs
}

/// What may not change.
pub fn update_errors(new: &WorkloadSpread, old: &WorkloadSpread) -> Vec<FieldError> {
    match (&new.spec.target_reference, &old.spec.target_reference) {
        (Some(n), Some(o)) if !n.same_workload(o) => vec![FieldError::invalid(
            "spec.targetRef",
            &to_json(n),
            "change TargetReference is not permitted for WorkloadSpread",
        )],
        _ => Vec::new(),
    }
}

/// One WorkloadSpread per workload (upstream `validateWorkloadSpreadConflict`).
pub fn conflict_errors(ws: &WorkloadSpread, others: &[WorkloadSpread]) -> Vec<FieldError> {
    let Some(r) = &ws.spec.target_reference else {
        return Vec::new();
    };
    others
        .iter()
        .filter(|o| o.metadata.name != ws.metadata.name)
        .find(|o| {
            o.spec
                .target_reference
                .as_ref()
                .is_some_and(|t| t.same_workload(r))
        })
        .map(|o| {
            vec![FieldError::invalid(
                "spec.targetRef",
                &to_json(r),
                format!(
                    "ws.spec.targetRef is in conflict with other WorkloadSpread {}",
                    o.metadata.name.clone().unwrap_or_default()
                ),
            )]
        })
        .unwrap_or_default()
}
