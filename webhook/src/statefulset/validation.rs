//! Advanced StatefulSet validation. Messages name the field, the value and the rule.

use std::collections::BTreeMap;

use kube::core::admission::Operation;
use serde_json::{Value, json};

use crate::field::FieldError;
use crate::field::dns_subdomain_problem;
use crate::json::{IntOrPercent, get};
use crate::review::verdict;
use crate::review::{Outcome, Request};
use crate::workload::selector::LabelSelector;
use crate::workload::validation::in_place_only_problem;
use kruise_api::apps::v1beta1::MAX_MIN_READY_SECONDS;
use kruise_api::keys;

/// Admission entry point.
pub fn validate(req: &Request) -> Outcome {
    let version = req.version.as_str();
    if version != keys::VERSION_V1ALPHA1 && version != keys::VERSION_V1BETA1 {
        return Outcome::bad_request(format!("unsupported StatefulSet version {version:?}"));
    }
    match req.operation {
        Operation::Create | Operation::Update => {
            let Some(obj) = &req.object else {
                return Outcome::bad_request("StatefulSet request carries no object");
            };
            let old = match (&req.operation, &req.old_object) {
                (Operation::Update, Some(o)) => Some(o),
                (Operation::Update, None) => {
                    return Outcome::bad_request("StatefulSet UPDATE carries no oldObject");
                }
                _ => None,
            };
            verdict(&validate_statefulset(obj, old))
        }
        _ => Outcome::Allow,
    }
}

/// Every field error of `obj` (and of its change from `old`).
pub fn validate_statefulset(obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(name) = get(obj, &["metadata", "name"]).and_then(Value::as_str)
        && !name.is_empty()
        && let Some(rule) = dns_subdomain_problem(name)
    {
        errs.push(FieldError::invalid("metadata.name", &json!(name), rule));
    }
    let null = Value::Null;
    let spec = get(obj, &["spec"]).unwrap_or(&null);
    if !spec.is_object() {
        errs.push(FieldError::required("spec", ""));
        return errs;
    }
    let replicas = match spec.get("replicas") {
        None | Some(Value::Null) => 1,
        Some(v) => match v.as_i64() {
            Some(n) if n >= 0 => n,
            _ => {
                errs.push(FieldError::invalid(
                    "spec.replicas",
                    v,
                    "must be greater than or equal to 0",
                ));
                0
            }
        },
    };
    validate_selector(spec, &mut errs);
    validate_containers(spec, &mut errs);
    validate_policy(spec, &mut errs);
    validate_update_strategy(spec, replicas, &mut errs);
    validate_reserve_ordinals(spec, &mut errs);
    if let Some(v) = get(spec, &["ordinals", "start"])
        && v.as_i64().is_none_or(|n| n < 0)
    {
        errs.push(FieldError::invalid(
            "spec.ordinals.start",
            v,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(v) = get(spec, &["volumeClaimUpdateStrategy", "type"])
        && !v.is_null()
        && !matches!(v.as_str(), Some("OnPodRollingUpdate" | "OnDelete"))
    {
        errs.push(FieldError::not_supported(
            "spec.volumeClaimUpdateStrategy.type",
            v,
            &["OnPodRollingUpdate", "OnDelete"],
        ));
    }
    for field in ["whenDeleted", "whenScaled"] {
        if let Some(v) = get(spec, &["persistentVolumeClaimRetentionPolicy", field])
            && !matches!(v.as_str(), Some("Retain" | "Delete"))
        {
            errs.push(FieldError::not_supported(
                format!("spec.persistentVolumeClaimRetentionPolicy.{field}"),
                v,
                &["Retain", "Delete"],
            ));
        }
    }
    if let Some(old) = old {
        validate_update(spec, get(old, &["spec"]).unwrap_or(&null), &mut errs);
    }
    errs
}

fn template_labels(spec: &Value) -> BTreeMap<String, String> {
    get(spec, &["template", "metadata", "labels"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn validate_selector(spec: &Value, errs: &mut Vec<FieldError>) {
    let Some(sel) = spec.get("selector").filter(|v| !v.is_null()) else {
        errs.push(FieldError::required("spec.selector", ""));
        return;
    };
    match LabelSelector::parse(sel, "spec.selector") {
        Err(e) => errs.extend(e),
        Ok(s) if s.is_empty() => errs.push(FieldError::invalid(
            "spec.selector",
            sel,
            "empty selector is invalid for statefulset",
        )),
        Ok(s) => {
            let labels = template_labels(spec);
            if !s.matches(&labels) {
                errs.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    &json!(labels),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
}

/// The pod template needs containers, each with a name and an image (the apiserver would
/// refuse every pod created from it).
fn validate_containers(spec: &Value, errs: &mut Vec<FieldError>) {
    let containers = get(spec, &["template", "spec", "containers"]).and_then(Value::as_array);
    let Some(containers) = containers.filter(|c| !c.is_empty()) else {
        errs.push(FieldError::required(
            "spec.template.spec.containers",
            "at least one container",
        ));
        return;
    };
    for (i, c) in containers.iter().enumerate() {
        for field in ["name", "image"] {
            if c.get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errs.push(FieldError::required(
                    format!("spec.template.spec.containers[{i}].{field}"),
                    "",
                ));
            }
        }
    }
}

fn validate_policy(spec: &Value, errs: &mut Vec<FieldError>) {
    if let Some(v) = spec.get("podManagementPolicy")
        && !v.is_null()
        && !matches!(v.as_str(), Some("OrderedReady" | "Parallel"))
    {
        errs.push(FieldError::not_supported(
            "spec.podManagementPolicy",
            v,
            &["OrderedReady", "Parallel"],
        ));
    }
    if let Some(v) = get(spec, &["updateStrategy", "type"])
        && !v.is_null()
        && !matches!(v.as_str(), Some("RollingUpdate" | "OnDelete"))
    {
        errs.push(FieldError::not_supported(
            "spec.updateStrategy.type",
            v,
            &["RollingUpdate", "OnDelete"],
        ));
    }
}

fn validate_update_strategy(spec: &Value, replicas: i64, errs: &mut Vec<FieldError>) {
    let Some(ru) = get(spec, &["updateStrategy", "rollingUpdate"]).filter(|v| !v.is_null()) else {
        return;
    };
    let base = "spec.updateStrategy.rollingUpdate";
    if let Some(v) = ru.get("partition").filter(|v| !v.is_null())
        && v.as_i64().is_none_or(|n| n < 0)
    {
        errs.push(FieldError::invalid(
            format!("{base}.partition"),
            v,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(v) = ru.get("maxUnavailable").filter(|v| !v.is_null()) {
        match IntOrPercent::parse(v) {
            Err(rule) => errs.push(FieldError::invalid(
                format!("{base}.maxUnavailable"),
                v,
                rule,
            )),
            Ok(m) if m.out_of_range() => errs.push(FieldError::invalid(
                format!("{base}.maxUnavailable"),
                v,
                "must be between 0 and 100% (or a non-negative integer)",
            )),
            Ok(m) if m.scaled(replicas, false) < 1 && replicas > 0 => {
                errs.push(FieldError::invalid(
                    format!("{base}.maxUnavailable"),
                    v,
                    "must be greater than 0 (it is rounded down against spec.replicas)",
                ));
            }
            Ok(_) => {}
        }
    }
    if let Some(v) = ru.get("podUpdatePolicy").filter(|v| !v.is_null())
        && !matches!(
            v.as_str(),
            Some("ReCreate" | "InPlaceIfPossible" | "InPlaceOnly")
        )
    {
        errs.push(FieldError::not_supported(
            format!("{base}.podUpdatePolicy"),
            v,
            &["ReCreate", "InPlaceIfPossible", "InPlaceOnly"],
        ));
    }
    if let Some(v) = ru.get("minReadySeconds").filter(|v| !v.is_null())
        && v.as_i64()
            .is_none_or(|n| !(0..=i64::from(MAX_MIN_READY_SECONDS)).contains(&n))
    {
        errs.push(FieldError::invalid(
            format!("{base}.minReadySeconds"),
            v,
            "must be between 0 and 300",
        ));
    }
    if ru.get("unorderedUpdate").is_some_and(|v| !v.is_null())
        && spec.get("podManagementPolicy").and_then(Value::as_str) != Some("Parallel")
    {
        errs.push(FieldError::forbidden(
            format!("{base}.unorderedUpdate"),
            "only allowed to work with Parallel podManagementPolicy",
        ));
    }
}

fn validate_reserve_ordinals(spec: &Value, errs: &mut Vec<FieldError>) {
    let Some(list) = spec.get("reserveOrdinals").and_then(Value::as_array) else {
        return;
    };
    for (i, v) in list.iter().enumerate() {
        let ok = match v {
            Value::Number(n) => n.as_i64().is_some_and(|n| n >= 0),
            Value::String(s) => match s.split_once('-') {
                Some((a, b)) => matches!(
                    (a.trim().parse::<i64>(), b.trim().parse::<i64>()),
                    (Ok(a), Ok(b)) if 0 <= a && a <= b
                ),
                None => s.trim().parse::<i64>().is_ok_and(|n| n >= 0),
            },
            _ => false,
        };
        if !ok {
            errs.push(FieldError::invalid(
                format!("spec.reserveOrdinals[{i}]"),
                v,
                "must be an ordinal >= 0 or a range \"a-b\" with a <= b",
            ));
        }
    }
}

/// Upstream's immutable fields, and InPlaceOnly's images-only rule.
fn validate_update(spec: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    // volumeClaimTemplates may change (upstream v1.9): the new templates reach claims made
    // later, and, under StatefulSetAutoResizePVCGate with OnPodRollingUpdate, a bigger size
    // reaches the existing claims (see [`super::claims`]).
    for field in ["selector", "serviceName", "podManagementPolicy"] {
        let (a, b) = (spec.get(field), old.get(field));
        let empty = |v: Option<&Value>| v.is_none_or(Value::is_null);
        if a != b && !(empty(a) && empty(b)) {
            errs.push(FieldError::forbidden(
                format!("spec.{field}"),
                "updates to statefulset spec for fields other than 'replicas', 'template', 'updateStrategy', 'reserveOrdinals', 'lifecycle', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy', 'ordinals', 'scaleStrategy', 'volumeClaimTemplates' and 'volumeClaimUpdateStrategy' are forbidden",
            ));
        }
    }
    let policy = get(
        spec,
        &["updateStrategy", "rollingUpdate", "podUpdatePolicy"],
    )
    .and_then(Value::as_str);
    if policy == Some("InPlaceOnly") {
        let null = Value::Null;
        let (new_t, old_t) = (
            get(spec, &["template", "spec"]).unwrap_or(&null),
            get(old, &["template", "spec"]).unwrap_or(&null),
        );
        if let Some(problem) = in_place_only_problem(old_t, new_t) {
            errs.push(FieldError::forbidden("spec.template.spec", problem));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> Value {
        json!({
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3, "serviceName": "web", "podManagementPolicy": "OrderedReady",
                "reserveOrdinals": [],
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                             "spec": {"containers": [{"name": "c", "image": "a:1"}]}},
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1, "maxUnavailable": "50%"}}
            }
        })
    }

    fn errors(obj: &Value, old: Option<&Value>) -> Vec<String> {
        validate_statefulset(obj, old)
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    #[test]
    fn a_valid_set_passes() {
        assert_eq!(errors(&valid(), None), Vec::<String>::new());
        assert_eq!(errors(&valid(), Some(&valid())), Vec::<String>::new());
    }

    #[test]
    fn each_bad_field_is_named() {
        let rows: [(&str, Value, &str); 9] = [
            (
                "/spec/template/spec/containers/0/image",
                json!(""),
                "spec.template.spec.containers[0].image",
            ),
            (
                "/spec/selector",
                json!({"matchLabels": {"app": "other"}}),
                "spec.template.metadata.labels",
            ),
            ("/spec/selector", json!({}), "spec.selector"),
            (
                "/spec/updateStrategy/rollingUpdate/partition",
                json!(-1),
                "spec.updateStrategy.rollingUpdate.partition",
            ),
            (
                "/spec/updateStrategy/rollingUpdate/maxUnavailable",
                json!("150%"),
                "spec.updateStrategy.rollingUpdate.maxUnavailable",
            ),
            (
                "/spec/updateStrategy/rollingUpdate/maxUnavailable",
                json!(0),
                "spec.updateStrategy.rollingUpdate.maxUnavailable",
            ),
            (
                "/spec/podManagementPolicy",
                json!("Random"),
                "spec.podManagementPolicy",
            ),
            (
                "/spec/reserveOrdinals",
                json!([1, "4-2"]),
                "spec.reserveOrdinals[1]",
            ),
            ("/spec/replicas", json!(-2), "spec.replicas"),
        ];
        for (ptr, value, field) in rows {
            let mut obj = valid();
            *obj.pointer_mut(ptr).expect(ptr) = value.clone();
            let errs = errors(&obj, None);
            assert!(
                errs.iter().any(|e| e.starts_with(field)),
                "{ptr}={value}: {errs:?}"
            );
        }
    }

    #[test]
    fn immutable_fields_and_in_place_only() {
        let old = valid();
        for (ptr, value) in [
            ("/spec/serviceName", json!("other")),
            ("/spec/podManagementPolicy", json!("Parallel")),
        ] {
            let mut obj = valid();
            match obj.pointer_mut(ptr) {
                Some(v) => *v = value,
                None => {
                    obj["spec"]["podManagementPolicy"] = value;
                }
            }
            let errs = errors(&obj, Some(&old));
            assert!(
                errs.iter().any(|e| e.contains(&ptr[1..].replace('/', "."))),
                "{ptr}: {errs:?}"
            );
        }
        // Claim templates may change (their size reaches claims under the resize gate).
        let mut obj = valid();
        obj["spec"]["volumeClaimTemplates"] = json!([{"metadata": {"name": "data"}}]);
        assert_eq!(errors(&obj, Some(&valid())), Vec::<String>::new());
        obj["spec"]["volumeClaimUpdateStrategy"] = json!({"type": "Sometimes"});
        let errs = errors(&obj, Some(&valid()));
        assert!(
            errs.iter()
                .any(|e| e.starts_with("spec.volumeClaimUpdateStrategy.type")),
            "{errs:?}"
        );
        let mut old = valid();
        old["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"] = json!("InPlaceOnly");
        let mut obj = old.clone();
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = json!("a:2");
        assert_eq!(errors(&obj, Some(&old)), Vec::<String>::new());
        obj["spec"]["template"]["spec"]["containers"][0]["env"] =
            json!([{"name": "X", "value": "1"}]);
        let errs = errors(&obj, Some(&old));
        assert!(
            errs.iter().any(|e| e.starts_with("spec.template.spec")),
            "{errs:?}"
        );
    }
}
