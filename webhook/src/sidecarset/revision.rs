//! `injectionStrategy.revision`: which new Pods get the pinned revision rather than the latest
//! spec (upstream `getSuitableRevisionSidecarSet` at Pod create), and the refusal of a pin
//! that names no stored revision (upstream `validateSidecarSetInjectionStrategy`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{
    SidecarSet, SidecarSetInjectRevision, SidecarSetInjectRevisionPolicy,
};
use kruise_api::{keys, selector};

/// The namespace the SidecarSets' ControllerRevisions live in: the manager's (upstream
/// `webhookutil.GetNamespace`), which the webhook shares.
pub fn revisions_namespace() -> String {
    keys::own_namespace()
}

/// Whether the pin names a revision at all (neither field set means "the latest").
pub fn is_pinned(rev: &SidecarSetInjectRevision) -> bool {
    rev.revision_name.is_some() || rev.custom_version.is_some()
}

/// Whether a new Pod with `pod_labels` gets `set`'s pinned revision. `roll` is a uniform draw
/// from [0, 1).
///
/// - upgrades paused, or `policy: Always` (the default): every new Pod is pinned;
/// - `policy: Partial`: a Pod that `updateStrategy.selector` does not select is pinned (it is
///   not part of this upgrade); otherwise a percentage `partition` is the share of new Pods
///   that are pinned, drawn at random as upstream does; an integer or no partition pins none.
pub fn injects_pinned(
    set: &SidecarSet,
    pod_labels: &BTreeMap<String, String>,
    roll: f64,
) -> Result<bool, String> {
    let Some(rev) = set
        .spec
        .injection_strategy
        .revision
        .as_ref()
        .filter(|r| is_pinned(r))
    else {
        return Ok(false);
    };
    let us = &set.spec.update_strategy;
    if us.paused {
        return Ok(true);
    }
    match rev.policy.unwrap_or_default() {
        SidecarSetInjectRevisionPolicy::Always => Ok(true),
        SidecarSetInjectRevisionPolicy::Partial => {
            if let Some(sel) = &us.selector
                && !selector::matches(sel, pod_labels)
            {
                return Ok(true);
            }
            match &us.partition {
                Some(IntOrString::String(p)) => Ok(roll <= percentage(p)?),
                _ => Ok(false),
            }
        }
    }
}

/// "30%" as 0.3 (upstream `ParsePercentageAsFloat64`).
fn percentage(s: &str) -> Result<f64, String> {
    s.strip_suffix('%')
        .and_then(|n| n.parse::<f64>().ok())
        .filter(|p| (0.0..=100.0).contains(p))
        .map(|p| p / 100.0)
        .ok_or_else(|| {
            format!(
                "spec.updateStrategy.partition: Invalid value: {s:?}: injectionStrategy.revision.policy Partial needs a percentage 0%-100%"
            )
        })
}

/// The refusal of a pin to a revision that does not exist, naming the field and where the
/// revisions are.
pub fn not_found(set_name: &str, rev: &SidecarSetInjectRevision, namespace: &str) -> String {
    let list = format!(
        "kubectl get controllerrevisions -n {namespace} -l {}={set_name}",
        keys::SIDECARSET_NAME_LABEL
    );
    match (&rev.revision_name, &rev.custom_version) {
        (Some(name), _) => format!(
            "spec.injectionStrategy.revision.revisionName: Not found: {name:?}: no ControllerRevision of that name in namespace {namespace}; name one that `{list}` lists"
        ),
        (None, Some(v)) => format!(
            "spec.injectionStrategy.revision.customVersion: Not found: {v:?}: no revision of SidecarSet {set_name} carries label {}={v} in namespace {namespace}; use a version that `{list} -L {}` shows",
            keys::SIDECARSET_CUSTOM_VERSION_LABEL,
            keys::SIDECARSET_CUSTOM_VERSION_LABEL
        ),
        (None, None) => {
            "spec.injectionStrategy.revision: Invalid value: set revisionName or customVersion (or remove revision)".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(strategy: serde_json::Value, revision: serde_json::Value) -> SidecarSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "mesh"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": "e:2"}],
                "updateStrategy": strategy,
                "injectionStrategy": {"revision": revision}}
        }))
        .expect("set")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn always_pins_every_new_pod_and_no_pin_pins_none() {
        let web = labels(&[("app", "web")]);
        let always = set(json!({}), json!({"revisionName": "mesh-1"}));
        assert_eq!(injects_pinned(&always, &web, 0.99), Ok(true));
        let unnamed = set(json!({}), json!({"policy": "Always"}));
        assert_eq!(injects_pinned(&unnamed, &web, 0.0), Ok(false));
        let none: SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "mesh"},
            "spec": {"containers": [{"name": "proxy", "image": "e:2"}]}
        }))
        .expect("set");
        assert_eq!(injects_pinned(&none, &web, 0.0), Ok(false));
    }

    #[test]
    fn partial_pins_the_pods_the_update_selector_leaves_out() {
        let s = set(
            json!({"selector": {"matchLabels": {"canary": "true"}}}),
            json!({"revisionName": "mesh-1", "policy": "Partial"}),
        );
        let plain = labels(&[("app", "web")]);
        let canary = labels(&[("app", "web"), ("canary", "true")]);
        assert_eq!(injects_pinned(&s, &plain, 0.99), Ok(true), "not selected");
        // Selected, no partition: the latest, whatever the draw.
        assert_eq!(injects_pinned(&s, &canary, 0.0), Ok(false));
    }

    #[test]
    fn partial_pins_the_partition_share_of_new_pods() {
        let web = labels(&[("app", "web")]);
        let pin = json!({"customVersion": "blue", "policy": "Partial"});
        let s = set(json!({"partition": "30%"}), pin.clone());
        assert_eq!(injects_pinned(&s, &web, 0.1), Ok(true));
        assert_eq!(injects_pinned(&s, &web, 0.3), Ok(true), "upstream's <=");
        assert_eq!(injects_pinned(&s, &web, 0.31), Ok(false));
        // Over many draws the share is the partition's.
        let pinned = (0..1000)
            .filter(|i| injects_pinned(&s, &web, f64::from(*i) / 1000.0) == Ok(true))
            .count();
        assert_eq!(pinned, 301);
        // An integer partition is a count for the upgrade, not a share: nothing pinned.
        let int = set(json!({"partition": 2}), pin.clone());
        assert_eq!(injects_pinned(&int, &web, 0.0), Ok(false));
        assert_eq!(
            injects_pinned(&set(json!({"partition": "100%"}), pin.clone()), &web, 0.99),
            Ok(true)
        );
        // Paused upgrades pin every new Pod, whatever the policy.
        let paused = set(json!({"paused": true}), pin.clone());
        assert_eq!(injects_pinned(&paused, &web, 0.99), Ok(true));
        let bad = set(json!({"partition": "lots"}), pin);
        let err = injects_pinned(&bad, &web, 0.5).expect_err("unreadable partition");
        assert!(err.contains("spec.updateStrategy.partition"), "{err}");
    }

    #[test]
    fn not_found_names_the_field_and_how_to_list_the_revisions() {
        let by_name: SidecarSetInjectRevision =
            serde_json::from_value(json!({"revisionName": "mesh-abc"})).expect("rev");
        let m = not_found("mesh", &by_name, "kruise-system");
        assert!(
            m.starts_with("spec.injectionStrategy.revision.revisionName: Not found: \"mesh-abc\""),
            "{m}"
        );
        assert!(
            m.contains("-n kruise-system -l kruise.io/sidecarset-name=mesh"),
            "{m}"
        );
        let by_version: SidecarSetInjectRevision =
            serde_json::from_value(json!({"customVersion": "blue"})).expect("rev");
        let m = not_found("mesh", &by_version, "kruise-system");
        assert!(
            m.starts_with("spec.injectionStrategy.revision.customVersion: Not found: \"blue\""),
            "{m}"
        );
    }
}
