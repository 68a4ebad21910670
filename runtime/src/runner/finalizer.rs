//! Adding and removing one finalizer, for the controllers whose finalizer is not tied to
//! deletion alone.
//!
//! `kube::runtime::finalizer` adds its finalizer to every object it reconciles and removes it
//! only after the object is deleted. Neither of ours works that way:
//! - ContainerRecreateRequest's `crr.apps.kruise.io/unready-acquired` is added only when the
//!   request holds its Pod not-ready, and released as soon as the request finishes;
//! - ImagePullJob's `apps.kruise.io/deletion-protection` is released when the job completes
//!   (upstream's `IsJobFinished` branch), and `finalizer()` would add it straight back.
//!
//! So both write the list themselves, through these helpers: a merge patch guarded by the
//! resourceVersion the decision was made on, so a concurrent change conflicts and is retried.

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Whether `obj` carries finalizer `name`.
pub fn has<K: Resource>(obj: &K, name: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == name))
}

/// The finalizer list with `name` added, or `None` when it is already there.
pub fn with<K: Resource>(obj: &K, name: &str) -> Option<Vec<String>> {
    if has(obj, name) {
        return None;
    }
    let mut f = obj.meta().finalizers.clone().unwrap_or_default();
    f.push(name.to_string());
    Some(f)
}

/// The finalizer list without `name`, or `None` when it is not there.
pub fn without<K: Resource>(obj: &K, name: &str) -> Option<Vec<String>> {
    if !has(obj, name) {
        return None;
    }
    let f = obj.meta().finalizers.iter().flatten();
    Some(f.filter(|f| *f != name).cloned().collect())
}

/// Writes `finalizers` as the object's list, guarded by its resourceVersion. `api` may be of
/// another version of `obj`'s kind (the stored one, see [`crate::stored`]): the patch is the
/// same in every version.
async fn set<K, O>(api: &Api<K>, obj: &O, finalizers: Vec<String>) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    O: Resource,
{
    let patch = json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": obj.resource_version(),
        }
    });
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Adds finalizer `name`; true when a write was made.
pub async fn add<K, O>(api: &Api<K>, obj: &O, name: &str) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    O: Resource,
{
    let Some(f) = with(obj, name) else {
        return Ok(false);
    };
    set(api, obj, f).await?;
    Ok(true)
}

/// Removes finalizer `name`; true when a write was made.
pub async fn remove<K, O>(api: &Api<K>, obj: &O, name: &str) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    O: Resource,
{
    let Some(f) = without(obj, name) else {
        return Ok(false);
    };
    set(api, obj, f).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn obj(finalizers: Option<&[&str]>) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.finalizers = finalizers.map(|f| f.iter().map(|s| s.to_string()).collect());
        cm
    }

    #[test]
    fn with_and_without_a_finalizer() {
        struct Case {
            have: Option<&'static [&'static str]>,
            with: Option<&'static [&'static str]>,
            without: Option<&'static [&'static str]>,
        }
        let cases = [
            Case {
                have: None,
                with: Some(&["x"]),
                without: None,
            },
            Case {
                have: Some(&[]),
                with: Some(&["x"]),
                without: None,
            },
            Case {
                have: Some(&["a"]),
                with: Some(&["a", "x"]),
                without: None,
            },
            Case {
                have: Some(&["a", "x", "b"]),
                with: None,
                without: Some(&["a", "b"]),
            },
            Case {
                have: Some(&["x"]),
                with: None,
                without: Some(&[]),
            },
        ];
        let owned = |v: Option<&[&str]>| v.map(|v| v.iter().map(|s| s.to_string()).collect());
        for (i, c) in cases.iter().enumerate() {
            let o = obj(c.have);
            assert_eq!(with(&o, "x"), owned(c.with), "case {i}: with");
            assert_eq!(without(&o, "x"), owned(c.without), "case {i}: without");
            assert_eq!(has(&o, "x"), c.with.is_none(), "case {i}: has");
        }
    }
}
