//! `metav1.LabelSelector` as the workload kinds validate it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::Value;

use crate::field::FieldError;
use kruise_api::selector::{self, Violation};

/// A parsed `metav1.LabelSelector`: the JSON shape is checked here, the selector rules and the
/// matching are `kruise_api::selector`'s.
#[derive(Debug, Default)]
pub struct LabelSelector(meta::LabelSelector);

impl LabelSelector {
    /// Parses and checks operators/values the way `ValidateLabelSelector` does.
    pub fn parse(v: &Value, path: &str) -> Result<Self, Vec<FieldError>> {
        let mut errs = Vec::new();
        let mut sel = meta::LabelSelector::default();
        if !v.is_object() {
            return Err(vec![FieldError::invalid(
                path,
                v,
                "must be a label selector object",
            )]);
        }
        if let Some(ml) = v.get("matchLabels").filter(|m| !m.is_null()) {
            match ml.as_object() {
                Some(m) => {
                    let labels = sel.match_labels.get_or_insert_with(BTreeMap::new);
                    for (k, val) in m {
                        match val.as_str() {
                            Some(s) => {
                                labels.insert(k.clone(), s.to_owned());
                            }
                            None => errs.push(FieldError::invalid(
                                format!("{path}.matchLabels"),
                                val,
                                "label values must be strings",
                            )),
                        }
                    }
                }
                None => errs.push(FieldError::invalid(
                    format!("{path}.matchLabels"),
                    ml,
                    "must be a map of strings",
                )),
            }
        }
        if let Some(me) = v.get("matchExpressions").filter(|m| !m.is_null()) {
            let Some(list) = me.as_array() else {
                errs.push(FieldError::invalid(
                    format!("{path}.matchExpressions"),
                    me,
                    "must be a list",
                ));
                return Err(errs);
            };
            let exprs = sel.match_expressions.get_or_insert_with(Vec::new);
            for (i, e) in list.iter().enumerate() {
                let epath = format!("{path}.matchExpressions[{i}]");
                let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
                let op = e.get("operator").unwrap_or(&Value::Null);
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let operator = op.as_str().unwrap_or_default();
                for v in selector::requirement_violations(key, operator, values.len()) {
                    errs.push(match v {
                        Violation::KeyRequired => FieldError::required(format!("{epath}.key"), ""),
                        Violation::ValuesRequired => FieldError::required(
                            format!("{epath}.values"),
                            "must be specified when `operator` is 'In' or 'NotIn'",
                        ),
                        Violation::ValuesForbidden => FieldError::forbidden(
                            format!("{epath}.values"),
                            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                        ),
                        Violation::InvalidOperator(_) => FieldError::invalid(
                            format!("{epath}.operator"),
                            op,
                            "not a valid selector operator",
                        ),
                    });
                }
                exprs.push(meta::LabelSelectorRequirement {
                    key: key.to_owned(),
                    operator: operator.to_owned(),
                    values: Some(values),
                });
            }
        }
        if errs.is_empty() {
            Ok(Self(sel))
        } else {
            Err(errs)
        }
    }

    /// No requirement at all (matches everything).
    pub fn is_empty(&self) -> bool {
        selector::is_empty(&self.0)
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        selector::matches(&self.0, labels)
    }
}
