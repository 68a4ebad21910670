//! Advanced StatefulSet claim-template updates under `StatefulSetAutoResizePVCGate` (upstream
//! `ValidateVolumeClaimTemplateUpdate`): with `volumeClaimUpdateStrategy.type:
//! OnPodRollingUpdate` the templates may only change their storage size, and a resized
//! template's StorageClass must not refuse expansion (`allowVolumeExpansion: false`). Other
//! strategies (OnDelete, unset) accept any template edit: it reaches only claims made later.

use std::future::Future;

use k8s_openapi::api::storage::v1::StorageClass;
use kruise_api::features::{FeatureGates, Gate};
use kube::core::admission::Operation;
use serde_json::Value;

use crate::field::FieldError;
use crate::json::get;
use crate::review::{Outcome, Request, verdict};

/// The StorageClasses a resize is checked against.
pub trait StorageClassLookup: Sync {
    /// The StorageClass `name`, or the cluster's default one when `name` is `None` (the newest
    /// of those annotated default); `Ok(None)` when there is none.
    fn storage_class(
        &self,
        _name: Option<&str>,
    ) -> impl Future<Output = Result<Option<StorageClass>, String>> + Send {
        std::future::ready(Err("the webhook cannot read StorageClasses".to_owned()))
    }
}

/// A template whose storage size changed: its name and `storageClassName`.
#[derive(Debug, PartialEq)]
pub struct Resized {
    pub name: String,
    pub storage_class: Option<String>,
}

/// Admission entry point: the pure rules ([`super::validation::validate`]), then the resized
/// templates' StorageClasses.
pub async fn validate<C: StorageClassLookup>(
    req: Request,
    cluster: &C,
    gates: &FeatureGates,
) -> Outcome {
    let out = super::validation::validate(&req);
    if out != Outcome::Allow
        || req.operation != Operation::Update
        || !gates.enabled(Gate::StatefulSetAutoResizePVCGate)
    {
        return out;
    }
    let (Some(obj), Some(old)) = (&req.object, &req.old_object) else {
        return out;
    };
    let null = Value::Null;
    let spec = get(obj, &["spec"]).unwrap_or(&null);
    let resized = match resized_templates(spec, get(old, &["spec"]).unwrap_or(&null)) {
        Ok(r) => r,
        Err(e) => return verdict(&[e]),
    };
    for r in resized {
        if let Some(e) = expansion_refusal(cluster, &r).await {
            return verdict(&[e]);
        }
    }
    Outcome::Allow
}

/// Why the StorageClass of `r` refuses the resize, if it does (no default class: nothing to
/// check, as upstream).
async fn expansion_refusal<C: StorageClassLookup>(cluster: &C, r: &Resized) -> Option<FieldError> {
    let base = format!("spec.volumeClaimTemplates[{}].spec", r.name);
    let sc = match cluster.storage_class(r.storage_class.as_deref()).await {
        Ok(Some(sc)) => sc,
        Ok(None) if r.storage_class.is_none() => return None,
        Ok(None) => {
            return Some(FieldError::invalid(
                format!("{base}.storageClassName"),
                &Value::from(r.storage_class.clone()),
                "StorageClass not found",
            ));
        }
        Err(e) => {
            return Some(FieldError::invalid(
                format!("{base}.storageClassName"),
                &Value::from(r.storage_class.clone()),
                format!("cannot read the StorageClass: {e}"),
            ));
        }
    };
    (sc.allow_volume_expansion == Some(false)).then(|| {
        FieldError::forbidden(
            format!("{base}.resources.requests.storage"),
            format!(
                "storage class {} does not support volume expansion",
                sc.metadata.name.unwrap_or_default()
            ),
        )
    })
}

/// The templates of an update whose storage size changed, when the strategy is
/// OnPodRollingUpdate; the first rule broken otherwise: no template added or removed, none
/// renamed, nothing but the size changed (storageClassName and accessModes compared, as
/// upstream).
pub fn resized_templates(spec: &Value, old: &Value) -> Result<Vec<Resized>, FieldError> {
    if get(spec, &["volumeClaimUpdateStrategy", "type"]).and_then(Value::as_str)
        != Some("OnPodRollingUpdate")
    {
        return Ok(Vec::new());
    }
    let list = |s: &Value| {
        s.get("volumeClaimTemplates")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (new, old) = (list(spec), list(old));
    if new.len() != old.len() {
        return Err(FieldError::invalid(
            "spec.volumeClaimTemplates",
            &Value::from(new.len()),
            "volumeClaimTemplates can not be added or deleted when volumeClaimUpdateStrategy is OnPodRollingUpdate",
        ));
    }
    let name = |t: &Value| {
        get(t, &["metadata", "name"])
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut out = Vec::new();
    for t in &new {
        let n = name(t);
        let Some(o) = old.iter().find(|o| name(o) == n) else {
            return Err(FieldError::forbidden(
                format!("spec.volumeClaimTemplates[{n}].metadata.name"),
                "a volumeClaimTemplate's name can not be modified",
            ));
        };
        if !same_class_and_modes(t, o) {
            return Err(FieldError::invalid(
                format!("spec.volumeClaimTemplates[{n}]"),
                &Value::from(n.clone()),
                "only the storage size of a volumeClaimTemplate can be modified when volumeClaimUpdateStrategy is OnPodRollingUpdate",
            ));
        }
        if size_changed(t, o) {
            out.push(Resized {
                storage_class: get(t, &["spec", "storageClassName"])
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                name: n,
            });
        }
    }
    Ok(out)
}

/// Upstream `IsClaimCompatibleWithoutSize`: storageClassName (when both name one) and
/// accessModes.
fn same_class_and_modes(a: &Value, b: &Value) -> bool {
    fn sc(t: &Value) -> Option<&str> {
        get(t, &["spec", "storageClassName"]).and_then(Value::as_str)
    }
    let modes = |t: &Value| get(t, &["spec", "accessModes"]).cloned();
    let classes_differ = matches!((sc(a), sc(b)), (Some(x), Some(y)) if x != y);
    !classes_differ && modes(a).unwrap_or(Value::Null) == modes(b).unwrap_or(Value::Null)
}

/// Whether the storage request or limit differs (compared as quantities: `1Gi` is `1024Mi`).
fn size_changed(a: &Value, b: &Value) -> bool {
    ["requests", "limits"].iter().any(|k| {
        let q = |t: &Value| {
            get(t, &["spec", "resources", k, "storage"])
                .and_then(Value::as_str)
                .map(|s| {
                    kruise_api::vct_hash::parse_quantity(s)
                        .and_then(|p| p.milli())
                        .ok_or_else(|| s.to_owned())
                })
        };
        q(a) != q(b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(strategy: &str, templates: Value) -> Value {
        json!({"volumeClaimUpdateStrategy": {"type": strategy}, "volumeClaimTemplates": templates})
    }

    fn tpl(name: &str, sc: Option<&str>, size: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"storageClassName": sc,
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}})
    }

    #[test]
    fn only_the_size_may_change_on_pod_rolling_update() {
        let old = spec(
            "OnPodRollingUpdate",
            json!([tpl("data", Some("fast"), "1Gi")]),
        );
        let same = spec(
            "OnPodRollingUpdate",
            json!([tpl("data", Some("fast"), "1024Mi")]),
        );
        assert_eq!(resized_templates(&same, &old), Ok(vec![]));
        let grown = spec(
            "OnPodRollingUpdate",
            json!([tpl("data", Some("fast"), "2Gi")]),
        );
        assert_eq!(
            resized_templates(&grown, &old),
            Ok(vec![Resized {
                name: "data".into(),
                storage_class: Some("fast".into())
            }])
        );
        let rows = [
            (
                json!([tpl("data", Some("slow"), "2Gi")]),
                "spec.volumeClaimTemplates[data]",
            ),
            (
                json!([tpl("logs", Some("fast"), "1Gi")]),
                "spec.volumeClaimTemplates[logs].metadata.name",
            ),
            (
                json!([tpl("data", Some("fast"), "1Gi"), tpl("logs", None, "1Gi")]),
                "spec.volumeClaimTemplates",
            ),
        ];
        for (templates, field) in rows {
            let e =
                resized_templates(&spec("OnPodRollingUpdate", templates), &old).expect_err(field);
            assert!(e.to_string().starts_with(field), "{e}");
        }
        // OnDelete: anything goes.
        let other = spec("OnDelete", json!([tpl("logs", Some("slow"), "5Gi")]));
        assert_eq!(resized_templates(&other, &old), Ok(vec![]));
    }

    struct Classes(Vec<StorageClass>);

    impl StorageClassLookup for Classes {
        async fn storage_class(&self, name: Option<&str>) -> Result<Option<StorageClass>, String> {
            Ok(self
                .0
                .iter()
                .find(|s| name.is_none_or(|n| s.metadata.name.as_deref() == Some(n)))
                .cloned())
        }
    }

    fn class(name: &str, allow: Option<bool>) -> StorageClass {
        StorageClass {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            allow_volume_expansion: allow,
            provisioner: "x".into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_class_refusing_expansion_refuses_the_resize() {
        let cluster = Classes(vec![class("no", Some(false)), class("unset", None)]);
        let resized = |sc: &str| Resized {
            name: "data".into(),
            storage_class: Some(sc.into()),
        };
        let e = expansion_refusal(&cluster, &resized("no"))
            .await
            .expect("refused");
        assert!(
            e.to_string()
                .starts_with("spec.volumeClaimTemplates[data].spec.resources.requests.storage"),
            "{e}"
        );
        // Unset is not a refusal (upstream refuses only an explicit false).
        assert_eq!(expansion_refusal(&cluster, &resized("unset")).await, None);
        let e = expansion_refusal(&cluster, &resized("gone"))
            .await
            .expect("missing");
        assert!(e.to_string().contains("storageClassName"), "{e}");
        // No default class: nothing to check.
        let none = Classes(vec![]);
        let default = Resized {
            name: "data".into(),
            storage_class: None,
        };
        assert_eq!(expansion_refusal(&none, &default).await, None);
    }
}
