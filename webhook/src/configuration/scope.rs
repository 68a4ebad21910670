//! Which Pods the Pod hooks are called for: the `matchConditions` (CEL) the manager keeps
//! current from the SidecarSets, WorkloadSpreads, PersistentPodStates and
//! PodUnavailableBudgets it sees.
//!
//! The Pod hooks fail closed (a Pod a SidecarSet selects must never start without its sidecar),
//! so whatever they are called for is refused while the manager is down. Upstream calls them for
//! every Pod outside kube-system; here they are called only for the Pods Kruise-rs would change
//! or guard, so that a down manager blocks nothing it does not own. The conditions may match
//! more than the handlers act on (they are checked again there), never less.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps::v1alpha1::{PersistentPodState, WorkloadSpread};
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;

use crate::watched::Watched;

/// Longest condition we register. The API server bounds the cost of an expression; past this
/// (hundreds of SidecarSets) the hooks fall back to every Pod, as upstream.
const MAX_EXPRESSION: usize = 16 * 1024;

/// Whether the manager scopes the Pod hooks at all. Off: the hooks cover every Pod with
/// failurePolicy Fail, as before. A scope lags a new SidecarSet by the time the configuration
/// takes to reach the API server, and the suite showed a Deployment's Pod created right after
/// its SidecarSet started without the sidecar (sidecarset.rs), which is worse than a Pod refused
/// while the manager is down. The scope logic stays unit-tested; it is turned on once a new
/// SidecarSet, WorkloadSpread, PersistentPodState or budget is admitted only after the API
/// server serves the widened configuration.
pub const SCOPED_POD_HOOKS: bool = false;

/// Name of the one condition each Pod hook carries.
pub const CONDITION_NAME: &str = "kruise-rs-concerned";

/// What the Pod hooks are scoped to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodScope {
    /// One entry per SidecarSet: the namespaces it injects in (`None`: every namespace) and
    /// the Pods it selects.
    pub sidecar_sets: Vec<(Option<LabelSelector>, LabelSelector)>,
    /// Namespaces holding a WorkloadSpread, PersistentPodState or PodUnavailableBudget: their
    /// Pod creates may be placed, pinned or marked.
    pub create_namespaces: BTreeSet<String>,
    /// Namespaces holding a WorkloadSpread or PodUnavailableBudget: their Pod evictions may be
    /// refused.
    pub guard_namespaces: BTreeSet<String>,
}

/// Where the scope is read from: the caches the Pod handlers read.
#[derive(Clone)]
pub(crate) struct ScopeSources {
    pub sidecar_sets: crate::sidecarset::cache::SidecarSetCache,
    pub budgets: Watched<PodUnavailableBudget>,
    pub persistent_pod_states: Watched<PersistentPodState>,
    pub workload_spreads: Watched<WorkloadSpread>,
}

impl ScopeSources {
    /// The scope of what the caches hold, or `None` (every Pod) until all four have loaded and
    /// for a while after a SidecarSet was admitted, before the watch shows it.
    pub fn scope(&self) -> Option<PodScope> {
        let sets = self.sidecar_sets.snapshot()?;
        let budgets = self.budgets.namespaces()?;
        let pinned = self.persistent_pod_states.namespaces()?;
        let spreads = self.workload_spreads.namespaces()?;
        Some(PodScope {
            sidecar_sets: sets
                .into_iter()
                .map(|s| {
                    (
                        s.spec.namespace_selector,
                        s.spec.selector.unwrap_or_default(),
                    )
                })
                .collect(),
            create_namespaces: budgets
                .iter()
                .chain(&pinned)
                .chain(&spreads)
                .cloned()
                .collect(),
            guard_namespaces: budgets.union(&spreads).cloned().collect(),
        })
    }

    /// Wakes on a change to any of the four kinds.
    pub fn changes(&self) -> [tokio::sync::watch::Receiver<u64>; 4] {
        [
            self.sidecar_sets.watched().changes(),
            self.budgets.changes(),
            self.persistent_pod_states.changes(),
            self.workload_spreads.changes(),
        ]
    }
}

/// A CEL string literal (JSON's escapes are CEL's).
fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

fn list<'a>(xs: impl IntoIterator<Item = &'a String>) -> String {
    let items: Vec<String> = xs.into_iter().map(|x| lit(x)).collect();
    format!("[{}]", items.join(", "))
}

/// `selector` over the labels of `var` (`object` or `oldObject`). An unknown operator matches
/// nothing, as in [`kruise_api::selector::matches`].
fn labels_match(var: &str, selector: &LabelSelector) -> String {
    let l = format!("{var}.metadata.labels");
    let has = format!("has({l})");
    let mut parts = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        let (k, v) = (lit(k), lit(v));
        parts.push(format!("({has} && {k} in {l} && {l}[{k}] == {v})"));
    }
    for e in selector.match_expressions.iter().flatten() {
        let k = lit(&e.key);
        let vals = list(e.values.iter().flatten());
        parts.push(match e.operator.as_str() {
            "In" => format!("({has} && {k} in {l} && {l}[{k}] in {vals})"),
            "NotIn" => format!("(!{has} || !({k} in {l}) || !({l}[{k}] in {vals}))"),
            "Exists" => format!("({has} && {k} in {l})"),
            "DoesNotExist" => format!("(!{has} || !({k} in {l}))"),
            _ => "false".to_owned(),
        });
    }
    if parts.is_empty() {
        "true".to_owned()
    } else {
        parts.join(" && ")
    }
}

/// A namespace selector as a condition on `request.namespace`. Only requirements on the
/// namespace's name label can be checked here (the condition does not see the Namespace's
/// labels); any other requirement counts as met, which calls the hook for more Pods, never fewer.
fn namespace_match(selector: Option<&LabelSelector>) -> String {
    let Some(selector) = selector else {
        return "true".to_owned();
    };
    let name = keys::k8s::NAMESPACE_NAME_LABEL;
    let mut parts = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        if k == name {
            parts.push(format!("request.namespace == {}", lit(v)));
        }
    }
    for e in selector.match_expressions.iter().flatten() {
        if e.key != name {
            continue;
        }
        let vals = list(e.values.iter().flatten());
        match e.operator.as_str() {
            "In" => parts.push(format!("request.namespace in {vals}")),
            "NotIn" => parts.push(format!("!(request.namespace in {vals})")),
            "DoesNotExist" => parts.push("false".to_owned()),
            _ => {}
        }
    }
    if parts.is_empty() {
        "true".to_owned()
    } else {
        format!("({})", parts.join(" && "))
    }
}

/// A Pod whose controller is a Kruise workload: it gets the `KruisePodReady` readiness gate.
fn kruise_owned() -> String {
    format!(
        "(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, \
         o.apiVersion.startsWith({}) && has(o.controller) && o.controller))",
        lit(&format!("{}/", keys::APPS_GROUP))
    )
}

/// A Pod asking for ordered container start: it gets the launch barrier.
fn launch_priority() -> String {
    format!(
        "((has(object.metadata.annotations) && {} in object.metadata.annotations) || \
         object.spec.containers.exists(c, has(c.env) && c.env.exists(e, e.name == {})))",
        lit(keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION),
        lit(keys::ENV_CONTAINER_PRIORITY)
    )
}

/// The condition of `vpod.kb.io` (Pod updates and deletes): what its handlers read without
/// admitting at once (see [`crate::pod::admitted_unread`]): an update of a Pod marked with its
/// budget, a delete of a Pod marked with its budget or WorkloadSpread. The marks are written at
/// the Pod's creation, so this needs no scope.
pub fn pod_write_conditions() -> Option<Vec<MatchCondition>> {
    let budget = lit(keys::PUB_RELATED_ANNOTATION);
    let spread = lit(keys::MATCHED_WORKLOADSPREAD_ANNOTATION);
    condition(format!(
        "(request.operation == \"UPDATE\" && has(object.metadata.annotations) && \
         {budget} in object.metadata.annotations) || \
         (request.operation == \"DELETE\" && oldObject != null && \
         has(oldObject.metadata.annotations) && ({budget} in oldObject.metadata.annotations || \
         {spread} in oldObject.metadata.annotations))"
    ))
}

fn condition(expression: String) -> Option<Vec<MatchCondition>> {
    if expression.len() > MAX_EXPRESSION {
        tracing::warn!(
            len = expression.len(),
            "Pod hook condition too long; calling the Pod hooks for every Pod"
        );
        return None;
    }
    Some(vec![MatchCondition {
        name: CONDITION_NAME.to_owned(),
        expression,
    }])
}

/// Scopes the Pod hooks of `m` and `v` to `scope`; `None` (the caches not loaded yet) leaves
/// the create and eviction hooks called for every Pod (the update/delete hook needs no scope). With `KruisePodReadinessGate` every Pod gets the readiness gate,
/// so the Pod CREATE hook stays unscoped.
pub fn restrict(
    m: &mut MutatingWebhookConfiguration,
    v: &mut ValidatingWebhookConfiguration,
    scope: Option<&PodScope>,
    gates: &FeatureGates,
) {
    for h in v.webhooks.iter_mut().flatten() {
        if h.name == super::validating::POD_HOOKS[0] {
            h.match_conditions = pod_write_conditions();
        }
    }
    let Some(scope) = scope else {
        return;
    };
    if !gates.enabled(Gate::KruisePodReadinessGate) {
        let create = scope.create_conditions();
        for h in m.webhooks.iter_mut().flatten() {
            if h.name == super::mutating::POD_HOOK {
                h.match_conditions = create.clone();
            }
        }
    }
    for h in v.webhooks.iter_mut().flatten() {
        if h.name == super::validating::POD_HOOKS[1] {
            h.match_conditions = scope.eviction_conditions();
        }
    }
}

impl PodScope {
    /// The condition of `mpod.kb.io` (Pod CREATE): a Kruise workload's Pod, a Pod asking for
    /// launch priority, a Pod in a namespace with a WorkloadSpread, PersistentPodState or
    /// budget, or a Pod a SidecarSet selects.
    pub fn create_conditions(&self) -> Option<Vec<MatchCondition>> {
        let mut any = vec![kruise_owned(), launch_priority()];
        if !self.create_namespaces.is_empty() {
            any.push(format!(
                "request.namespace in {}",
                list(&self.create_namespaces)
            ));
        }
        for (ns, pods) in &self.sidecar_sets {
            // A SidecarSet without a selector (or with an empty one) injects nowhere.
            let empty = pods.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && pods.match_expressions.as_ref().is_none_or(|m| m.is_empty());
            if empty {
                continue;
            }
            any.push(format!(
                "({} && {})",
                namespace_match(ns.as_ref()),
                labels_match("object", pods)
            ));
        }
        condition(any.join(" || "))
    }

    /// The condition of `vpodeviction.kb.io` (evictions, which carry no Pod labels): a
    /// namespace with a budget or WorkloadSpread.
    pub fn eviction_conditions(&self) -> Option<Vec<MatchCondition>> {
        condition(format!(
            "request.namespace in {}",
            list(&self.guard_namespaces)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(v: serde_json::Value) -> LabelSelector {
        serde_json::from_value(v).expect("selector")
    }

    #[test]
    fn empty_scope_still_covers_kruise_pods_and_launch_priority() {
        let c = PodScope::default().create_conditions().expect("condition");
        assert_eq!(c[0].name, CONDITION_NAME);
        assert!(c[0].expression.contains("ownerReferences"));
        assert!(c[0].expression.contains("KRUISE_CONTAINER_PRIORITY"));
        assert!(!c[0].expression.contains("request.namespace"));
        let g = PodScope::default()
            .eviction_conditions()
            .expect("condition");
        assert_eq!(g[0].expression, "request.namespace in []");
    }

    #[test]
    fn sidecarset_selector_and_namespace_become_cel() {
        let scope = PodScope {
            sidecar_sets: vec![
                (
                    Some(sel(
                        json!({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}),
                    )),
                    sel(json!({"matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]})),
                ),
                // No selector: injects nowhere, so it adds nothing.
                (None, LabelSelector::default()),
            ],
            create_namespaces: ["ws-ns".to_owned()].into(),
            guard_namespaces: ["pub-ns".to_owned()].into(),
        };
        let e = &scope.create_conditions().expect("condition")[0].expression;
        assert!(e.contains(r#"request.namespace == "team-a""#), "{e}");
        assert!(
            e.contains(r#"object.metadata.labels["app"] == "web""#),
            "{e}"
        );
        assert!(
            e.contains(r#"!(object.metadata.labels["tier"] in ["db"])"#),
            "{e}"
        );
        assert!(e.contains(r#"request.namespace in ["ws-ns"]"#), "{e}");
        assert_eq!(e.matches(" || (").count(), 2, "one SidecarSet term: {e}");
        let g = &scope.eviction_conditions().expect("condition")[0].expression;
        assert_eq!(g, r#"request.namespace in ["pub-ns"]"#);
    }

    #[test]
    fn quotes_are_escaped_and_huge_scopes_fall_back() {
        assert_eq!(lit(r#"a"b\c"#), r#""a\"b\\c""#);
        let many = PodScope {
            create_namespaces: (0..2000).map(|i| format!("namespace-{i}")).collect(),
            ..Default::default()
        };
        assert!(many.create_conditions().is_none());
    }
}
