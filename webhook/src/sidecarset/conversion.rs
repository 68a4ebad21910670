//! SidecarSet v1alpha1 ⇄ v1beta1 conversion, after upstream's `sidecarset_conversion.go`:
//! v1alpha1's `spec.namespace` becomes a `kubernetes.io/metadata.name` namespaceSelector (it
//! wins over a namespaceSelector), and the label `apps.kruise.io/sidecarset-custom-version`
//! is v1beta1's `spec.customVersion`. The generic [`Scheme`] keeps what does not round-trip.

use serde_json::{Value, json};

use crate::conversion::scheme::{Owned, Scheme, get_at, set_label};
use kruise_api::keys::SIDECARSET_CUSTOM_VERSION_LABEL;
use kruise_api::sidecarset::namespace_as_selector;

const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "namespace"]),
    Owned::Value(&["spec", "namespaceSelector"]),
    Owned::Value(&["spec", "customVersion"]),
    Owned::Value(&["metadata", "labels", SIDECARSET_CUSTOM_VERSION_LABEL]),
    Owned::Shape(&["metadata", "labels"]),
];

/// SidecarSet v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one SidecarSet to `desired`.
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

/// Plain v1alpha1 → v1beta1.
fn map_to_v1beta1(src: &Value) -> Value {
    let mut out = src.clone();
    let namespace = get_at(src, &["spec", "namespace"])
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let custom = get_at(
        src,
        &["metadata", "labels", SIDECARSET_CUSTOM_VERSION_LABEL],
    )
    .and_then(Value::as_str)
    .map(str::to_owned);
    if let Some(o) = out.as_object_mut() {
        if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("namespace");
            if let Some(ns) = &namespace {
                spec.insert("namespaceSelector".to_owned(), namespace_as_selector(ns));
            }
            if let Some(c) = custom.as_ref().filter(|c| !c.is_empty()) {
                spec.insert("customVersion".to_owned(), json!(c));
            }
        }
        if custom.is_some()
            && let Some(labels) = o
                .get_mut("metadata")
                .and_then(|m| m.get_mut("labels"))
                .and_then(Value::as_object_mut)
        {
            labels.remove(SIDECARSET_CUSTOM_VERSION_LABEL);
        }
    }
    out
}

/// Plain v1beta1 → v1alpha1.
fn map_to_v1alpha1(src: &Value) -> Value {
    let mut out = src.clone();
    let custom = get_at(src, &["spec", "customVersion"])
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("customVersion");
    }
    if let Some(c) = custom {
        set_label(&mut out, SIDECARSET_CUSTOM_VERSION_LABEL, c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpha() -> Value {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "s", "labels": {SIDECARSET_CUSTOM_VERSION_LABEL: "v2"}},
            "spec": {"namespace": "team-a", "selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": "envoy:1"}]}})
    }

    #[test]
    fn namespace_and_custom_version_move_and_come_back() {
        let beta = convert(&alpha(), "apps.kruise.io/v1beta1").expect("to beta");
        assert_eq!(beta["apiVersion"], "apps.kruise.io/v1beta1");
        assert_eq!(
            beta["spec"]["namespaceSelector"],
            json!({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}})
        );
        assert!(beta["spec"].get("namespace").is_none());
        assert_eq!(beta["spec"]["customVersion"], "v2");
        assert_eq!(beta["spec"]["containers"][0]["image"], "envoy:1");
        let back = convert(&beta, "apps.kruise.io/v1alpha1").expect("to alpha");
        assert_eq!(back["spec"], alpha()["spec"]);
        assert_eq!(back["metadata"]["labels"], alpha()["metadata"]["labels"]);
    }

    #[test]
    fn beta_custom_version_becomes_the_label() {
        let beta = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "s"}, "spec": {"customVersion": "v3"}});
        let a = convert(&beta, "apps.kruise.io/v1alpha1").expect("to alpha");
        assert_eq!(
            a["metadata"]["labels"][SIDECARSET_CUSTOM_VERSION_LABEL],
            "v3"
        );
        assert!(a["spec"].get("customVersion").is_none());
        let b = convert(&a, "apps.kruise.io/v1beta1").expect("back");
        assert_eq!(b["spec"], beta["spec"]);
    }
}
