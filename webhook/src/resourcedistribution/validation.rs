//! ResourceDistribution validation (upstream `ResourceDistributionCreateUpdateHandler`): the
//! resource is a v1 Secret or ConfigMap with a name, its kind and name never change, the listed
//! namespaces are valid names and not both included and excluded, and the namespace selector
//! is a valid selector. Every refusal names its field.
//!
//! Upstream also dry-runs the resource's create in its own namespace; we do not (a resource the
//! API server refuses shows as `CreateResourceFailed` in the status instead; see
//! docs/kinds/resourcedistribution.md).

use std::collections::BTreeSet;

use kruise_api::apps::v1alpha1::{DistributedResource, ResourceError};
use serde_json::{Value, json};

use crate::field::{FieldError, dns_subdomain_problem};
use crate::json::get;
use crate::review::{Outcome, Request, creating_or_updating, verdict};
use crate::workload::selector::LabelSelector;

/// `/validate-apps-kruise-io-v1alpha1-resourcedistribution` (CREATE and UPDATE).
pub fn validate(req: &Request) -> Outcome {
    match creating_or_updating(req) {
        Ok(Some(o)) => verdict(&distribution_errors(o, req.old_object.as_ref())),
        Ok(None) => Outcome::Allow,
        Err(o) => o,
    }
}

/// Every problem of a distribution; `old` is the object before an update.
pub fn distribution_errors(rd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = get(rd, &["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !name.is_empty()
        && let Some(problem) = dns_subdomain_problem(name)
    {
        errs.push(FieldError::invalid("metadata.name", &json!(name), problem));
    }
    errs.extend(resource_errors(
        get(rd, &["spec", "resource"]),
        old.and_then(|o| get(o, &["spec", "resource"])),
    ));
    errs.extend(target_errors(
        get(rd, &["spec", "targets"]).unwrap_or(&Value::Null),
    ));
    errs
}

/// `spec.resource`: distributable, and the same kind and name as before an update.
fn resource_errors(resource: Option<&Value>, old: Option<&Value>) -> Vec<FieldError> {
    const PATH: &str = "spec.resource";
    let value = resource.unwrap_or(&Value::Null);
    let parsed = match DistributedResource::parse(value) {
        Ok(r) => r,
        Err(e) => {
            let (path, shown) = match &e {
                ResourceError::Unsupported { .. } => (
                    format!("{PATH}.kind"),
                    json!(format!(
                        "{}/{}",
                        value
                            .get("apiVersion")
                            .and_then(Value::as_str)
                            .unwrap_or(""),
                        value.get("kind").and_then(Value::as_str).unwrap_or("")
                    )),
                ),
                ResourceError::NoName => (format!("{PATH}.metadata.name"), json!("")),
                ResourceError::Empty | ResourceError::NotAnObject => {
                    (PATH.to_owned(), value.clone())
                }
            };
            return vec![FieldError::invalid(path, &shown, e.to_string())];
        }
    };
    let Some(old) = old.map(|o| (o, DistributedResource::parse(o))) else {
        return Vec::new();
    };
    let same_version = old.0.get("apiVersion") == value.get("apiVersion");
    match old.1 {
        Ok(before) if before == parsed && same_version => Vec::new(),
        // An old object we could not read is not this update's fault.
        Err(_) => Vec::new(),
        Ok(before) => vec![FieldError::invalid(
            PATH,
            &json!(format!("{} {}", parsed.kind, parsed.name)),
            format!(
                "resource apiVersion, kind, and name are immutable (was {} {}); create another ResourceDistribution to distribute another resource",
                before.kind, before.name
            ),
        )],
    }
}

/// `spec.targets`: namespace names, included ∩ excluded, the label selector.
fn target_errors(targets: &Value) -> Vec<FieldError> {
    const PATH: &str = "spec.targets";
    let mut errs = Vec::new();
    let list = |field: &str| -> Vec<String> {
        get(targets, &[field, "list"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|n| {
                n.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    };
    let included = list("includedNamespaces");
    let excluded = list("excludedNamespaces");
    for (field, names) in [
        ("includedNamespaces", &included),
        ("excludedNamespaces", &excluded),
    ] {
        for (i, name) in names.iter().enumerate() {
            if let Some(problem) = namespace_name_problem(name) {
                errs.push(FieldError::invalid(
                    format!("{PATH}.{field}.list[{i}].name"),
                    &json!(name),
                    problem,
                ));
            }
        }
    }
    let inc: BTreeSet<&str> = included.iter().map(String::as_str).collect();
    let both: Vec<&str> = excluded
        .iter()
        .map(String::as_str)
        .filter(|n| inc.contains(n))
        .collect();
    if !both.is_empty() {
        errs.push(FieldError::invalid(
            PATH,
            &json!(both),
            format!(
                "ambiguous targets because namespace {both:?} is in both includedNamespaces.list and excludedNamespaces.list"
            ),
        ));
    }
    if let Some(sel) = targets
        .get("namespaceLabelSelector")
        .filter(|s| !s.is_null())
    {
        let path = format!("{PATH}.namespaceLabelSelector");
        match LabelSelector::parse(sel, &path) {
            Ok(_) => errs.extend(selector_label_errors(sel, &path)),
            Err(e) => errs.extend(e),
        }
    }
    errs
}

/// Label keys and values of a selector (apimachinery's `LabelSelectorAsSelector` refuses what
/// is not a qualified name or a label value).
fn selector_label_errors(sel: &Value, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(p) = qualified_name_problem(k) {
            errs.push(FieldError::invalid(
                format!("{path}.matchLabels"),
                &json!(k),
                format!("label key {p}"),
            ));
        }
        if let Some(p) = v.as_str().and_then(label_value_problem) {
            errs.push(FieldError::invalid(
                format!("{path}.matchLabels"),
                v,
                format!("label value {p}"),
            ));
        }
    }
    let exprs = sel.get("matchExpressions").and_then(Value::as_array);
    for (i, e) in exprs.into_iter().flatten().enumerate() {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        if let Some(p) = (!key.is_empty())
            .then(|| qualified_name_problem(key))
            .flatten()
        {
            errs.push(FieldError::invalid(
                format!("{path}.matchExpressions[{i}].key"),
                &json!(key),
                format!("label key {p}"),
            ));
        }
        let values = e.get("values").and_then(Value::as_array);
        for (j, v) in values.into_iter().flatten().enumerate() {
            if let Some(p) = v.as_str().and_then(label_value_problem) {
                errs.push(FieldError::invalid(
                    format!("{path}.matchExpressions[{i}].values[{j}]"),
                    v,
                    format!("label value {p}"),
                ));
            }
        }
    }
    errs
}

/// Kubernetes' namespace name rule (a DNS-1123 label).
pub fn namespace_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("a namespace name must not be empty");
    }
    let ok = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let alnum = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if name.len() > 63 {
        Some("must be no more than 63 characters")
    } else if !ok || !alnum(name.as_bytes().first()) || !alnum(name.as_bytes().last()) {
        Some(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        )
    } else {
        None
    }
}

/// The name part of a label key, or a label value: at most 63 of `[A-Za-z0-9-_.]`, starting
/// and ending alphanumeric.
fn name_part_problem(s: &str) -> Option<&'static str> {
    let ok = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let alnum = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    if s.len() > 63 {
        Some("must be no more than 63 characters")
    } else if !ok || !alnum(s.as_bytes().first()) || !alnum(s.as_bytes().last()) {
        Some(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        )
    } else {
        None
    }
}

/// apimachinery's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS subdomain.
fn qualified_name_problem(key: &str) -> Option<&'static str> {
    match key.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() {
                Some("prefix part must be non-empty")
            } else if let Some(p) = dns_subdomain_problem(prefix) {
                Some(p)
            } else if name.is_empty() {
                Some("name part must be non-empty")
            } else {
                name_part_problem(name)
            }
        }
        None if key.is_empty() => Some("name part must be non-empty"),
        None => name_part_problem(key),
    }
}

/// apimachinery's `IsValidLabelValue`: empty, or a name part.
fn label_value_problem(v: &str) -> Option<&'static str> {
    if v.is_empty() {
        None
    } else {
        name_part_problem(v)
    }
}
