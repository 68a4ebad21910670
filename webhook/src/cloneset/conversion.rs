//! CloneSet v1alpha1 ⇄ v1beta1 conversion, after upstream's `cloneset_conversion.go`.
//!
//! The plain mapping follows upstream (flat `type` ⇄ `type` + `rollingUpdate.podUpdatePolicy`,
//! `disablePVCReuse` ⇄ `enablePVCReuse`, the `excludePreparingDelete` label, the image
//! pre-download annotations). Upstream's mapping loses information (e.g. an OnDelete v1beta1
//! object's `podUpdatePolicy`, v1beta1's `excludePreparingDelete`). To make every round trip
//! exact the generic engine in [`crate::conversion::scheme`] keeps what would be lost in an annotation.

use serde_json::{Map, Value, json};

use crate::conversion::scheme::{Owned, Scheme, set_annotation, set_label};
use kruise_api::keys;

const PREDOWNLOAD: [(&str, &str); 3] = [
    (
        keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION,
        "imagePreDownloadParallelism",
    ),
    (
        keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION,
        "imagePreDownloadTimeoutSeconds",
    ),
    (
        keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION,
        "imagePreDownloadMinUpdatedReadyPods",
    ),
];

/// Everything the two mappings read or write.
const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "updateStrategy"]),
    Owned::Value(&["spec", "scaleStrategy"]),
    Owned::Value(&[
        "metadata",
        "labels",
        keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL,
    ]),
    Owned::Shape(&["metadata", "labels"]),
    Owned::Value(&[
        "metadata",
        "annotations",
        keys::IMAGE_PREDOWNLOAD_PARALLELISM_ANNOTATION,
    ]),
    Owned::Value(&[
        "metadata",
        "annotations",
        keys::IMAGE_PREDOWNLOAD_TIMEOUT_SECONDS_ANNOTATION,
    ]),
    Owned::Value(&[
        "metadata",
        "annotations",
        keys::IMAGE_PREDOWNLOAD_MIN_UPDATED_READY_PODS_ANNOTATION,
    ]),
    Owned::Shape(&["metadata", "annotations"]),
];

/// CloneSet v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one CloneSet to `desired` (`v1alpha1` or `v1beta1`, with or without the group).
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

fn string_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    crate::json::get(obj, path).and_then(Value::as_str)
}

/// Plain v1alpha1 → v1beta1 mapping.
fn map_to_v1beta1(src: &Value) -> Value {
    let mut out = src.clone();
    let exclude = string_at(
        src,
        &[
            "metadata",
            "labels",
            keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL,
        ],
    ) == Some("true");
    let annotations = src
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) else {
        return out;
    };
    // scaleStrategy: inverted PVC reuse flag; the exclude label becomes a field.
    let ss = spec.entry("scaleStrategy").or_insert_with(|| json!({}));
    if let Some(ss) = ss.as_object_mut() {
        let disable = ss.remove("disablePVCReuse").and_then(|v| v.as_bool()) == Some(true);
        ss.insert("enablePVCReuse".to_owned(), json!(!disable));
        if exclude {
            ss.insert("excludePreparingDelete".to_owned(), json!(true));
        }
    }
    // updateStrategy: flat type → type + rollingUpdate.podUpdatePolicy.
    let us = spec.remove("updateStrategy");
    let mut rolling = match us {
        Some(Value::Object(m)) => m,
        Some(other) => {
            // Not an object: nothing sensible to map; keep it for validation to report.
            spec.insert("updateStrategy".to_owned(), other);
            return out;
        }
        None => Map::new(),
    };
    let ty = rolling.remove("type");
    let (beta_type, policy) = match ty.as_ref().and_then(Value::as_str) {
        Some("OnDelete") => ("OnDelete", None),
        Some("InPlaceIfPossible") => ("RollingUpdate", Some("InPlaceIfPossible")),
        Some("InPlaceOnly") => ("RollingUpdate", Some("InPlaceOnly")),
        _ => ("RollingUpdate", Some("ReCreate")),
    };
    if let Some(p) = policy {
        rolling.insert("podUpdatePolicy".to_owned(), json!(p));
    }
    let has_predownload = PREDOWNLOAD.iter().any(|(a, _)| {
        annotations
            .get(*a)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    });
    if has_predownload {
        let ips = rolling
            .entry("inPlaceUpdateStrategy")
            .or_insert_with(|| json!({}));
        if ips.is_null() {
            *ips = json!({});
        }
        if let Some(ips) = ips.as_object_mut() {
            for (ann, field) in PREDOWNLOAD {
                let Some(s) = annotations.get(ann).and_then(Value::as_str) else {
                    continue;
                };
                if s.is_empty() {
                    continue;
                }
                let parsed = s.parse::<i32>().ok();
                if field == "imagePreDownloadParallelism" {
                    // intstr.Parse: an integer when it parses, else the string.
                    ips.insert(
                        field.to_owned(),
                        parsed.map_or_else(|| json!(s), |i| json!(i)),
                    );
                } else if let Some(i) = parsed {
                    ips.insert(field.to_owned(), json!(i));
                }
            }
        }
    }
    let mut new_us = Map::new();
    new_us.insert("type".to_owned(), json!(beta_type));
    // Unlike upstream, OnDelete keeps its rolling fields so they survive the round trip.
    if beta_type != "OnDelete" || !rolling.is_empty() {
        new_us.insert("rollingUpdate".to_owned(), Value::Object(rolling));
    }
    spec.insert("updateStrategy".to_owned(), Value::Object(new_us));
    out
}

/// Plain v1beta1 → v1alpha1 mapping.
fn map_to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    let mut exclude = false;
    let mut predownload: Vec<(&str, String)> = Vec::new();
    if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
        if let Some(Value::Object(ss)) = spec.get_mut("scaleStrategy") {
            let enable = ss.remove("enablePVCReuse").and_then(|v| v.as_bool()) == Some(true);
            if !enable {
                ss.insert("disablePVCReuse".to_owned(), json!(true));
            }
            exclude = ss
                .remove("excludePreparingDelete")
                .and_then(|v| v.as_bool())
                == Some(true);
            // An emptied scaleStrategy stays: the CRD defaults it to {} in both versions, so
            // that is what the v1alpha1 object most likely had.
        } else if !spec.contains_key("scaleStrategy") {
            // Absent means enablePVCReuse=false, i.e. disablePVCReuse=true.
            spec.insert("scaleStrategy".to_owned(), json!({"disablePVCReuse": true}));
        }
        match spec.remove("updateStrategy") {
            Some(Value::Object(mut us)) => {
                let ty = us.remove("type");
                let ru = us.remove("rollingUpdate");
                let mut flat = match ru {
                    Some(Value::Object(m)) => m,
                    _ => Map::new(),
                };
                let policy = flat.remove("podUpdatePolicy");
                let alpha_type = if ty.as_ref().and_then(Value::as_str) == Some("OnDelete") {
                    "OnDelete"
                } else {
                    match policy.as_ref().and_then(Value::as_str) {
                        Some("InPlaceIfPossible") => "InPlaceIfPossible",
                        Some("InPlaceOnly") => "InPlaceOnly",
                        _ => "ReCreate",
                    }
                };
                if let Some(Value::Object(ips)) = flat.get_mut("inPlaceUpdateStrategy") {
                    for (ann, field) in PREDOWNLOAD {
                        if let Some(v) = ips.remove(field) {
                            let s = match v {
                                Value::String(s) => s,
                                Value::Null => continue,
                                other => other.to_string(),
                            };
                            predownload.push((ann, s));
                        }
                    }
                }
                let mut new_us = us;
                new_us.insert("type".to_owned(), json!(alpha_type));
                for (k, v) in flat {
                    new_us.insert(k, v);
                }
                spec.insert("updateStrategy".to_owned(), Value::Object(new_us));
            }
            Some(other) => {
                spec.insert("updateStrategy".to_owned(), other);
            }
            None => {
                spec.insert("updateStrategy".to_owned(), json!({"type": "ReCreate"}));
            }
        }
    }
    if exclude {
        set_label(
            &mut out,
            keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL,
            "true".to_owned(),
        );
    }
    for (ann, v) in predownload {
        set_annotation(&mut out, ann, v);
    }
    out
}
