//! Which Pods a manager that is down refuses: the `matchConditions` (CEL) the manager keeps
//! current from the SidecarSets, WorkloadSpreads, PersistentPodStates and
//! PodUnavailableBudgets it sees.
//!
//! A Pod a SidecarSet selects must never start without its sidecar, so whatever Kruise-rs
//! would change is refused while the manager is down; upstream refuses every Pod outside
//! kube-system then (or, with its chart's `Ignore`, lets them all through unchanged). Here the
//! Pod CREATE hook is called for every Pod and fails open, and an admission policy evaluated
//! inside the API server ([`super::policy`]) refuses, within the scope, a Pod the hook did not
//! mark. With the manager up every Pod is seen, so a Pod created right after a new SidecarSet
//! gets its sidecar however late the scope reaches the API server; with it down only the Pods
//! in the scope are refused. The conditions may match more than the handlers act on (they are
//! checked again there), never less.
//!
//! The eviction hook carries the guard scope itself (an eviction cannot be marked): it stays
//! failing closed, called only in namespaces with a budget or WorkloadSpread.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps::v1alpha1::{PersistentPodState, WorkloadSpread};
use kruise_api::features::{FeatureGates, Gate};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;

use crate::watched::Watched;

/// Longest condition we register. The API server bounds the cost of an expression; past this
/// (hundreds of SidecarSets) the hooks fall back to every Pod, as upstream.
const MAX_EXPRESSION: usize = 16 * 1024;

/// How long a scope the admission policy held still counts after it was replaced: the API
/// server enforces a new policy a moment after it is written, and until then a Pod the old
/// scope covers must still carry the mark.
pub const RETIRED_SCOPE_GRACE: Duration = Duration::from_secs(30);

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
pub struct ScopeSources {
    pub sidecar_sets: crate::sidecarset::cache::SidecarSetCache,
    pub budgets: Watched<PodUnavailableBudget>,
    pub persistent_pod_states: Watched<PersistentPodState>,
    pub workload_spreads: Watched<WorkloadSpread>,
    /// The scope [`ScopeSources::current`] last worked out.
    pub memo: ScopeMemo,
}

/// The last scope worked out, with the change counts of the four sources read before it was.
#[derive(Clone, Default)]
pub struct ScopeMemo(Arc<Mutex<Option<Memo>>>);

type Memo = ([u64; 4], Option<Arc<PodScope>>);

impl ScopeSources {
    /// [`Self::scope`], worked out again only after one of the four kinds changed. The Pod
    /// hook asks on every create; with hundreds of SidecarSets, copying their selectors each
    /// time cost more than the rest of the admission. The counts are read before the caches,
    /// and a watch bumps its count after its cache holds the change, so a memo is never older
    /// than the counts it was stored with.
    pub fn current(&self) -> Option<Arc<PodScope>> {
        let seen = [
            self.sidecar_sets.watched().version(),
            self.budgets.version(),
            self.persistent_pod_states.version(),
            self.workload_spreads.version(),
        ];
        if let Ok(m) = self.memo.0.lock()
            && let Some((at, scope)) = m.as_ref()
            && *at == seen
        {
            return scope.clone();
        }
        let scope = self.scope().map(Arc::new);
        if let Ok(mut m) = self.memo.0.lock() {
            *m = Some((seen, scope.clone()));
        }
        scope
    }

    /// The scope of what the caches hold, or `None` (every Pod) until all four have loaded.
    pub fn scope(&self) -> Option<PodScope> {
        let sets = self.sidecar_sets.watched().all()?;
        let budgets = self.budgets.namespaces()?;
        let pinned = self.persistent_pod_states.namespaces()?;
        let spreads = self.workload_spreads.namespaces()?;
        Some(PodScope {
            sidecar_sets: sets
                .into_iter()
                .map(|s| {
                    (
                        s.spec.namespace_selector.clone(),
                        s.spec.selector.clone().unwrap_or_default(),
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

/// Scopes the validating Pod hooks of `v` to `scope` and answers the condition of the
/// admission policy that stands in for the Pod CREATE hook while the manager is down (see the
/// module docs), or `None`: no policy, the CREATE hook keeps its failure policy. `None` also
/// when the caches have not loaded (`scope` is `None`), when the condition would be too long,
/// with `KruisePodReadinessGate`, which gives every Pod the readiness gate, and when `m` has no
/// Pod CREATE hook (the `PodWebhook` gate is off). `m` is left as generated: the CREATE hook is
/// called for every Pod.
pub fn restrict(
    m: &MutatingWebhookConfiguration,
    v: &mut ValidatingWebhookConfiguration,
    scope: Option<&PodScope>,
    gates: &FeatureGates,
) -> Option<Vec<MatchCondition>> {
    for h in v.webhooks.iter_mut().flatten() {
        if h.name == super::validating::POD_HOOKS[0] {
            h.match_conditions = pod_write_conditions();
        }
    }
    let scope = scope?;
    for h in v.webhooks.iter_mut().flatten() {
        if h.name == super::validating::POD_HOOKS[1] {
            h.match_conditions = scope.eviction_conditions();
        }
    }
    let create_hook = m
        .webhooks
        .iter()
        .flatten()
        .any(|h| h.name == super::mutating::POD_HOOK);
    if !create_hook || gates.enabled(Gate::KruisePodReadinessGate) {
        return None;
    }
    scope.create_conditions()
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

    /// Whether [`Self::create_conditions`] holds for a create of `pod` in `namespace`: the same
    /// terms, read the same way (a namespace selector checks only the name label).
    pub fn covers(&self, namespace: &str, pod: &Pod) -> bool {
        if is_kruise_owned(pod) || asks_launch_priority(pod) {
            return true;
        }
        if self.create_namespaces.contains(namespace) {
            return true;
        }
        let empty = BTreeMap::new();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        self.sidecar_sets.iter().any(|(ns, pods)| {
            !kruise_api::selector::is_empty(pods)
                && namespace_covers(ns.as_ref(), namespace)
                && kruise_api::selector::matches(pods, labels)
        })
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

/// [`kruise_owned`] on a Pod.
fn is_kruise_owned(pod: &Pod) -> bool {
    let prefix = format!("{}/", keys::APPS_GROUP);
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.api_version.starts_with(&prefix) && o.controller == Some(true))
}

/// [`launch_priority`] on a Pod.
fn asks_launch_priority(pod: &Pod) -> bool {
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::CONTAINER_LAUNCH_PRIORITY_ANNOTATION));
    annotated
        || pod.spec.iter().flat_map(|s| &s.containers).any(|c| {
            c.env
                .iter()
                .flatten()
                .any(|e| e.name == keys::ENV_CONTAINER_PRIORITY)
        })
}

/// [`namespace_match`] on a namespace name.
fn namespace_covers(selector: Option<&LabelSelector>, namespace: &str) -> bool {
    let Some(selector) = selector else {
        return true;
    };
    let name = keys::k8s::NAMESPACE_NAME_LABEL;
    let labels_ok = selector
        .match_labels
        .iter()
        .flatten()
        .filter(|(k, _)| *k == name)
        .all(|(_, v)| v == namespace);
    labels_ok
        && selector
            .match_expressions
            .iter()
            .flatten()
            .filter(|e| e.key == name)
            .all(|e| {
                let listed = e.values.iter().flatten().any(|v| v == namespace);
                match e.operator.as_str() {
                    "In" => listed,
                    "NotIn" => !listed,
                    "DoesNotExist" => false,
                    _ => true,
                }
            })
}

/// The scopes the admission policy was given: the one last applied, and those it replaced
/// within [`RETIRED_SCOPE_GRACE`].
#[derive(Debug, Default)]
pub struct Applied {
    current: Option<PodScope>,
    retired: Vec<(PodScope, Instant)>,
}

impl Applied {
    /// The scope last applied (`None`: every Pod, no policy).
    pub fn current(&self) -> Option<PodScope> {
        self.current.clone()
    }

    /// `next` was applied: the scope it replaces still counts for a while.
    pub fn replace(&mut self, next: Option<PodScope>) {
        if let Some(old) = self.current.take() {
            self.retired.push((old, Instant::now()));
        }
        self.retired
            .retain(|(_, at)| at.elapsed() < RETIRED_SCOPE_GRACE);
        self.current = next;
    }

    fn covers(&self, namespace: &str, pod: &Pod) -> bool {
        self.current
            .iter()
            .chain(
                self.retired
                    .iter()
                    .filter(|(_, at)| at.elapsed() < RETIRED_SCOPE_GRACE)
                    .map(|(s, _)| s),
            )
            .any(|s| s.covers(namespace, pod))
    }
}

/// The applied scopes, shared by the task that applies them and the Pod hook that marks.
pub type ScopeCell = Arc<Mutex<Applied>>;

/// What the Pod hook reads to decide whether to mark a Pod it admits.
#[derive(Clone)]
pub struct PodMarks {
    pub sources: ScopeSources,
    pub applied: ScopeCell,
}

impl PodMarks {
    /// Whether a policy in force now or soon may refuse `pod` unmarked: the caches' scope (all
    /// Pods until they have loaded, when a policy from before may still be in force) or one
    /// applied recently. Other Pods are left unmarked: nothing would refuse them.
    pub fn must_mark(&self, namespace: &str, pod: &Pod) -> bool {
        let now = self
            .sources
            .current()
            .is_none_or(|s| s.covers(namespace, pod));
        now || self
            .applied
            .lock()
            .map_or(true, |a| a.covers(namespace, pod))
    }
}

/// Whether the Pod hook marks a Pod it admits (see [`PodMarks`]). The default (handlers' test
/// doubles) marks nothing.
pub trait ScopeLookup {
    fn must_mark(&self, _namespace: &str, _pod: &Pod) -> bool {
        false
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

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    /// `covers` answers what the CEL condition would: each term, and the namespace selector
    /// read only by its name label.
    #[test]
    fn covers_reads_each_term_as_the_condition_does() {
        let scope = PodScope {
            sidecar_sets: vec![
                (
                    Some(sel(json!({"matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["mesh"]},
                        {"key": "team", "operator": "In", "values": ["x"]}]}))),
                    sel(json!({"matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]})),
                ),
                (None, LabelSelector::default()),
            ],
            create_namespaces: ["ws".to_owned()].into(),
            guard_namespaces: BTreeSet::new(),
        };
        let plain = pod(json!({"metadata": {"labels": {"app": "other"}},
            "spec": {"containers": [{"name": "a", "image": "x"}]}}));
        assert!(!scope.covers("mesh", &plain));
        assert!(
            scope.covers("ws", &plain),
            "a namespace with a WorkloadSpread"
        );
        let web = pod(json!({"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "a", "image": "x"}]}}));
        assert!(
            scope.covers("mesh", &web),
            "other namespace labels count as met"
        );
        assert!(
            !scope.covers("elsewhere", &web),
            "the name label is checked"
        );
        let db = pod(json!({"metadata": {"labels": {"app": "web", "tier": "db"}},
            "spec": {"containers": [{"name": "a", "image": "x"}]}}));
        assert!(!scope.covers("mesh", &db), "NotIn");
        let owned = pod(
            json!({"metadata": {"ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "CloneSet", "name": "c", "uid": "u", "controller": true}]},
            "spec": {"containers": [{"name": "a", "image": "x"}]}}),
        );
        assert!(scope.covers("any", &owned), "a Kruise workload's Pod");
        let ordered = pod(json!({"spec": {"containers": [{"name": "a", "image": "x",
            "env": [{"name": keys::ENV_CONTAINER_PRIORITY, "value": "1"}]}]}}));
        assert!(
            PodScope::default().covers("any", &ordered),
            "launch priority"
        );
        // The CEL says the same of each (the expression names each term).
        let e = &scope.create_conditions().expect("condition")[0].expression;
        assert!(e.contains(r#"request.namespace in ["mesh"]"#), "{e}");
        assert!(!e.contains("team"), "{e}");
    }

    /// A replaced scope still marks its Pods for the grace period: the API server may enforce
    /// the old policy a moment longer.
    #[test]
    fn a_replaced_scope_still_counts_for_its_grace() {
        let meshed = PodScope {
            create_namespaces: ["mesh".to_owned()].into(),
            ..Default::default()
        };
        let p = pod(json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}));
        let mut applied = Applied::default();
        assert!(!applied.covers("mesh", &p));
        applied.replace(Some(meshed));
        assert!(applied.covers("mesh", &p));
        applied.replace(Some(PodScope::default()));
        assert!(applied.covers("mesh", &p), "retired, within its grace");
        assert!(!applied.covers("other", &p));
        applied.retired[0].1 = Instant::now() - RETIRED_SCOPE_GRACE;
        assert!(!applied.covers("mesh", &p), "past its grace");
        applied.replace(None);
        assert!(
            applied
                .retired
                .iter()
                .all(|(s, _)| s.create_namespaces.is_empty())
        );
    }
}
