//! Advanced DaemonSet validation (`/validate-apps-kruise-io-daemonset`), after upstream's
//! `pkg/webhook/daemonset/validating` (`validateDaemonSet`, `validateDaemonSetSpec`,
//! `ValidateRollingUpdateDaemonSet`, `validateDaemonSetUpdate`). Messages name the field, the
//! value and how to fix it.

use std::collections::BTreeMap;

use kube::core::admission::Operation;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::field::dns_subdomain_problem;
use crate::field::{FieldError, aggregate};
use crate::json::{IntOrPercent, get};
use crate::review::{Outcome, Request};
use crate::workload::selector::LabelSelector;
use kruise_api::apps::v1beta1::{DaemonSetUpdateStrategyType, RollingUpdateType};
use kruise_api::keys;

const RU: &str = "spec.updateStrategy.rollingUpdate";

/// Admission entry point (CREATE, UPDATE and DELETE).
pub fn validate(req: &Request) -> Outcome {
    let version = req.version.as_str();
    if version != keys::VERSION_V1ALPHA1 && version != keys::VERSION_V1BETA1 {
        return Outcome::bad_request(format!("unsupported DaemonSet version {version:?}"));
    }
    match req.operation {
        Operation::Create | Operation::Update => {
            let Some(obj) = &req.object else {
                return Outcome::bad_request("DaemonSet request carries no object");
            };
            let old = match (&req.operation, &req.old_object) {
                (Operation::Update, None) => {
                    return Outcome::bad_request("DaemonSet UPDATE carries no oldObject");
                }
                (Operation::Update, Some(o)) => Some(o),
                _ => None,
            };
            let errors = validate_daemonset(obj, old, version);
            if errors.is_empty() {
                Outcome::Allow
            } else {
                Outcome::invalid(aggregate(&errors))
            }
        }
        // Deletion protection answers every DELETE on this path before the field rules
        // (`crate::deletionprotection`, which needs the feature gates).
        Operation::Delete => Outcome::Allow,
        Operation::Connect => Outcome::Allow,
    }
}

/// Every field error of `obj` (and of the change from `old`, on UPDATE).
pub fn validate_daemonset(obj: &Value, old: Option<&Value>, version: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(name) = get(obj, &["metadata", "name"]).and_then(Value::as_str)
        && !name.is_empty()
        && let Some(rule) = dns_subdomain_problem(name)
    {
        errs.push(FieldError::invalid("metadata.name", &json!(name), rule));
    }
    let Some(spec) = get(obj, &["spec"]).filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", "a DaemonSet needs a spec"));
        return errs;
    };
    validate_selector_and_template(spec, &mut errs);
    for field in ["minReadySeconds", "revisionHistoryLimit"] {
        if let Some(v) = spec.get(field).filter(|v| !v.is_null())
            && v.as_i64()
                .is_none_or(|n| n < 0 || i32::try_from(n).is_err())
        {
            errs.push(FieldError::invalid(
                format!("spec.{field}"),
                v,
                "must be an integer greater than or equal to 0",
            ));
        }
    }
    if let Some(b) = spec.get("burstReplicas").filter(|v| !v.is_null()) {
        int_or_percent(b, "spec.burstReplicas", &mut errs);
    }
    validate_update_strategy(spec, version, &mut errs);
    if let Some(old) = old {
        let (new_sel, old_sel) = (
            get(obj, &["spec", "selector"]),
            get(old, &["spec", "selector"]),
        );
        if new_sel != old_sel {
            errs.push(FieldError::forbidden(
                "spec.selector",
                "field is immutable; delete and recreate the DaemonSet to change its selector",
            ));
        }
    }
    errs
}

fn validate_selector_and_template(spec: &Value, errs: &mut Vec<FieldError>) {
    let matcher = match spec.get("selector").filter(|s| !s.is_null()) {
        None => {
            errs.push(FieldError::required(
                "spec.selector",
                "set matchLabels that the template labels carry",
            ));
            None
        }
        Some(sel) => match LabelSelector::parse(sel, "spec.selector") {
            Err(e) => {
                errs.extend(e);
                None
            }
            Ok(s) if s.is_empty() => {
                errs.push(FieldError::invalid(
                    "spec.selector",
                    sel,
                    "empty selector is invalid for daemonset; set matchLabels",
                ));
                None
            }
            Ok(s) => Some(s),
        },
    };
    let null = Value::Null;
    let labels_value = get(spec, &["template", "metadata", "labels"]).unwrap_or(&null);
    let labels: BTreeMap<String, String> = labels_value
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    if let Some(m) = matcher
        && !m.matches(&labels)
    {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            labels_value,
            "`selector` does not match template `labels`; give the template every label the selector requires",
        ));
    }
    let pod_spec = get(spec, &["template", "spec"]);
    match pod_spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
    {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter().enumerate() {
                let path = format!("spec.template.spec.containers[{i}]");
                if c.get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errs.push(FieldError::required(format!("{path}.name"), ""));
                }
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(|i| i.trim().is_empty())
                {
                    errs.push(FieldError::required(format!("{path}.image"), ""));
                }
            }
        }
        _ => errs.push(FieldError::required(
            "spec.template.spec.containers",
            "a DaemonSet template needs at least one container",
        )),
    }
    // A DaemonSet Pod is meant to run for as long as its node does.
    if let Some(rp) = pod_spec.and_then(|s| s.get("restartPolicy"))
        && !rp.is_null()
        && rp.as_str() != Some("")
        && rp.as_str() != Some("Always")
    {
        errs.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            rp,
            &["Always"],
        ));
    }
    if pod_spec
        .and_then(|s| s.get("activeDeadlineSeconds"))
        .is_some_and(|v| !v.is_null())
    {
        errs.push(FieldError::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            "activeDeadlineSeconds in DaemonSet is not supported; remove it",
        ));
    }
}

/// The wire names of an API enum, for "supported values" lists.
fn variants<T: Serialize>(all: &[T]) -> Vec<String> {
    all.iter()
        .filter_map(|v| serde_json::to_value(v).ok()?.as_str().map(str::to_owned))
        .collect()
}

/// Parses a string field into an API enum; `None` (and an error) for anything else.
fn enum_field<T: Serialize + DeserializeOwned>(
    v: &Value,
    path: &str,
    all: &[T],
    errs: &mut Vec<FieldError>,
) -> Option<T> {
    match crate::json::typed::<T>(v) {
        Ok(t) => Some(t),
        Err(_) => {
            let names = variants(all);
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            errs.push(FieldError::not_supported(path, v, &names));
            None
        }
    }
}

fn int_or_percent(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> Option<IntOrPercent> {
    match IntOrPercent::parse(v) {
        Err(rule) => {
            errs.push(FieldError::invalid(path, v, rule));
            None
        }
        Ok(x) if x.out_of_range() => {
            let rule = match x {
                IntOrPercent::Int(_) => "must be greater than or equal to 0",
                IntOrPercent::Percent(_) => "must be a percentage between 0% and 100%",
            };
            errs.push(FieldError::invalid(path, v, rule));
            None
        }
        Ok(x) => Some(x),
    }
}

fn is_zero(x: Option<IntOrPercent>) -> bool {
    match x {
        Some(IntOrPercent::Int(i)) => i == 0,
        Some(IntOrPercent::Percent(p)) => p == 0.0,
        None => false,
    }
}

fn validate_update_strategy(spec: &Value, version: &str, errs: &mut Vec<FieldError>) {
    let Some(us) = spec.get("updateStrategy").filter(|v| !v.is_null()) else {
        return;
    };
    if !us.is_object() {
        errs.push(FieldError::invalid(
            "spec.updateStrategy",
            us,
            "must be an object",
        ));
        return;
    }
    let ty = match us
        .get("type")
        .filter(|v| !v.is_null() && v.as_str() != Some(""))
    {
        None => DaemonSetUpdateStrategyType::RollingUpdate,
        Some(t) => match enum_field(
            t,
            "spec.updateStrategy.type",
            &[
                DaemonSetUpdateStrategyType::RollingUpdate,
                DaemonSetUpdateStrategyType::OnDelete,
            ],
            errs,
        ) {
            Some(t) => t,
            None => return,
        },
    };
    let Some(ru) = us.get("rollingUpdate").filter(|v| !v.is_null()) else {
        return;
    };
    // OnDelete never reads rollingUpdate, as upstream.
    if ty != DaemonSetUpdateStrategyType::RollingUpdate {
        return;
    }
    if !ru.is_object() {
        errs.push(FieldError::invalid(RU, ru, "must be an object"));
        return;
    }
    let ru_type = match ru
        .get("rollingUpdateType")
        .filter(|v| !v.is_null() && v.as_str() != Some(""))
    {
        None => Some(RollingUpdateType::Standard),
        Some(t) => enum_field(
            t,
            &format!("{RU}.rollingUpdateType"),
            &[
                RollingUpdateType::Standard,
                RollingUpdateType::Surging,
                RollingUpdateType::InPlaceIfPossible,
            ],
            errs,
        ),
    };
    let field = |name: &str| ru.get(name).filter(|v| !v.is_null());
    let max_unavailable = field("maxUnavailable")
        .and_then(|v| int_or_percent(v, &format!("{RU}.maxUnavailable"), errs));
    let max_surge =
        field("maxSurge").and_then(|v| int_or_percent(v, &format!("{RU}.maxSurge"), errs));
    // Absent values are what defaulting would set: maxUnavailable 1, maxSurge 0.
    let mu_zero = field("maxUnavailable").is_some() && is_zero(max_unavailable);
    let ms_zero = field("maxSurge").is_none() || is_zero(max_surge);
    if mu_zero && ms_zero {
        errs.push(FieldError::invalid(
            format!("{RU}.maxUnavailable"),
            field("maxUnavailable").unwrap_or(&Value::Null),
            "may not be 0 when `maxSurge` is 0; set maxUnavailable or maxSurge above 0",
        ));
    }
    if ru_type == Some(RollingUpdateType::Surging) && ms_zero {
        errs.push(FieldError::invalid(
            format!("{RU}.maxSurge"),
            field("maxSurge").unwrap_or(&Value::Null),
            "must be greater than 0 when rollingUpdateType is Surging; set maxSurge (e.g. 1)",
        ));
    }
    if let Some(p) = field("partition") {
        let path = format!("{RU}.partition");
        if version == keys::VERSION_V1ALPHA1 {
            // v1alpha1 carries the partition as a plain count of nodes.
            if p.as_i64()
                .is_none_or(|n| n < 0 || i32::try_from(n).is_err())
            {
                errs.push(FieldError::invalid(
                    path,
                    p,
                    "must be an integer greater than or equal to 0",
                ));
            }
        } else {
            int_or_percent(p, &path, errs);
        }
    }
    if let Some(sel) = field("selector")
        && let Err(e) = LabelSelector::parse(sel, &format!("{RU}.selector"))
    {
        errs.extend(e);
    }
    if let Some(paused) = field("paused")
        && !paused.is_boolean()
    {
        errs.push(FieldError::invalid(
            format!("{RU}.paused"),
            paused,
            "must be true or false",
        ));
    }
}
