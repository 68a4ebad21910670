//! PersistentPodState v1alpha1 ⇄ v1beta1 conversion, after upstream's
//! `apis/apps/v1alpha1/persistent_pod_state_conversion.go`: a topology term's
//! `nodeTopologyKeys` (v1alpha1) is `keys` (v1beta1), in `requiredPersistentTopology` and in
//! each `preferredPersistentTopology[].preference`. Everything else is the same JSON.

use serde_json::Value;

use crate::conversion::scheme::{Owned, Scheme};

const ALPHA_KEYS: &str = "nodeTopologyKeys";
const BETA_KEYS: &str = "keys";

const OWNED: &[Owned] = &[
    Owned::Value(&["spec", "requiredPersistentTopology"]),
    Owned::Value(&["spec", "preferredPersistentTopology"]),
    Owned::Shape(&["metadata", "annotations"]),
];

/// PersistentPodState v1alpha1 ⇄ v1beta1.
pub const SCHEME: Scheme = Scheme::apps(map_to_v1beta1, map_to_v1alpha1, OWNED);

/// Converts one PersistentPodState to `desired`.
pub fn convert(obj: &Value, desired: &str) -> Result<Value, String> {
    SCHEME.convert(obj, desired)
}

fn rename(term: Option<&mut Value>, from: &str, to: &str) {
    if let Some(m) = term.and_then(Value::as_object_mut)
        && let Some(v) = m.remove(from)
    {
        m.insert(to.to_owned(), v);
    }
}

fn mapped(src: &Value, from: &str, to: &str) -> Value {
    let mut out = src.clone();
    let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) else {
        return out;
    };
    rename(spec.get_mut("requiredPersistentTopology"), from, to);
    if let Some(terms) = spec
        .get_mut("preferredPersistentTopology")
        .and_then(Value::as_array_mut)
    {
        for t in terms.iter_mut() {
            rename(t.get_mut("preference"), from, to);
        }
    }
    out
}

/// Plain v1alpha1 → v1beta1.
fn map_to_v1beta1(src: &Value) -> Value {
    mapped(src, ALPHA_KEYS, BETA_KEYS)
}

/// Plain v1beta1 → v1alpha1.
fn map_to_v1alpha1(src: &Value) -> Value {
    mapped(src, BETA_KEYS, ALPHA_KEYS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps::{v1alpha1, v1beta1};
    use proptest::prelude::*;
    use serde_json::Map;
    use serde_json::json;

    const ALPHA: &str = "apps.kruise.io/v1alpha1";
    const BETA: &str = "apps.kruise.io/v1beta1";

    /// A topology term as the given version spells it.
    fn term(name: &str, keys: &[&str]) -> Value {
        let mut m = Map::new();
        m.insert(name.to_owned(), json!(keys));
        Value::Object(m)
    }

    /// Upstream's "all fields with nodeTopologyKeys" case.
    fn alpha() -> Value {
        json!({"apiVersion": ALPHA, "kind": "PersistentPodState",
            "metadata": {"name": "pps", "namespace": "default"},
            "spec": {
                "targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
                              "name": "sts"},
                "persistentPodAnnotations": [{"key": "ip"}],
                "requiredPersistentTopology": term(ALPHA_KEYS, &["kubernetes.io/hostname"]),
                "preferredPersistentTopology": [
                    {"weight": 100, "preference": term(ALPHA_KEYS, &["topology.kubernetes.io/zone"])}],
                "persistentPodStateRetentionPolicy": "WhenDeleted"},
            "status": {"observedGeneration": 2, "podStates": {
                "sts-0": {"nodeName": "n1", "nodeTopologyLabels": {"kubernetes.io/hostname": "n1"},
                          "annotations": {"ip": "10.0.0.1"}}}}})
    }

    #[test]
    fn alpha_to_beta_renames_the_topology_keys_as_upstream() {
        let b = convert(&alpha(), BETA).expect("converts");
        assert_eq!(b["apiVersion"], BETA);
        assert_eq!(
            b["spec"]["requiredPersistentTopology"],
            term(BETA_KEYS, &["kubernetes.io/hostname"])
        );
        assert_eq!(
            b["spec"]["preferredPersistentTopology"][0]["preference"],
            term(BETA_KEYS, &["topology.kubernetes.io/zone"])
        );
        assert_eq!(b["spec"]["preferredPersistentTopology"][0]["weight"], 100);
        assert_eq!(b["status"], alpha()["status"]);
        assert!(
            b["metadata"].get("annotations").is_none(),
            "no record needed"
        );
        let typed: v1beta1::PersistentPodState = serde_json::from_value(b.clone()).expect("typed");
        assert_eq!(
            typed.spec.required_persistent_topology.map(|t| t.keys),
            Some(vec!["kubernetes.io/hostname".to_owned()])
        );
        let back = convert(&b, ALPHA).expect("back");
        assert_eq!(back, alpha());
        let typed: v1alpha1::PersistentPodState = serde_json::from_value(back).expect("typed");
        assert_eq!(
            typed.spec.preferred_persistent_topology[0]
                .preference
                .node_topology_keys
                .len(),
            1
        );
    }

    /// Upstream's "empty topology" case: nothing to rename.
    #[test]
    fn empty_topology_converts_as_is() {
        let a = json!({"apiVersion": ALPHA, "kind": "PersistentPodState", "metadata": {"name": "p"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s"}}});
        let b = convert(&a, BETA).expect("converts");
        assert_eq!(b["spec"], a["spec"]);
        assert_eq!(convert(&b, ALPHA).expect("back"), a);
    }

    proptest! {
        #[test]
        fn round_trips_both_ways(
            required in proptest::option::of(proptest::collection::vec("[a-z./]{1,8}", 0..3)),
            preferred in proptest::collection::vec((1i32..100, proptest::collection::vec("[a-z]{1,5}", 0..3)), 0..3),
        ) {
            let mut spec = json!({"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s"}});
            if let Some(r) = &required {
                let r: Vec<&str> = r.iter().map(String::as_str).collect();
                spec["requiredPersistentTopology"] = term(BETA_KEYS, &r);
            }
            if !preferred.is_empty() {
                spec["preferredPersistentTopology"] = preferred.iter().map(|(w, k)| {
                    let k: Vec<&str> = k.iter().map(String::as_str).collect();
                    json!({"weight": w, "preference": term(BETA_KEYS, &k)})
                }).collect();
            }
            let b = json!({"apiVersion": BETA, "kind": "PersistentPodState",
                "metadata": {"name": "p"}, "spec": spec});
            let a = convert(&b, ALPHA).expect("to alpha");
            prop_assert_eq!(convert(&a, BETA).expect("back"), b.clone());
            let a2 = convert(&convert(&a, BETA).expect("beta"), ALPHA).expect("alpha");
            prop_assert_eq!(a2, a);
        }
    }
}
