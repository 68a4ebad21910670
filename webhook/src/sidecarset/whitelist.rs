//! The SidecarSet `patchPodMetadata` whitelist (upstream
//! `ValidateSidecarSetPatchMetadataWhitelist`): the `SidecarSet_PatchPodMetadata_WhiteList`
//! key of the `kruise-configuration` ConfigMap in the manager's namespace lists, per SidecarSet
//! label selector, the regular expressions of the annotation keys a SidecarSet may patch into
//! Pods. Without a whitelist (or a rule for the SidecarSet) a SidecarSet with
//! `patchPodMetadata` is refused unless `SidecarSetPatchPodMetadataDefaultsAllowed` is on; a
//! key no expression allows is refused always.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::{keys, selector};
use serde::Deserialize;

/// The whitelist's JSON.
#[derive(Debug, Deserialize)]
struct WhiteList {
    #[serde(default)]
    rules: Vec<Rule>,
}

/// One rule: the SidecarSets it covers (all when no selector) and their allowed keys.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rule {
    #[serde(default)]
    selector: Option<LabelSelector>,
    #[serde(default)]
    allowed_annotation_key_exprs: Vec<String>,
}

/// Why the SidecarSet's `patchPodMetadata` is refused, or `None`. `config` is the ConfigMap's
/// data (empty when it does not exist), `namespace` where it lives (named in the fix).
pub fn refusal(
    set: &SidecarSet,
    config: &BTreeMap<String, String>,
    defaults_allowed: bool,
    namespace: &str,
) -> Option<String> {
    if set.spec.patch_pod_metadata.is_empty() {
        return None;
    }
    let fix = format!(
        "allow the key in {:?} of ConfigMap {namespace}/{}",
        keys::SIDECARSET_PATCH_METADATA_WHITELIST_KEY,
        keys::KRUISE_CONFIGURATION_CONFIGMAP
    );
    let refuse = |why: String| {
        Some(format!(
            "spec.patchPodMetadata: Required value: {why}; {fix}"
        ))
    };
    let Some(raw) = config.get(keys::SIDECARSET_PATCH_METADATA_WHITELIST_KEY) else {
        return (!defaults_allowed)
            .then(|| refuse("SidecarSet patch metadata whitelist not found".into()))?;
    };
    let list: WhiteList = match serde_json::from_str(raw) {
        Ok(l) => l,
        Err(e) => return refuse(format!("cannot read the whitelist: {e}")),
    };
    let labels = set.metadata.labels.clone().unwrap_or_default();
    let mut exprs = Vec::new();
    for rule in &list.rules {
        if rule
            .selector
            .as_ref()
            .is_some_and(|s| !selector::matches(s, &labels))
        {
            continue;
        }
        for e in &rule.allowed_annotation_key_exprs {
            match regex::Regex::new(e) {
                Ok(r) => exprs.push(r),
                Err(err) => return refuse(format!("whitelist expression {e:?}: {err}")),
            }
        }
    }
    if exprs.is_empty() {
        return (!defaults_allowed)
            .then(|| refuse("sidecarSet patch metadata annotation is not allowed".into()))?;
    }
    for p in &set.spec.patch_pod_metadata {
        for key in p.annotations.keys() {
            // Unanchored, as Go's MatchString.
            if !exprs.iter().any(|r| r.is_match(key)) {
                return refuse(format!(
                    "sidecarSet patch metadata annotation({key}) is not allowed"
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(labels: serde_json::Value, keys: &[&str]) -> SidecarSet {
        let ann: BTreeMap<&str, &str> = keys.iter().map(|k| (*k, "v")).collect();
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "mesh", "labels": labels},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": "e:2"}],
                "patchPodMetadata": [{"annotations": ann, "patchPolicy": "Overwrite"}]}}))
        .expect("set")
    }

    fn config(list: serde_json::Value) -> BTreeMap<String, String> {
        BTreeMap::from([(
            keys::SIDECARSET_PATCH_METADATA_WHITELIST_KEY.to_owned(),
            list.to_string(),
        )])
    }

    #[test]
    fn without_a_whitelist_patch_metadata_is_refused_unless_the_gate_allows_it() {
        let s = set(json!({}), &["mesh/version"]);
        let m = refusal(&s, &BTreeMap::new(), false, "kruise-system").expect("refused");
        assert!(
            m.starts_with(
                "spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found"
            ) && m.contains("kruise-system/kruise-configuration"),
            "{m}"
        );
        assert_eq!(refusal(&s, &BTreeMap::new(), true, "kruise-system"), None);
        let none = set(json!({}), &[]);
        let mut none = none;
        none.spec.patch_pod_metadata.clear();
        assert_eq!(
            refusal(&none, &BTreeMap::new(), false, "kruise-system"),
            None
        );
    }

    #[test]
    fn keys_are_checked_against_the_rules_that_select_the_sidecarset() {
        let cfg = config(json!({"rules": [
            {"selector": {"matchLabels": {"team": "mesh"}},
             "allowedAnnotationKeyExprs": ["^mesh/.*"]}]}));
        let ok = set(json!({"team": "mesh"}), &["mesh/version"]);
        assert_eq!(refusal(&ok, &cfg, false, "ns"), None);
        let bad_key = set(json!({"team": "mesh"}), &["mesh/version", "other/key"]);
        let m = refusal(&bad_key, &cfg, false, "ns").expect("refused");
        assert!(
            m.contains("sidecarSet patch metadata annotation(other/key) is not allowed"),
            "{m}"
        );
        // No rule selects it: refused, unless the gate allows defaults.
        let unselected = set(json!({"team": "db"}), &["mesh/version"]);
        let m = refusal(&unselected, &cfg, false, "ns").expect("refused");
        assert!(
            m.contains("sidecarSet patch metadata annotation is not allowed"),
            "{m}"
        );
        assert_eq!(refusal(&unselected, &cfg, true, "ns"), None);
        // The gate never allows a key the applicable rules leave out.
        assert!(refusal(&bad_key, &cfg, true, "ns").is_some());
    }
}
