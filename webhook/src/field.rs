//! Field errors rendered the way the Kubernetes API server renders them, so users see familiar
//! `spec.x: Invalid value: ...: rule` messages.

use std::fmt;

use serde_json::Value;

/// One validation failure at one field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path, e.g. `spec.updateStrategy.rollingUpdate.partition`.
    pub path: String,
    /// What is wrong.
    pub kind: FieldErrorKind,
}

/// Mirrors the apimachinery error types we need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// A value was given but breaks a rule: (rendered value, rule).
    Invalid(String, String),
    /// The field must be set.
    Required(String),
    /// The field may not be set or changed.
    Forbidden(String),
    /// The value is not one of the allowed ones: (rendered value, allowed values).
    NotSupported(String, Vec<String>),
    /// Already phrased by the API server (a cause of a dry-run refusal), shown after the path
    /// as it came, e.g. `Invalid value: "Main_X": a lowercase RFC 1123 label must ...`.
    Reported(String),
}

impl FieldError {
    /// `path: Invalid value: <value>: <rule>`.
    pub fn invalid(path: impl Into<String>, value: &Value, rule: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: FieldErrorKind::Invalid(render(value), rule.into()),
        }
    }

    /// `path: Required value[: detail]`.
    pub fn required(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: FieldErrorKind::Required(detail.into()),
        }
    }

    /// `path: Forbidden: detail`.
    pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: FieldErrorKind::Forbidden(detail.into()),
        }
    }

    /// `path: <detail>`, the detail as the API server phrased it.
    pub fn reported(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: FieldErrorKind::Reported(detail.into()),
        }
    }

    /// `path: Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(path: impl Into<String>, value: &Value, allowed: &[&str]) -> Self {
        Self {
            path: path.into(),
            kind: FieldErrorKind::NotSupported(
                render(value),
                allowed.iter().map(|s| (*s).to_owned()).collect(),
            ),
        }
    }
}

/// Strings quoted, everything else as compact JSON (upstream prints Go values; JSON is the
/// closest thing a user can paste back).
pub fn render(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        other => other.to_string(),
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            FieldErrorKind::Invalid(v, rule) if rule.is_empty() => {
                write!(f, "{}: Invalid value: {v}", self.path)
            }
            FieldErrorKind::Invalid(v, rule) => {
                write!(f, "{}: Invalid value: {v}: {rule}", self.path)
            }
            FieldErrorKind::Required(d) if d.is_empty() => {
                write!(f, "{}: Required value", self.path)
            }
            FieldErrorKind::Required(d) => write!(f, "{}: Required value: {d}", self.path),
            FieldErrorKind::Forbidden(d) => write!(f, "{}: Forbidden: {d}", self.path),
            FieldErrorKind::Reported(d) => write!(f, "{}: {d}", self.path),
            FieldErrorKind::NotSupported(v, allowed) => {
                let allowed: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
                write!(
                    f,
                    "{}: Unsupported value: {v}: supported values: {}",
                    self.path,
                    allowed.join(", ")
                )
            }
        }
    }
}

/// Joins errors like apimachinery's aggregate: one error as is, several in brackets.
pub fn aggregate(errors: &[FieldError]) -> String {
    match errors {
        [] => String::new(),
        [one] => one.to_string(),
        many => {
            let parts: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

/// Kubernetes' DNS-1123 subdomain rule for object names.
pub fn dns_subdomain_problem(name: &str) -> Option<&'static str> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let ends_ok = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if name.len() > 253 {
        Some("must be no more than 253 characters")
    } else if !ok_chars || !ends_ok(name.as_bytes().first()) || !ends_ok(name.as_bytes().last()) {
        Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        )
    } else {
        None
    }
}
