//! `patchPodMetadata` re-applied when the controller upgrades a Pod's sidecars in place
//! (upstream `PatchPodMetadata` in `updatePodSidecarAndHash`): the SidecarSet webhook only
//! admits keys its whitelist allows, so every key here is applied.

use std::collections::BTreeMap;

use kruise_api::apps::v1beta1::{SidecarSet, SidecarSetPatchPolicyType as Policy};
use serde_json::Value;

/// A `MergePatchJson` annotation whose Pod value or patch is not JSON (upstream's
/// `jsonpatch.MergePatch` fails the upgrade the same way).
#[derive(Debug, thiserror::Error)]
#[error(
    "patchPodMetadata annotation {key}: MergePatchJson needs JSON on the Pod and in the patch: {source}"
)]
pub struct MergeError {
    /// The annotation.
    pub key: String,
    /// Why it is not JSON.
    pub source: serde_json::Error,
}

/// The annotations whose value the SidecarSet's `patchPodMetadata` changes on a Pod with
/// `current` annotations: Retain adds a key the Pod lacks, Overwrite sets it, MergePatchJson
/// JSON-merges into the Pod's value (or sets it when the Pod has none).
pub fn patched_annotations(
    set: &SidecarSet,
    current: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, MergeError> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for p in &set.spec.patch_pod_metadata {
        for (k, v) in &p.annotations {
            let now = out.get(k).or_else(|| current.get(k)).cloned();
            let next = match (p.patch_policy.unwrap_or_default(), now) {
                // Present counts, even empty, as upstream's map lookup.
                (Policy::Retain, Some(_)) => continue,
                (Policy::MergePatchJson, Some(cur)) if !cur.is_empty() => {
                    let parse = |s: &str| {
                        serde_json::from_str::<Value>(s).map_err(|source| MergeError {
                            key: k.clone(),
                            source,
                        })
                    };
                    let mut base = parse(&cur)?;
                    json_patch::merge(&mut base, &parse(v)?);
                    base.to_string()
                }
                _ => v.clone(),
            };
            out.insert(k.clone(), next);
        }
    }
    out.retain(|k, v| current.get(k) != Some(v));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(patches: Value) -> SidecarSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "mesh"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": "e:2"}],
                "patchPodMetadata": patches}}))
        .expect("set")
    }

    #[test]
    fn an_upgrade_rewrites_overwrite_and_merge_keys_and_retains_the_others() {
        let s = set(json!([
            {"annotations": {"mesh/version": "v2"}, "patchPolicy": "Overwrite"},
            {"annotations": {"mesh/owner": "platform", "mesh/new": "yes"},
             "patchPolicy": "Retain"},
            {"annotations": {"mesh/config": r#"{"b":2}"#}, "patchPolicy": "MergePatchJson"}
        ]));
        let pod = BTreeMap::from([
            ("mesh/version".to_owned(), "v1".to_owned()),
            ("mesh/owner".to_owned(), "someone".to_owned()),
            ("mesh/config".to_owned(), r#"{"a":1,"b":1}"#.to_owned()),
        ]);
        let out = patched_annotations(&s, &pod).expect("patch");
        assert_eq!(
            out,
            BTreeMap::from([
                ("mesh/version".to_owned(), "v2".to_owned()),
                ("mesh/new".to_owned(), "yes".to_owned()),
                ("mesh/config".to_owned(), r#"{"a":1,"b":2}"#.to_owned()),
            ])
        );
        // Applied once, nothing is left to write.
        let mut after = pod.clone();
        after.extend(out);
        assert!(patched_annotations(&s, &after).expect("patch").is_empty());
    }

    #[test]
    fn a_merge_into_a_value_that_is_not_json_names_the_key() {
        let s = set(json!([{"annotations": {"mesh/config": r#"{"b":2}"#},
            "patchPolicy": "MergePatchJson"}]));
        let pod = BTreeMap::from([("mesh/config".to_owned(), "plain".to_owned())]);
        let e = patched_annotations(&s, &pod).expect_err("not JSON");
        assert_eq!(e.key, "mesh/config");
    }
}
