//! Which nodes run a daemon Pod (upstream `NodeShouldRunDaemonPod` with the native
//! controller's `predicates`): the template's nodeSelector, its required node affinity, and the
//! node's NoSchedule / NoExecute taints against the template's tolerations plus the ones every
//! daemon Pod gets.

use k8s_openapi::api::core::v1::{Node, PodSpec, Toleration};

use crate::workload::nodes::{NO_EXECUTE, NO_SCHEDULE, node_matches, tolerates};

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
