//! Rules every workload kind shares (CloneSet, Advanced StatefulSet, Advanced DaemonSet):
//! deletion protection and the InPlaceOnly template rule.

use serde_json::Value;

use crate::json::get;
use kruise_api::keys;

/// Upstream's `ValidateWorkloadDeletion` for the `policy.kruise.io/delete-protection` label.
pub fn deletion_protection(old: &Value) -> Option<String> {
    if get(old, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        return None;
    }
    let label = get(old, &["metadata", "labels", keys::DELETE_PROTECTION_LABEL])?.as_str()?;
    let replicas = get(old, &["spec", "replicas"]).and_then(Value::as_i64);
    match label {
        keys::DELETE_PROTECTION_ALWAYS => Some(format!(
            "forbidden by ResourcesProtectionDeletion for {}={label}",
            keys::DELETE_PROTECTION_LABEL
        )),
        keys::DELETE_PROTECTION_CASCADING if replicas.is_some_and(|r| r > 0) => Some(format!(
            "forbidden by ResourcesProtectionDeletion for {}={label} and replicas {}>0",
            keys::DELETE_PROTECTION_LABEL,
            replicas.unwrap_or_default()
        )),
        _ => None,
    }
}

/// Under InPlaceOnly the template spec may only change container images.
pub fn in_place_only_problem(old_spec: &Value, new_spec: &Value) -> Option<String> {
    let patch = json_patch::diff(old_spec, new_spec);
    patch.0.iter().find_map(|op| {
        let (name, path) = match op {
            json_patch::PatchOperation::Replace(r) => ("replace", r.path.to_string()),
            json_patch::PatchOperation::Add(a) => ("add", a.path.to_string()),
            json_patch::PatchOperation::Remove(r) => ("remove", r.path.to_string()),
            json_patch::PatchOperation::Move(m) => ("move", m.path.to_string()),
            json_patch::PatchOperation::Copy(c) => ("copy", c.path.to_string()),
            json_patch::PatchOperation::Test(t) => ("test", t.path.to_string()),
        };
        let image_replace = name == "replace" && is_container_image_path(&path);
        (!image_replace).then(|| {
            format!(
                "only allowed to update images in spec for InPlaceOnly, but found {name} {path}"
            )
        })
    })
}

fn is_container_image_path(path: &str) -> bool {
    let mut parts = path.trim_start_matches('/').split('/');
    parts.next() == Some("containers")
        && parts
            .next()
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        && parts.next() == Some("image")
        && parts.next().is_none()
}
