//! CloneSet scale and update strategy rules (part of `/validate-apps-kruise-io-cloneset`, see
//! [`super::validation`]): partition, maxUnavailable/maxSurge, in-place, priority and scatter
//! strategies, after upstream's `validateCloneSetSpec`.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::field::FieldError;
use crate::json::IntOrPercent;
use crate::workload::selector::LabelSelector;
use kruise_api::keys;

pub(crate) fn validate_scale_strategy(spec: &Value, errs: &mut Vec<FieldError>) {
    let Some(ss) = spec.get("scaleStrategy").filter(|v| !v.is_null()) else {
        return;
    };
    if let Some(ptd) = ss.get("podsToDelete").filter(|v| !v.is_null()) {
        match ptd.as_array() {
            Some(items) => {
                let mut seen = BTreeSet::new();
                let mut dup = BTreeSet::new();
                for item in items {
                    match item.as_str() {
                        Some(s) if !seen.insert(s) => {
                            dup.insert(s);
                        }
                        Some(_) => {}
                        None => errs.push(FieldError::invalid(
                            "spec.scaleStrategy.podsToDelete",
                            item,
                            "must be a pod name",
                        )),
                    }
                }
                if !dup.is_empty() {
                    let dup: Vec<&str> = dup.into_iter().collect();
                    errs.push(FieldError::invalid(
                        "spec.scaleStrategy.podsToDelete",
                        ptd,
                        format!("duplicated items [{}]", dup.join(" ")),
                    ));
                }
            }
            None => errs.push(FieldError::invalid(
                "spec.scaleStrategy.podsToDelete",
                ptd,
                "must be a list of pod names",
            )),
        }
    }
    if let Some(mu) = ss.get("maxUnavailable").filter(|v| !v.is_null()) {
        check_int_or_percent(mu, "spec.scaleStrategy.maxUnavailable", errs);
    }
}

fn check_int_or_percent(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> Option<IntOrPercent> {
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

pub(crate) fn validate_update_strategy(
    spec: &Value,
    replicas: i64,
    version: &str,
    errs: &mut Vec<FieldError>,
) {
    let null = Value::Null;
    let us = spec.get("updateStrategy").unwrap_or(&null);
    if !us.is_null() && !us.is_object() {
        errs.push(FieldError::invalid(
            "spec.updateStrategy",
            us,
            "must be an object",
        ));
        return;
    }
    let Some((rolling, rolling_path, policy_key)) = rolling_fields(us, version, errs) else {
        return;
    };
    validate_rolling(rolling, &rolling_path, policy_key, replicas, version, errs);
}

/// Where the rolling fields are, checking the policy on the way: the object, its path and the
/// key of the policy; `None` when there are none to check.
fn rolling_fields<'a>(
    us: &'a Value,
    version: &str,
    errs: &mut Vec<FieldError>,
) -> Option<(&'a Value, String, &'static str)> {
    let null = &Value::Null;
    // v1alpha1 keeps the rolling fields flat under updateStrategy with the policy in `type`;
    // v1beta1 nests them under rollingUpdate with the policy in `podUpdatePolicy`.
    Some(if version == keys::VERSION_V1ALPHA1 {
        let ty = us.get("type").unwrap_or(null);
        match ty.as_str() {
            Some("ReCreate" | "InPlaceIfPossible" | "InPlaceOnly" | "OnDelete") => {}
            // Defaulting sets ReCreate; absent is fine.
            None if ty.is_null() => {}
            _ => errs.push(FieldError::invalid(
                "spec.updateStrategy.type",
                ty,
                "must be 'ReCreate', 'InPlaceIfPossible', 'InPlaceOnly' or 'OnDelete'",
            )),
        }
        (us, "spec.updateStrategy".to_owned(), "type")
    } else {
        let ty = us.get("type").unwrap_or(null);
        match ty.as_str() {
            Some("RollingUpdate" | "OnDelete" | "") => {}
            None if ty.is_null() => {}
            _ => errs.push(FieldError::invalid(
                "spec.updateStrategy.type",
                ty,
                "must be 'RollingUpdate' or 'OnDelete'",
            )),
        }
        let ru = us.get("rollingUpdate").unwrap_or(null);
        if ru.is_null() {
            return None;
        }
        if !ru.is_object() {
            errs.push(FieldError::invalid(
                "spec.updateStrategy.rollingUpdate",
                ru,
                "must be an object",
            ));
            return None;
        }
        let policy = ru.get("podUpdatePolicy").unwrap_or(null);
        match policy.as_str() {
            Some("ReCreate" | "InPlaceIfPossible" | "InPlaceOnly" | "") => {}
            None if policy.is_null() => {}
            _ => errs.push(FieldError::invalid(
                "spec.updateStrategy.rollingUpdate.podUpdatePolicy",
                policy,
                "must be 'ReCreate', 'InPlaceIfPossible' or 'InPlaceOnly'",
            )),
        }
        (
            ru,
            "spec.updateStrategy.rollingUpdate".to_owned(),
            "podUpdatePolicy",
        )
    })
}

/// The rolling fields at `rolling_path`: partition, maxUnavailable and maxSurge, the
/// strategies.
fn validate_rolling(
    rolling: &Value,
    rolling_path: &str,
    policy_key: &str,
    replicas: i64,
    version: &str,
    errs: &mut Vec<FieldError>,
) {
    let null = Value::Null;
    let in_place_only = rolling.get(policy_key).and_then(Value::as_str) == Some("InPlaceOnly");
    let field = |name: &str| rolling.get(name).filter(|v| !v.is_null());

    if let Some(p) = field("partition") {
        check_int_or_percent(p, &format!("{rolling_path}.partition"), errs);
    }
    let max_unavailable = field("maxUnavailable")
        .and_then(|v| check_int_or_percent(v, &format!("{rolling_path}.maxUnavailable"), errs));
    let max_surge_value = field("maxSurge");
    let max_surge = max_surge_value
        .and_then(|v| check_int_or_percent(v, &format!("{rolling_path}.maxSurge"), errs));
    let surge = max_surge.map(|s| s.scaled(replicas, true)).unwrap_or(0);
    if let Some(v) = max_surge_value
        && in_place_only
        && surge > 0
    {
        let rule = if version == keys::VERSION_V1ALPHA1 {
            "can not use maxSurge with strategy type InPlaceOnly"
        } else {
            "can not use maxSurge with podUpdatePolicy InPlaceOnly"
        };
        errs.push(FieldError::invalid(
            format!("{rolling_path}.maxSurge"),
            v,
            rule,
        ));
    }
    let unavailable = max_unavailable
        .map(|u| u.scaled(replicas, true))
        .unwrap_or(0);
    let numbers_ok = field("maxUnavailable").is_none_or(|_| max_unavailable.is_some())
        && max_surge_value.is_none_or(|_| max_surge.is_some());
    if numbers_ok && replicas > 0 && unavailable < 1 && surge < 1 {
        errs.push(FieldError::invalid(
            format!("{rolling_path}.maxUnavailable"),
            field("maxUnavailable").unwrap_or(&null),
            "maxUnavailable and maxSurge should not both be less than 1",
        ));
    }
    if let Some(ps) = field("priorityStrategy")
        && let Err(rule) = priority_strategy_problem(ps)
    {
        errs.push(FieldError::required(
            format!("{rolling_path}.priorityStrategy"),
            rule,
        ));
    }
    if let Some(ss) = field("scatterStrategy")
        && let Err(rule) = scatter_strategy_problem(ss)
    {
        errs.push(FieldError::required(
            format!("{rolling_path}.scatterStrategy"),
            rule,
        ));
    }
    if let Some(ips) = field("inPlaceUpdateStrategy") {
        validate_in_place_strategy(ips, &format!("{rolling_path}.inPlaceUpdateStrategy"), errs);
    }
}

fn validate_in_place_strategy(ips: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(g) = ips.get("gracePeriodSeconds").filter(|v| !v.is_null()) {
        non_negative(g, &format!("{path}.gracePeriodSeconds"), errs);
    }
    if let Some(p) = ips
        .get("imagePreDownloadParallelism")
        .filter(|v| !v.is_null())
    {
        let p_path = format!("{path}.imagePreDownloadParallelism");
        match p {
            Value::String(s) if s.ends_with('%') => errs.push(FieldError::invalid(
                p_path,
                p,
                "imagePreDownloadParallelism does not support percentage value",
            )),
            Value::String(s) => match s.parse::<i32>() {
                Ok(n) if n < 0 => errs.push(FieldError::invalid(
                    p_path,
                    p,
                    "imagePreDownloadParallelism must be non-negative",
                )),
                Ok(_) => {}
                Err(_) => errs.push(FieldError::invalid(
                    p_path,
                    p,
                    "imagePreDownloadParallelism must be a valid integer",
                )),
            },
            other => non_negative(other, &p_path, errs),
        }
    }
    for key in [
        "imagePreDownloadTimeoutSeconds",
        "imagePreDownloadMinUpdatedReadyPods",
    ] {
        if let Some(v) = ips.get(key).filter(|v| !v.is_null()) {
            non_negative(v, &format!("{path}.{key}"), errs);
        }
    }
}

/// A 32-bit integer that is not negative (upstream `ValidateNonnegativeField`).
pub(super) fn non_negative(v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match v.as_i64().filter(|i| i32::try_from(*i).is_ok()) {
        Some(i) if i < 0 => errs.push(FieldError::invalid(
            path,
            v,
            "must be greater than or equal to 0",
        )),
        Some(_) => {}
        None => errs.push(FieldError::invalid(path, v, "must be a 32-bit integer")),
    }
}

fn priority_strategy_problem(ps: &Value) -> Result<(), &'static str> {
    let list = |k: &str| {
        ps.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let weights = list("weightPriority");
    let orders = list("orderPriority");
    if !weights.is_empty() && !orders.is_empty() {
        return Err("only one of weightPriority and orderPriority can be used");
    }
    for w in &weights {
        let weight = w.get("weight").and_then(Value::as_i64).unwrap_or(0);
        if !(0..=100).contains(&weight) {
            return Err("weight must be valid number in the range 1-100");
        }
        let sel = w.get("matchSelector").unwrap_or(&Value::Null);
        match LabelSelector::parse(sel, "matchSelector") {
            Ok(s) if s.is_empty() => return Err("selector can not be empty"),
            Ok(_) => {}
            Err(_) => return Err("invalid selector"),
        }
    }
    for o in &orders {
        if o.get("orderedKey")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err("order key can not be empty");
        }
    }
    Ok(())
}

fn scatter_strategy_problem(ss: &Value) -> Result<(), String> {
    let Some(terms) = ss.as_array() else {
        return Err("must be a list of {key, value} terms".to_owned());
    };
    let mut seen = BTreeSet::new();
    for t in terms {
        let key = t.get("key").and_then(Value::as_str).unwrap_or_default();
        let value = t.get("value").and_then(Value::as_str).unwrap_or_default();
        if key.is_empty() {
            return Err("key should not be empty".to_owned());
        }
        if !seen.insert((key, value)) {
            return Err(format!("duplicated key={key} value={value}"));
        }
    }
    Ok(())
}
