//! What the CloneSet spec asks for, read into the inputs of the pure decisions: scale and
//! rolling settings, in-place update options, and whether the spec can be acted on at all.

use std::collections::BTreeMap;

use kruise_api::apps::v1beta1::{CloneSet, CloneSetPodUpdateStrategyType};
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kruise_api::selector::{self, Violation};
use kube::ResourceExt;

use super::diff::{Rolling, Settings};
use crate::inplace::{Features, UpdateOptions};

pub fn settings_of(cs: &CloneSet) -> Settings {
    let rolling = cs
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .map(|r| Rolling {
            partition: r.partition.clone(),
            max_unavailable: r.max_unavailable.clone(),
            max_surge: r.max_surge.clone(),
            paused: r.paused,
        });
    Settings {
        replicas: cs.spec.replicas.unwrap_or(1),
        rolling,
        scale_max_unavailable: cs.spec.scale_strategy.max_unavailable.clone(),
        pods_to_delete: cs.spec.scale_strategy.pods_to_delete.clone(),
        min_ready_seconds: cs.spec.min_ready_seconds,
        exclude_preparing_delete: cs.spec.scale_strategy.exclude_preparing_delete
            || cs
                .labels()
                .get(keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL)
                .is_some_and(|v| v == "true"),
        // Depends on the gate and on the revisions, which the reconcile knows.
        partition_rollback: false,
    }
}

/// [`settings_of`] for one sync: `two_revisions` says the current and update revisions differ,
/// the other half of upstream's condition for `CloneSetPartitionRollback`.
pub(super) fn sync_settings(cs: &CloneSet, gates: &FeatureGates, two_revisions: bool) -> Settings {
    Settings {
        partition_rollback: two_revisions && gates.enabled(Gate::CloneSetPartitionRollback),
        ..settings_of(cs)
    }
}

pub(super) fn pod_update_policy(cs: &CloneSet) -> CloneSetPodUpdateStrategyType {
    cs.spec
        .update_strategy
        .rolling_update
        .as_ref()
        .and_then(|r| r.pod_update_policy)
        .unwrap_or_default()
}

/// The engine's options for `cs`; `gates` decide what may change in place.
pub fn update_options(cs: &CloneSet, gates: &FeatureGates) -> UpdateOptions {
    let rolling = cs.spec.update_strategy.rolling_update.as_ref();
    UpdateOptions {
        grace_period_seconds: rolling
            .and_then(|r| r.in_place_update_strategy.as_ref())
            .map_or(0, |s| s.grace_period_seconds),
        ignore_volume_claim_templates_hash_diff: pod_update_policy(cs)
            == CloneSetPodUpdateStrategyType::InPlaceOnly,
        features: Features::from_gates(gates),
        ..Default::default()
    }
}

pub(super) fn template_labels(cs: &CloneSet) -> BTreeMap<String, String> {
    cs.spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

/// Why a CloneSet cannot be acted on at all, if it cannot. A selector is refused for what
/// upstream's `LabelSelectorAsSelector` refuses to build a selector from (the first rule broken,
/// key before operator as apimachinery checks them).
pub(super) fn invalid_reason(cs: &CloneSet) -> Option<String> {
    let sel = &cs.spec.selector;
    if selector::is_empty(sel) {
        return Some("spec.selector is empty; it must select the template's labels".to_string());
    }
    if let Some((i, v)) = selector::violations(sel).into_iter().next() {
        let expr = format!("spec.selector.matchExpressions[{i}]");
        return Some(match v {
            Violation::InvalidOperator(op) => {
                format!("spec.selector has an unknown operator {op:?}")
            }
            Violation::KeyRequired => format!("{expr} has an empty key"),
            Violation::ValuesRequired => format!("{expr} needs values for its operator"),
            Violation::ValuesForbidden => format!("{expr} must not have values for its operator"),
        });
    }
    if !selector::matches(sel, &template_labels(cs)) {
        return Some("spec.selector does not match spec.template.metadata.labels".to_string());
    }
    if cs.spec.replicas.is_some_and(|r| r < 0) {
        return Some("spec.replicas is negative".to_string());
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    use kruise_api::apps::v1beta1::{CloneSetSpec, RollingUpdateCloneSetStrategy};

    /// A CloneSet `ns/demo` of 3 replicas selecting `app=demo`, the CloneSet tests' fixture.
    pub(crate) fn cs() -> CloneSet {
        let labels: std::collections::BTreeMap<String, String> =
            [("app".to_string(), "demo".to_string())].into();
        let mut c = CloneSet::new(
            "demo",
            CloneSetSpec {
                replicas: Some(3),
                selector: LabelSelector {
                    match_labels: Some(labels.clone()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(labels),
                        ..Default::default()
                    }),
                    spec: None,
                },
                ..Default::default()
            },
        );
        c.metadata.namespace = Some("ns".into());
        c
    }

    #[test]
    fn invalid_specs_are_reported() {
        assert_eq!(invalid_reason(&cs()), None);
        let mut c = cs();
        c.spec.selector = LabelSelector::default();
        assert!(invalid_reason(&c).is_some_and(|r| r.contains("empty")));
        let mut c = cs();
        c.spec.template.metadata = None;
        assert!(invalid_reason(&c).is_some_and(|r| r.contains("does not match")));
        let mut c = cs();
        c.spec.replicas = Some(-1);
        assert!(invalid_reason(&c).is_some());
    }

    /// The selector rules upstream's `LabelSelectorAsSelector` enforces; the local check this
    /// replaced only caught an unknown operator.
    #[test]
    fn selector_rules_are_upstreams() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let expr = |key: &str, op: &str, values: Option<Vec<String>>| LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values,
        };
        let demo = Some(vec!["demo".to_string()]);
        let rows = [
            (expr("app", "In", demo.clone()), None),
            (expr("app", "Exists", None), None),
            (
                expr("app", "Is", demo.clone()),
                Some("unknown operator \"Is\""),
            ),
            (expr("app", "In", None), Some("[0] needs values")),
            (
                expr("app", "Exists", demo.clone()),
                Some("[0] must not have values"),
            ),
            (expr("", "Bogus", None), Some("[0] has an empty key")),
        ];
        for (e, want) in rows {
            let mut c = cs();
            c.spec.selector.match_expressions = Some(vec![e.clone()]);
            let got = invalid_reason(&c);
            match want {
                None => assert_eq!(got, None, "{e:?}"),
                Some(w) => assert!(
                    got.as_deref().is_some_and(|r| r.contains(w)),
                    "{e:?}: {got:?}"
                ),
            }
        }
    }

    #[test]
    fn options_follow_the_strategy() {
        let mut c = cs();
        c.spec.update_strategy.rolling_update = Some(RollingUpdateCloneSetStrategy {
            pod_update_policy: Some(CloneSetPodUpdateStrategyType::InPlaceOnly),
            in_place_update_strategy: Some(kruise_api::appspub::InPlaceUpdateStrategy {
                grace_period_seconds: 10,
                ..Default::default()
            }),
            ..Default::default()
        });
        let o = update_options(&c, &FeatureGates::default());
        assert_eq!(o.grace_period_seconds, 10);
        assert!(o.ignore_volume_claim_templates_hash_diff);
        assert_eq!(
            pod_update_policy(&cs()),
            CloneSetPodUpdateStrategyType::ReCreate
        );
    }

    #[test]
    fn settings_read_the_spec() {
        let mut c = cs();
        c.spec.scale_strategy.pods_to_delete = vec!["x".into()];
        c.metadata.labels = Some(
            [(
                keys::CLONESET_SCALING_EXCLUDE_PREPARING_DELETE_LABEL.to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        let s = settings_of(&c);
        assert_eq!(s.replicas, 3);
        assert!(s.rolling.is_none());
        assert!(s.exclude_preparing_delete);
        assert_eq!(s.pods_to_delete, vec!["x".to_string()]);
    }
}
