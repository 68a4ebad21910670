//! WorkloadSpread validation (upstream `WorkloadSpreadCreateUpdateHandler` and
//! `workloadspread_validation.go`): a supported target, subsets with unique names, caps all
//! counts or all percentages (at most 100 % together, counts only for StatefulSets), a known
//! schedule strategy, a `targetFilter` whose selector can be built, an unchanged `targetRef`,
//! one WorkloadSpread per workload, and the `Adaptive` strategy's bounds. A custom workload kind
//! is accepted when the `kruise-configuration` ConfigMap's whitelist lists it. Refusals are
//! 400s, as upstream's `admission.Errored`; while the `WorkloadSpread` gate is off the path
//! answers 403 (`crate::gate_refusal`).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    CustomWorkloadWhiteList, SCHEDULE_ADAPTIVE, SCHEDULE_FIXED, TargetFilter, WorkloadSpread,
    builtin_target_groups,
};
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
    let ws: WorkloadSpread = match crate::json::typed(obj) {
        Ok(w) => w,
        Err(e) => return Outcome::bad_request(format!("cannot decode WorkloadSpread: {e}")),
    };
    let custom = ws
        .spec
        .target_reference
        .as_ref()
        .is_some_and(|r| builtin_target_groups(&r.kind).is_none());
    let whitelist = if custom {
        Some(cluster.ws_whitelist().await)
    } else {
        None
    };
    let mut errs = spec_errors_with(&ws, whitelist.as_ref());
    if req.operation == Operation::Update
        && let Some(old) = &req.old_object
    {
        match crate::json::typed::<WorkloadSpread>(old) {
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

/// Upstream's `targetRef` rules: a built-in kind in one of its groups, or a kind of the
/// `kruise-configuration` whitelist (`whitelist`, read only for a kind that is not built in).
fn target_errors(
    r: Option<&TargetReference>,
    whitelist: Option<&Result<CustomWorkloadWhiteList, String>>,
) -> Vec<FieldError> {
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
    match builtin_target_groups(&r.kind) {
        Some(groups) if r.group().is_some_and(|g| groups.contains(&g)) => Vec::new(),
        Some(_) => vec![FieldError::invalid(
            "spec.targetRef",
            &to_json(r),
            format!("TargetReference is not valid for {}.", r.kind),
        )],
        None => match whitelist {
            Some(Ok(list)) if list.workload(&r.api_version, &r.kind).is_some() => Vec::new(),
            Some(Err(e)) => vec![FieldError::reported(
                "spec.targetRef",
                format!("Internal error: {e}"),
            )],
            _ => vec![FieldError::invalid(
                "spec.targetRef",
                &to_json(r),
                format!(
                    "TargetReference's GroupKind is not permitted. (CloneSet, Deployment, ReplicaSet, Job, StatefulSet and Advanced StatefulSet are; list another kind under {:?} in ConfigMap {})",
                    keys::WS_CUSTOM_WORKLOAD_WHITELIST_KEY,
                    keys::KRUISE_CONFIGURATION_CONFIGMAP
                ),
            )],
        },
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

/// Every problem of one WorkloadSpread on its own, with the whitelist when its target is not a
/// built-in kind.
pub fn spec_errors_with(
    ws: &WorkloadSpread,
    whitelist: Option<&Result<CustomWorkloadWhiteList, String>>,
) -> Vec<FieldError> {
    let spec = &ws.spec;
    let mut errs = target_errors(spec.target_reference.as_ref(), whitelist);
    if let Some(filter) = &spec.target_filter {
        errs.extend(target_filter_errors(filter));
    }
    let statefulset = spec
        .target_reference
        .as_ref()
        .is_some_and(|r| r.kind == "StatefulSet");
    errs.extend(subset_errors(ws, statefulset));
    errs.extend(strategy_errors(ws));
    errs
}

/// Upstream's `scheduleStrategy` rules: a known type; `adaptive` only with `Adaptive`, the last
/// subset then uncapped (it takes what the others cannot place), and a critical time short
/// enough that a Pod cannot be bounced between closed subsets past their five minutes.
/// [`spec_errors_with`] without a whitelist (every custom kind refused).
pub fn spec_errors(ws: &WorkloadSpread) -> Vec<FieldError> {
    spec_errors_with(ws, None)
}

fn strategy_errors(ws: &WorkloadSpread) -> Vec<FieldError> {
    let st = &ws.spec.schedule_strategy;
    let subsets = &ws.spec.subsets;
    let mut errs = Vec::new();
    if !matches!(st.type_.as_str(), "" | SCHEDULE_FIXED | SCHEDULE_ADAPTIVE) {
        errs.push(FieldError::invalid(
            "spec.scheduleStrategy.type",
            &Value::String(st.type_.clone()),
            "ScheduleStrategy's type is not valid: use Fixed or Adaptive",
        ));
    }
    let Some(adaptive) = &st.adaptive else {
        return errs;
    };
    let secs = adaptive.reschedule_critical_seconds;
    let secs_json = secs.map_or(Value::Null, Value::from);
    if st.type_ != SCHEDULE_ADAPTIVE {
        errs.push(FieldError::invalid(
            "spec.scheduleStrategy.type",
            &secs_json,
            "the scheduleStrategy's type must be Adaptive when scheduleStrategy.adaptive is set",
        ));
    }
    if subsets.len() > 1 && subsets.last().is_some_and(|s| s.max_replicas.is_some()) {
        errs.push(FieldError::invalid(
            "spec.scheduleStrategy.adaptive",
            &secs_json,
            "the last subset's maxReplicas must be not specified when using adaptive scheduleStrategy",
        ));
    }
    let allowed = match i64::try_from(subsets.len()) {
        Ok(n) if n > 1 => (keys::WS_MAX_SCHEDULED_FAILED_SECS - 5) / (n - 1),
        _ => i64::from(i32::MAX),
    };
    if let Some(secs) = secs
        && (secs < 0 || i64::from(secs) > allowed)
    {
        errs.push(FieldError::invalid(
            "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds",
            &Value::from(secs),
            format!("rescheduleCriticalSeconds < 0 or rescheduleCriticalSeconds > {allowed} is not permitted"),
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
        // A subset with no node constraint, toleration or patch is accepted, as upstream (whose
        // check for it is commented out): it caps the Pods that land anywhere, typically as the
        // last, elastic subset.
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
