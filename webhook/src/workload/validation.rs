//! Rules every workload kind shares (CloneSet, Advanced StatefulSet, Advanced DaemonSet): the
//! InPlaceOnly template rule. (Deletion protection is `crate::deletionprotection`.)

use serde_json::Value;

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
