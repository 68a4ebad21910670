//! PodProbeMarker validation (upstream `validatePodProbeMarkerSpec`): a non-empty valid
//! selector, immutable on update; at least one probe; each probe named (unique, without `#`,
//! not a native Pod condition type), with a container, exactly one handler (exec with a
//! command, tcpSocket or httpGet with a valid port), non-negative timing; `podConditionType`
//! or `markerPolicy` (both allowed), the condition types unique and valid label names; marker
//! states Succeeded or Failed, each once, each with labels or annotations; an httpGet scheme
//! HTTP or HTTPS (upstream `supportedHTTPSchemes`).

use std::collections::BTreeSet;

use kruise_api::keys;
use serde_json::Value;

use crate::field::FieldError;
use kube::core::admission::Operation;

/// The httpGet schemes kruise-daemon probes (upstream's, case-sensitive as there).
const HTTP_SCHEMES: [&str; 2] = ["HTTP", "HTTPS"];

use crate::review::{Outcome, Request, creating_or_updating, verdict};
use crate::workload::selector::LabelSelector;

/// Pod condition types a probe may not take (upstream's `k8sNativePodConditions`).
const NATIVE_CONDITIONS: &[&str] = &[
    keys::k8s::POD_SCHEDULED,
    keys::k8s::POD_INITIALIZED,
    keys::k8s::POD_READY,
    keys::k8s::CONTAINERS_READY,
    keys::KRUISE_POD_READY,
    keys::INPLACE_UPDATE_READY,
];
const STATES: &[&str] = &["Succeeded", "Failed"];

/// `/validate-apps-kruise-io-v1alpha1-podprobemarker`.
pub fn validate(req: &Request) -> Outcome {
    let obj = match creating_or_updating(req) {
        Ok(Some(o)) => o,
        Ok(None) => return Outcome::Allow,
        Err(o) => return o,
    };
    let mut errs = podprobemarker_errors(obj);
    if req.operation == Operation::Update
        && let Some(old) = &req.old_object
        && old.pointer("/spec/selector") != obj.pointer("/spec/selector")
    {
        errs.push(FieldError::invalid(
            "spec.selector",
            obj.pointer("/spec/selector").unwrap_or(&Value::Null),
            "selector must be immutable: delete the PodProbeMarker and create it again to \
             probe other Pods",
        ));
    }
    verdict(&errs)
}

/// Every problem of a PodProbeMarker.
pub fn podprobemarker_errors(ppm: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(spec) = ppm.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldError::required(
            "spec",
            "a PodProbeMarker needs a spec",
        ));
        return errs;
    };
    match spec.get("selector").filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required(
            "spec.selector",
            "a PodProbeMarker needs a selector naming the Pods to probe",
        )),
        Some(sel) => match LabelSelector::parse(sel, "spec.selector") {
            Err(e) => errs.extend(e),
            Ok(s) if s.is_empty() => errs.push(FieldError::invalid(
                "spec.selector",
                sel,
                "empty selector is not valid for podProbeMarker: give matchLabels or \
                 matchExpressions",
            )),
            Ok(_) => {}
        },
    }
    let probes = spec.get("probes").and_then(Value::as_array);
    let Some(probes) = probes.filter(|p| !p.is_empty()) else {
        errs.push(FieldError::required(
            "spec.probes",
            "empty probes is not valid for PodProbeMarker: give at least one probe",
        ));
        return errs;
    };
    let mut names = BTreeSet::new();
    let mut conditions = BTreeSet::new();
    for (i, p) in probes.iter().enumerate() {
        probe_errors(
            &format!("spec.probes[{i}]"),
            p,
            &mut names,
            &mut conditions,
            &mut errs,
        );
    }
    errs
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn probe_errors(
    path: &str,
    p: &Value,
    names: &mut BTreeSet<String>,
    conditions: &mut BTreeSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let name = str_at(p, "name");
    let name_path = format!("{path}.name");
    if name.is_empty() {
        errs.push(FieldError::required(
            name_path,
            "probe name can't be empty in PodProbeMarker",
        ));
    } else if name.contains('#') {
        errs.push(FieldError::invalid(
            name_path,
            &Value::from(name),
            "probe name can't contains '#' (it separates the marker's name from the probe's)",
        ));
    } else if NATIVE_CONDITIONS.contains(&name) {
        errs.push(FieldError::invalid(
            name_path,
            &Value::from(name),
            format!("probe name can't be {name}: it is a native Pod condition type"),
        ));
    } else if !names.insert(name.to_owned()) {
        errs.push(FieldError::invalid(
            name_path,
            &Value::from(name),
            "probe name must be unique in PodProbeMarker",
        ));
    }
    if str_at(p, "containerName").is_empty() {
        errs.push(FieldError::required(
            format!("{path}.containerName"),
            "probe containerName can't be empty in PodProbeMarker: name the container to probe",
        ));
    }
    match p.get("probe").filter(|v| v.is_object()) {
        None => errs.push(FieldError::required(
            format!("{path}.probe"),
            "probe can't be empty in podProbeMarker",
        )),
        Some(probe) => handler_errors(&format!("{path}.probe"), probe, errs),
    }
    let cond = str_at(p, "podConditionType");
    let policies = p.get("markerPolicy").and_then(Value::as_array);
    if cond.is_empty() && policies.is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(
            format!("{path}.podConditionType"),
            "podConditionType and markerPolicy cannot be empty at the same time: give one or both",
        ));
    }
    if !cond.is_empty() {
        let cpath = format!("{path}.podConditionType");
        if !conditions.insert(cond.to_owned()) {
            errs.push(FieldError::invalid(
                cpath,
                &Value::from(cond),
                format!("podConditionType {cond} must be unique in podProbeMarker"),
            ));
        } else if let Some(why) = qualified_name_problem(cond) {
            errs.push(FieldError::invalid(cpath, &Value::from(cond), why));
        } else if NATIVE_CONDITIONS.contains(&cond) {
            errs.push(FieldError::invalid(
                cpath,
                &Value::from(cond),
                format!("podConditionType can't be {cond}: it is a native Pod condition type"),
            ));
        }
    }
    let mut states = BTreeSet::new();
    for (j, pol) in policies.into_iter().flatten().enumerate() {
        marker_policy_errors(&format!("{path}.markerPolicy[{j}]"), pol, &mut states, errs);
    }
}

/// One `markerPolicy` entry: a known state, once; labels or annotations, with valid keys.
fn marker_policy_errors<'a>(
    ppath: &str,
    pol: &'a Value,
    states: &mut BTreeSet<&'a str>,
    errs: &mut Vec<FieldError>,
) {
    let state = str_at(pol, "state");
    if !STATES.contains(&state) {
        errs.push(FieldError::not_supported(
            format!("{ppath}.state"),
            pol.get("state").unwrap_or(&Value::Null),
            STATES,
        ));
    } else if !states.insert(state) {
        errs.push(FieldError::invalid(
            format!("{ppath}.state"),
            &Value::from(state),
            "marker policy state must be unique",
        ));
    }
    let empty = |k: &str| {
        pol.get(k)
            .and_then(Value::as_object)
            .is_none_or(|m| m.is_empty())
    };
    if empty("labels") && empty("annotations") {
        errs.push(FieldError::required(
            ppath,
            "marker policy annotations or labels can't be both empty",
        ));
    }
    for (k, v) in pol
        .get("labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(why) = qualified_name_problem(k) {
            errs.push(FieldError::invalid(
                format!("{ppath}.labels"),
                &Value::from(k.as_str()),
                why,
            ));
        }
        if v.as_str().is_none_or(|s| s.len() > 63) {
            errs.push(FieldError::invalid(
                format!("{ppath}.labels[{k}]"),
                v,
                "a label value must be a string of at most 63 characters",
            ));
        }
    }
    for k in pol
        .get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        if let Some(why) = qualified_name_problem(k) {
            errs.push(FieldError::invalid(
                format!("{ppath}.annotations"),
                &Value::from(k.as_str()),
                why,
            ));
        }
    }
}

/// Exactly one handler, each as upstream's `validateHandler` checks it; timing not negative.
fn handler_errors(path: &str, probe: &Value, errs: &mut Vec<FieldError>) {
    let present: Vec<&str> = ["exec", "httpGet", "tcpSocket"]
        .into_iter()
        .filter(|k| probe.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    match present.as_slice() {
        [] => errs.push(FieldError::required(
            path,
            "must specify a handler type: exec, httpGet or tcpSocket",
        )),
        [_, extra, ..] => errs.push(FieldError::forbidden(
            format!("{path}.{extra}"),
            "may not specify more than 1 handler type",
        )),
        ["exec"] => {
            let cmd = probe.pointer("/exec/command").and_then(Value::as_array);
            if cmd.is_none_or(Vec::is_empty) {
                errs.push(FieldError::required(
                    format!("{path}.exec.command"),
                    "the command to run in the container",
                ));
            }
        }
        ["httpGet"] => {
            let h = &probe["httpGet"];
            port_errors(&format!("{path}.httpGet.port"), h.get("port"), errs);
            let scheme = h.get("scheme").and_then(Value::as_str).unwrap_or("HTTP");
            if !HTTP_SCHEMES.contains(&scheme) {
                errs.push(FieldError::not_supported(
                    format!("{path}.httpGet.scheme"),
                    &Value::from(scheme),
                    &HTTP_SCHEMES,
                ));
            }
            if !h
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or("/")
                .starts_with('/')
            {
                errs.push(FieldError::invalid(
                    format!("{path}.httpGet.path"),
                    &h["path"],
                    "must be a valid URL path starting with '/'",
                ));
            }
        }
        _ => port_errors(
            &format!("{path}.tcpSocket.port"),
            probe.pointer("/tcpSocket/port"),
            errs,
        ),
    }
    for key in [
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ] {
        if let Some(v) = probe.get(key).filter(|v| !v.is_null())
            && v.as_i64().is_none_or(|n| n < 0 || n > i64::from(i32::MAX))
        {
            errs.push(FieldError::invalid(
                format!("{path}.{key}"),
                v,
                "must be greater than or equal to 0",
            ));
        }
    }
}

fn port_errors(path: &str, port: Option<&Value>, errs: &mut Vec<FieldError>) {
    match port {
        Some(Value::Number(n)) if n.as_i64().is_some_and(|p| (1..=65535).contains(&p)) => {}
        Some(Value::String(s))
            if !s.is_empty()
                && s.len() <= 15
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && s.bytes().any(|b| b.is_ascii_lowercase()) => {}
        Some(v) => errs.push(FieldError::invalid(
            path,
            v,
            "must be a port number between 1 and 65535 or the name of a container port",
        )),
        None => errs.push(FieldError::required(path, "the port to connect to")),
    }
}

/// Kubernetes' qualified-name rule (label keys, condition types): `[prefix/]name`, the name at
/// most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric.
fn qualified_name_problem(s: &str) -> Option<&'static str> {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix
        && (p.is_empty() || crate::field::dns_subdomain_problem(p).is_some())
    {
        return Some("prefix part must be a DNS-1123 subdomain");
    }
    let alnum = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && alnum(name.as_bytes().first())
        && alnum(name.as_bytes().last());
    (!ok).then_some(
        "name part must consist of at most 63 alphanumeric characters, '-', '_' or '.', and must \
         start and end with an alphanumeric character",
    )
}
