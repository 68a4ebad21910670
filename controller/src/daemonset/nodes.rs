//! Which nodes run a daemon Pod (upstream `NodeShouldRunDaemonPod` with the native
//! controller's `predicates`): the template's nodeSelector, its required node affinity, and the
//! node's NoSchedule / NoExecute taints against the template's tolerations plus the ones every
//! daemon Pod gets.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};

/// Taint effects (Kubernetes' names).
const NO_SCHEDULE: &str = "NoSchedule";
const NO_EXECUTE: &str = "NoExecute";

/// The tolerations the native DaemonSet controller adds to every daemon Pod
/// (`util.AddOrUpdateDaemonPodTolerations`): a node that is not ready, unreachable, under
/// pressure or cordoned keeps and gets its daemon. `network-unavailable` only for host-network
/// Pods.
pub fn daemon_tolerations(host_network: bool) -> Vec<Toleration> {
    let exists = |key: &str, effect: &str| Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some(effect.to_owned()),
        ..Default::default()
    };
    let mut t = vec![
        exists("node.kubernetes.io/not-ready", NO_EXECUTE),
        exists("node.kubernetes.io/unreachable", NO_EXECUTE),
        exists("node.kubernetes.io/disk-pressure", NO_SCHEDULE),
        exists("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
        exists("node.kubernetes.io/pid-pressure", NO_SCHEDULE),
        exists("node.kubernetes.io/unschedulable", NO_SCHEDULE),
    ];
    if host_network {
        t.push(exists(
            "node.kubernetes.io/network-unavailable",
            NO_SCHEDULE,
        ));
    }
    t
}

/// `tolerations` plus the daemon tolerations they do not already contain.
pub fn with_daemon_tolerations(spec: &PodSpec) -> Vec<Toleration> {
    let mut all = spec.tolerations.clone().unwrap_or_default();
    for t in daemon_tolerations(spec.host_network.unwrap_or(false)) {
        if !all
            .iter()
            .any(|have| have.key == t.key && have.effect == t.effect)
        {
            all.push(t);
        }
    }
    all
}

/// Whether `toleration` tolerates `taint` (Kubernetes' `ToleratesTaint`).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        // An empty key is only valid with Exists.
        "Equal" | "" => {
            !key.is_empty()
                && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Whether a node matches one requirement on its labels (or, for `matchFields`, its name).
fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), [bound]) = (value.and_then(|v| v.parse::<i64>().ok()), values) else {
                return false;
            };
            let Ok(bound) = bound.parse::<i64>() else {
                return false;
            };
            if req.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// One term: all its requirements hold; a term without any matches no node.
fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, name: &str) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields.iter().all(|r| {
            let v = (r.key == "metadata.name").then_some(name);
            requirement_matches(r, v)
        })
}

/// The template's nodeSelector and required node affinity accept the node.
pub fn node_matches(spec: &PodSpec, node: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = node.metadata.labels.as_ref().unwrap_or(&empty);
    let name = node.metadata.name.as_deref().unwrap_or("");
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let affinity_ok = required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|t| term_matches(t, labels, name))
    });
    selector_ok && affinity_ok
}

/// Where a daemon Pod stands on a node (upstream `NodeShouldRunDaemonPod`'s two answers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// A Pod should be created here if there is none.
    pub should_run: bool,
    /// A Pod already here may stay.
    pub should_continue_running: bool,
}

/// Whether a daemon Pod of `spec` should run on `node`, and whether one already there may
/// stay: a selector or affinity mismatch answers no to both; an untolerated NoSchedule taint
/// keeps Pods already there; an untolerated NoExecute taint evicts them.
pub fn placement(spec: &PodSpec, node: &Node) -> Placement {
    if !node_matches(spec, node) {
        return Placement {
            should_run: false,
            should_continue_running: false,
        };
    }
    let tolerations = with_daemon_tolerations(spec);
    let untolerated = |effect: &str| {
        node.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter(|t| t.effect == effect)
            .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
    };
    let evicts = untolerated(NO_EXECUTE);
    Placement {
        should_run: !evicts && !untolerated(NO_SCHEDULE),
        should_continue_running: !evicts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).expect("node")
    }
    fn spec(v: serde_json::Value) -> PodSpec {
        let mut v = v;
        v["containers"] = json!([{"name": "c", "image": "i"}]);
        serde_json::from_value(v).expect("spec")
    }
    fn p(run: bool, keep: bool) -> Placement {
        Placement {
            should_run: run,
            should_continue_running: keep,
        }
    }

    #[test]
    fn placement_table() {
        let plain = node(json!({"metadata": {"name": "n1", "labels": {"pool": "a", "gpu": "4"}}}));
        let no_sched = node(json!({"metadata": {"name": "n2", "labels": {"pool": "a"}},
            "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}}));
        let no_exec = node(json!({"metadata": {"name": "n3"},
            "spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoExecute"}]}}));
        let cordoned = node(
            json!({"metadata": {"name": "n4"}, "spec": {"unschedulable": true,
            "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                       {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}}),
        );
        let cases = [
            ("no constraints", json!({}), &plain, p(true, true)),
            (
                "selector matches",
                json!({"nodeSelector": {"pool": "a"}}),
                &plain,
                p(true, true),
            ),
            (
                "selector misses",
                json!({"nodeSelector": {"pool": "b"}}),
                &plain,
                p(false, false),
            ),
            (
                "affinity In",
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}}}}),
                &plain,
                p(true, true),
            ),
            (
                "affinity NotIn",
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["a"]}]}]}}}}),
                &plain,
                p(false, false),
            ),
            (
                "affinity Gt",
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Gt", "values": ["2"]}]}]}}}}),
                &plain,
                p(true, true),
            ),
            (
                "affinity terms are ORed",
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "x", "operator": "Exists"}]},
                                      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}),
                &plain,
                p(true, true),
            ),
            (
                "empty term matches nothing",
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{}]}}}}),
                &plain,
                p(false, false),
            ),
            (
                "NoSchedule untolerated keeps existing",
                json!({}),
                &no_sched,
                p(false, true),
            ),
            (
                "NoSchedule tolerated by Equal",
                json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]}),
                &no_sched,
                p(true, true),
            ),
            (
                "Equal with another value does not tolerate",
                json!({"tolerations": [{"key": "dedicated", "value": "web"}]}),
                &no_sched,
                p(false, true),
            ),
            (
                "Exists without key tolerates all",
                json!({"tolerations": [{"operator": "Exists"}]}),
                &no_exec,
                p(true, true),
            ),
            (
                "NoExecute untolerated evicts",
                json!({}),
                &no_exec,
                p(false, false),
            ),
            (
                "cordoned and not-ready nodes keep their daemon",
                json!({}),
                &cordoned,
                p(true, true),
            ),
        ];
        for (name, s, n, want) in cases {
            assert_eq!(placement(&spec(s), n), want, "{name}");
        }
    }

    #[test]
    fn daemon_tolerations_are_added_once() {
        let s = spec(json!({"hostNetwork": true, "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}]}));
        let all = with_daemon_tolerations(&s);
        assert_eq!(all.len(), 7);
        assert_eq!(
            all[0].toleration_seconds,
            Some(5),
            "the template's own toleration wins"
        );
        assert!(
            all.iter()
                .any(|t| t.key.as_deref() == Some("node.kubernetes.io/network-unavailable"))
        );
    }
}
