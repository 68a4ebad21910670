//! UnitedDeployment validation (`/validate-apps-kruise-io-v1alpha1-uniteddeployment`), after
//! upstream's `validateUnitedDeploymentSpec`, `validateSubsetReplicas` and
//! `ValidateUnitedDeploymentUpdate`. Every refusal names the field. Beyond upstream: the
//! selector must match the labels of every template kind (upstream skips the CloneSet
//! template), the CloneSet template's strategies follow the v1alpha1 CloneSet's rules (a
//! subset CloneSet would be refused otherwise), and the Adaptive strategy's durations may not
//! be negative.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{
    Subset, SubsetTemplate, UD_SCHEDULE_ADAPTIVE, UD_SCHEDULE_FIXED, UnitedDeployment,
    UnitedDeploymentSpec, parse_subset_replicas,
};
use serde_json::{Value, json};

use crate::field::FieldError;
use crate::review::{Outcome, Request, decoded_with_old, verdict};
use crate::workload::selector::LabelSelector;

const KIND: &str = "UnitedDeployment";
const TEMPLATES: &str =
    "statefulSetTemplate, advancedStatefulSetTemplate, cloneSetTemplate, or deploymentTemplate";
const NODE_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const TOLERATION_OPERATORS: &[&str] = &["Exists", "Equal"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// `/validate-apps-kruise-io-v1alpha1-uniteddeployment`.
pub fn validate(req: &Request) -> Outcome {
    match decoded_with_old::<UnitedDeployment>(req, KIND) {
        Ok(Some((new, old))) => {
            let mut errs = spec_errors(&new.spec);
            if let Some(old) = old {
                errs.extend(update_errors(&new.spec, &old.spec));
            }
            verdict(&errs)
        }
        Ok(None) => Outcome::Allow,
        Err(o) => o,
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Every problem of a UnitedDeployment spec.
pub fn spec_errors(spec: &UnitedDeploymentSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(r) = spec.replicas
        && r < 0
    {
        errs.push(FieldError::invalid(
            "spec.replicas",
            &json!(r),
            "must be greater than or equal to 0",
        ));
    }
    let selector = match &spec.selector {
        None => {
            errs.push(FieldError::required("spec.selector", ""));
            None
        }
        Some(s) => match LabelSelector::parse(&to_json(s), "spec.selector") {
            Ok(sel) if sel.is_empty() => {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    &to_json(s),
                    "empty selector is invalid for statefulset",
                ));
                None
            }
            Ok(sel) => Some(sel),
            Err(e) => {
                errs.extend(e);
                None
            }
        },
    };
    schedule_errors(spec, &mut errs);
    template_errors(&spec.template, selector.as_ref(), &mut errs);
    cloneset_template_errors(spec, &mut errs);
    errs.extend(subset_replicas_errors(
        spec.replicas,
        &spec.topology.subsets,
    ));
    let mut names = BTreeSet::new();
    for (i, s) in spec.topology.subsets.iter().enumerate() {
        subset_errors(i, s, &mut names, &mut errs);
    }
    if let Some(m) = &spec.update_strategy.manual_update {
        for name in m.partitions.keys() {
            if !names.contains(name.as_str()) {
                errs.push(FieldError::invalid(
                    "spec.updateStrategy.manualUpdate.partitions",
                    &to_json(&m.partitions),
                    format!("subset {name} does not exist"),
                ));
            }
        }
        for (name, p) in &m.partitions {
            if *p < 0 {
                errs.push(FieldError::invalid(
                    format!("spec.updateStrategy.manualUpdate.partitions[{name}]"),
                    &json!(p),
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
    errs
}

/// The schedule strategy: `Fixed`, `Adaptive` or unset. Under Adaptive, as upstream, no subset
/// sets `replicas` (min/max bounds only) and reserving unschedulable Pods needs a stateless
/// template; beyond upstream, its durations may not be negative.
fn schedule_errors(spec: &UnitedDeploymentSpec, errs: &mut Vec<FieldError>) {
    let strategy = &spec.topology.schedule_strategy;
    let ty = strategy.type_.as_str();
    match ty {
        "" => {}
        t if t == UD_SCHEDULE_FIXED || t == UD_SCHEDULE_ADAPTIVE => {}
        _ => errs.push(FieldError::not_supported(
            "spec.topology.scheduleStrategy.type",
            &json!(ty),
            &[UD_SCHEDULE_ADAPTIVE, UD_SCHEDULE_FIXED],
        )),
    }
    if !strategy.is_adaptive() {
        return;
    }
    for (i, s) in spec.topology.subsets.iter().enumerate() {
        if s.replicas.is_some() {
            errs.push(FieldError::forbidden(
                format!("spec.topology.subsets[{i}].replicas"),
                "specify replicas use minReplicas/maxReplicas to enable adaptive strategy",
            ));
        }
    }
    let Some(a) = &strategy.adaptive else {
        return;
    };
    for (name, v) in [
        ("rescheduleCriticalSeconds", a.reschedule_critical_seconds),
        ("unschedulableDuration", a.unschedulable_duration),
    ] {
        if let Some(v) = v.filter(|v| *v < 0) {
            errs.push(FieldError::invalid(
                format!("spec.topology.scheduleStrategy.adaptive.{name}"),
                &json!(v),
                "must be greater than or equal to 0",
            ));
        }
    }
    if a.reserve_unschedulable_pods {
        let t = &spec.template;
        if t.stateful_set_template.is_some() || t.advanced_stateful_set_template.is_some() {
            errs.push(FieldError::invalid(
                "spec.topology.scheduleStrategy.adaptive.reserveUnschedulablePods",
                &json!(true),
                "only stateless workloads (Deployment and CloneSet) are supported by reserved rescheduling",
            ));
        }
    }
}

/// Upstream `validateSubsetTemplate`: exactly one template, whose labels the selector matches,
/// and no `replicas` or partition of its own (the controller sets them per subset).
fn template_errors(
    t: &SubsetTemplate,
    selector: Option<&LabelSelector>,
    errs: &mut Vec<FieldError>,
) {
    let set = [
        (
            "statefulSetTemplate",
            t.stateful_set_template
                .as_ref()
                .map(|x| (x.metadata.as_ref(), x.spec.clone())),
        ),
        (
            "advancedStatefulSetTemplate",
            t.advanced_stateful_set_template
                .as_ref()
                .map(|x| (x.metadata.as_ref(), to_json(&x.spec))),
        ),
        (
            "cloneSetTemplate",
            t.clone_set_template
                .as_ref()
                .map(|x| (x.metadata.as_ref(), to_json(&x.spec))),
        ),
        (
            "deploymentTemplate",
            t.deployment_template
                .as_ref()
                .map(|x| (x.metadata.as_ref(), x.spec.clone())),
        ),
    ];
    let given: Vec<_> = set.iter().filter(|(_, v)| v.is_some()).collect();
    match given.len() {
        0 => {
            errs.push(FieldError::required(
                "spec.template",
                format!("should provide one of {TEMPLATES}"),
            ));
            return;
        }
        1 => {}
        _ => {
            let names: Vec<&str> = given.iter().map(|(n, _)| *n).collect();
            errs.push(FieldError::invalid(
                "spec.template",
                &json!(names),
                format!("should provide only one of {TEMPLATES}"),
            ));
            return;
        }
    }
    let Some((name, Some((meta, spec)))) = given.first().map(|(n, v)| (*n, v.as_ref())) else {
        return;
    };
    let labels = meta.and_then(|m| m.labels.clone()).unwrap_or_default();
    if let Some(sel) = selector
        && !sel.matches(&labels)
    {
        errs.push(FieldError::invalid(
            format!("spec.template.{name}.metadata.labels"),
            &to_json(&labels),
            "`selector` does not match template `labels`",
        ));
    }
    if name != "cloneSetTemplate"
        && let Some(r) = spec.get("replicas").filter(|v| !v.is_null())
    {
        errs.push(FieldError::invalid(
            format!("spec.template.{name}.spec.replicas"),
            r,
            format!("replicas in {name} will not be used"),
        ));
    }
    if matches!(name, "statefulSetTemplate" | "advancedStatefulSetTemplate") {
        let st = spec.get("updateStrategy");
        let rolling = st
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .is_none_or(|t| t.is_empty() || t == "RollingUpdate");
        if let Some(p) = st
            .and_then(|s| s.pointer("/rollingUpdate/partition"))
            .filter(|v| !v.is_null() && rolling)
        {
            errs.push(FieldError::invalid(
                format!("spec.template.{name}.spec.updateStrategy.rollingUpdate.partition"),
                p,
                format!("partition in {name} will not be used"),
            ));
        }
    }
    if spec.pointer("/template/spec/containers").is_none() {
        errs.push(FieldError::required(
            format!("spec.template.{name}.spec.template.spec.containers"),
            "the Pod template needs at least one container",
        ));
    }
}

/// The CloneSet template's strategies as a v1alpha1 CloneSet's (the kind and version the
/// controller creates, and the CloneSet webhook would refuse), checked at the size of the
/// whole UnitedDeployment; the partition is the controller's to set, as upstream's.
fn cloneset_template_errors(spec: &UnitedDeploymentSpec, errs: &mut Vec<FieldError>) {
    let Some(t) = &spec.template.clone_set_template else {
        return;
    };
    let mut cs = to_json(&t.spec);
    // The subset CloneSet's defaulting gives an unset maxUnavailable the CloneSet default.
    if let Some(us) = cs.get_mut("updateStrategy").and_then(Value::as_object_mut) {
        us.entry("maxUnavailable")
            .or_insert_with(|| json!(kruise_api::keys::DEFAULT_CLONESET_MAX_UNAVAILABLE));
    }
    let mut found = Vec::new();
    crate::cloneset::strategy::validate_scale_strategy(&cs, &mut found);
    let replicas = i64::from(spec.replicas.unwrap_or(0));
    crate::cloneset::strategy::validate_update_strategy(
        &cs,
        replicas,
        kruise_api::keys::VERSION_V1ALPHA1,
        &mut found,
    );
    errs.extend(found.into_iter().map(|mut e| {
        e.path = format!("spec.template.cloneSetTemplate.{}", e.path);
        e
    }));
}

fn subset_errors<'a>(
    i: usize,
    s: &'a Subset,
    names: &mut BTreeSet<&'a str>,
    errs: &mut Vec<FieldError>,
) {
    let path = format!("spec.topology.subsets[{i}]");
    if s.name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else if !names.insert(&s.name) {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            &json!(s.name),
            format!("duplicated subset name {}", s.name),
        ));
    } else if let Some(p) = dns_label_problem(&s.name) {
        errs.push(FieldError::invalid(
            format!("{path}.name"),
            &json!(s.name),
            format!("invalid subset name {p}"),
        ));
    }
    let term = s.node_selector_term.as_ref();
    let exprs = term
        .and_then(|t| t.match_expressions.clone())
        .unwrap_or_default();
    for (j, e) in exprs.iter().enumerate() {
        let p = format!("{path}.nodeSelectorTerm.matchExpressions[{j}]");
        if e.key.is_empty() {
            errs.push(FieldError::required(format!("{p}.key"), ""));
        }
        let n = e.values.as_ref().map_or(0, Vec::len);
        match e.operator.as_str() {
            "In" | "NotIn" if n == 0 => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if n > 0 => errs.push(FieldError::forbidden(
                format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "Gt" | "Lt" if n != 1 => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be specified single value when `operator` is 'Lt' or 'Gt'",
            )),
            op if !NODE_OPERATORS.contains(&op) => errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                &json!(op),
                NODE_OPERATORS,
            )),
            _ => {}
        }
    }
    for (j, t) in s.tolerations.iter().enumerate() {
        let p = format!("{path}.tolerations[{j}]");
        let op = t.operator.as_deref().unwrap_or("");
        if !op.is_empty() && !TOLERATION_OPERATORS.contains(&op) {
            errs.push(FieldError::not_supported(
                format!("{p}.operator"),
                &json!(op),
                TOLERATION_OPERATORS,
            ));
        }
        if op == "Exists" && t.value.as_deref().is_some_and(|v| !v.is_empty()) {
            errs.push(FieldError::invalid(
                format!("{p}.operator"),
                &json!(t.value),
                "value must be empty when `operator` is 'Exists'",
            ));
        }
        if let Some(eff) = t.effect.as_deref().filter(|e| !e.is_empty())
            && !TAINT_EFFECTS.contains(&eff)
        {
            errs.push(FieldError::not_supported(
                format!("{p}.effect"),
                &json!(eff),
                TAINT_EFFECTS,
            ));
        }
    }
    if let Some(patch) = &s.patch
        && !patch.is_object()
    {
        errs.push(FieldError::invalid(
            format!("{path}.patch"),
            patch,
            "must be an object",
        ));
    }
}

/// Kubernetes' DNS-1123 label rule.
fn dns_label_problem(name: &str) -> Option<&'static str> {
    let b = name.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    if name.len() > 63 {
        Some("must be no more than 63 characters")
    } else if !b.iter().all(|c| alnum(c) || *c == b'-')
        || !b.first().is_some_and(alnum)
        || !b.last().is_some_and(alnum)
    {
        Some(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        )
    } else {
        None
    }
}

/// Upstream `validateSubsetReplicas`: `replicas` and `minReplicas`/`maxReplicas` exclude each
/// other; with min/max, `spec.replicas` is set, one subset has no max, and the minimums fit in
/// the maximums; with `replicas`, their sum fits in (or, when all are given, equals) the total.
pub fn subset_replicas_errors(total: Option<i32>, subsets: &[Subset]) -> Vec<FieldError> {
    let total_v = total.unwrap_or(-1);
    let path = "spec.topology.subsets";
    let mut errs = Vec::new();
    let (mut sum, mut sum_min, mut sum_max) = (0i64, 0i64, 0i64);
    let (mut count, mut count_max) = (0usize, 0usize);
    let (mut has_replicas, mut has_capacity) = (false, false);
    let parse = |v: &IntOrString, field: String, errs: &mut Vec<FieldError>| {
        parse_subset_replicas(total_v, v).unwrap_or_else(|e| {
            errs.push(FieldError::invalid(field, &to_json(v), e.to_string()));
            0
        })
    };
    for (i, s) in subsets.iter().enumerate() {
        if let Some(v) = &s.replicas {
            count += 1;
            has_replicas = true;
            sum += i64::from(parse(v, format!("{path}[{i}].replicas"), &mut errs));
        }
        let mut min = 0;
        if let Some(v) = &s.min_replicas {
            has_capacity = true;
            min = parse(v, format!("{path}[{i}].minReplicas"), &mut errs);
        }
        sum_min += i64::from(min);
        let mut max = 1_000_000;
        if let Some(v) = &s.max_replicas {
            count_max += 1;
            has_capacity = true;
            max = parse(v, format!("{path}[{i}].maxReplicas"), &mut errs);
        }
        sum_max += i64::from(max);
        if min > max {
            errs.push(FieldError::invalid(
                format!("{path}[{i}].minReplicas"),
                &to_json(&s.min_replicas),
                format!("subset[{i}].minReplicas must be less than or equal to maxReplicas"),
            ));
        }
    }
    if has_replicas && has_capacity {
        errs.push(FieldError::invalid(
            path,
            &json!("replicas and minReplicas/maxReplicas"),
            "subset.Replicas and subset.MinReplicas/subset.MaxReplicas are mutually exclusive in a UnitedDeployment",
        ));
        return errs;
    }
    if has_capacity {
        if total.is_none() {
            errs.push(FieldError::required(
                "spec.replicas",
                "spec.replicas must be not empty if you set subset.minReplicas/maxReplicas",
            ));
        }
        if count_max >= subsets.len() {
            errs.push(FieldError::invalid(
                path,
                &json!(count_max),
                "at least one subset.maxReplicas must be empty",
            ));
        }
        if sum_min > sum_max {
            errs.push(FieldError::invalid(
                path,
                &json!(sum_min),
                "sum of indicated subset.minReplicas should not be greater than sum of indicated subset.maxReplicas",
            ));
        }
    } else if let Some(t) = total {
        if sum > i64::from(t) {
            errs.push(FieldError::invalid(
                path,
                &json!(sum),
                format!("sum of indicated subset replicas {sum} should not be greater than UnitedDeployment replicas {t}"),
            ));
        }
        if count > 0 && count == subsets.len() && sum != i64::from(t) {
            errs.push(FieldError::invalid(
                path,
                &json!(sum),
                format!("if replicas of all subsets are provided, the sum of indicated subset replicas {sum} should equal UnitedDeployment replicas {t}"),
            ));
        }
    } else if count != subsets.len() {
        errs.push(FieldError::invalid(
            path,
            &json!(sum),
            "if UnitedDeployment replicas is not provided, replicas of all subsets should be provided",
        ));
    }
    errs
}

/// Upstream `validateUnitedDeploymentSpecUpdate`: a kept subset's node selector term and
/// tolerations may not change; a StatefulSet template may change only its Pod template and
/// update strategy.
pub fn update_errors(new: &UnitedDeploymentSpec, old: &UnitedDeploymentSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, s) in new.topology.subsets.iter().enumerate() {
        let Some(o) = old.topology.subsets.iter().find(|o| o.name == s.name) else {
            continue;
        };
        let path = format!("spec.topology.subsets[{i}]");
        if s.node_selector_term != o.node_selector_term {
            errs.push(FieldError::forbidden(
                format!("{path}.nodeSelectorTerm"),
                "may not be changed in an update",
            ));
        }
        if s.tolerations != o.tolerations {
            errs.push(FieldError::forbidden(
                format!("{path}.tolerations"),
                "may not be changed in an update",
            ));
        }
    }
    let strip = |v: Value| {
        let mut v = v;
        if let Some(m) = v.as_object_mut() {
            for k in ["replicas", "template", "updateStrategy"] {
                m.remove(k);
            }
        }
        v
    };
    let (t, ot) = (&new.template, &old.template);
    if let (Some(a), Some(b)) = (&t.stateful_set_template, &ot.stateful_set_template)
        && strip(a.spec.clone()) != strip(b.spec.clone())
    {
        errs.push(FieldError::forbidden(
            "spec.template.statefulSetTemplate.spec",
            "updates to statefulsetTemplate spec for fields other than 'template', and 'updateStrategy' are forbidden",
        ));
    }
    if let (Some(a), Some(b)) = (
        &t.advanced_stateful_set_template,
        &ot.advanced_stateful_set_template,
    ) && strip(to_json(&a.spec)) != strip(to_json(&b.spec))
    {
        errs.push(FieldError::forbidden(
            "spec.template.advancedStatefulSetTemplate.spec",
            "updates to advancedStatefulsetTemplate spec for fields other than 'template', and 'updateStrategy' are forbidden",
        ));
    }
    errs
}
