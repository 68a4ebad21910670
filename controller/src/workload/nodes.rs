//! Whether a Pod may run on a node, as the per-node workloads (Advanced DaemonSet, BroadcastJob)
//! decide it before the scheduler does: the template's nodeSelector and required node affinity,
//! taints against tolerations, and (BroadcastJob) the Pod's requests against the node's
//! allocatable. Plus the two halves of binding a Pod to its node through the scheduler: the
//! affinity written on a new Pod and the node read back from a Pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Taint effect that keeps new Pods off a node.
pub const NO_SCHEDULE: &str = "NoSchedule";
/// Taint effect that also evicts the Pods already there.
pub const NO_EXECUTE: &str = "NoExecute";
/// The taint the node lifecycle controller puts on a cordoned node.
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

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
pub fn term_matches(
    term: &NodeSelectorTerm,
    labels: &BTreeMap<String, String>,
    name: &str,
) -> bool {
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

/// The node a per-node Pod (daemon or broadcast job) is for: its `nodeName` once bound, else the
/// node its affinity names (upstream `GetTargetNodeName`, BroadcastJob's `getAssignedNode`).
pub fn target_node(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name" && r.operator == "In")
        .and_then(|r| r.values.as_ref()?.first())
        .map(String::as_str)
}

/// The required node affinity of a per-node Pod (upstream
/// `ReplaceDaemonSetPodNodeNameNodeAffinity`): only `metadata.name In [node]`, which the
/// scheduler honours like any affinity (since 1.12 daemon Pods are scheduled this way, not by
/// setting nodeName). The template's other terms are dropped: the node already matched them.
pub fn bind_to_node(spec: &mut PodSpec, node: &str) {
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let na = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_fields: Some(vec![NodeSelectorRequirement {
                key: "metadata.name".to_owned(),
                operator: "In".to_owned(),
                values: Some(vec![node.to_owned()]),
            }]),
            match_expressions: None,
        }],
    });
}

/// `{owner}-{5 random characters}`, the form `generateName` would give; chosen here so the
/// creation can be expected by name before it is sent.
pub fn pod_name(owner: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    // Object names are at most 63 characters for the hostname the Pod gets.
    let mut end = owner.len().min(57);
    while !owner.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{suffix}", &owner[..end])
}

/// The first NoSchedule or NoExecute taint of `node` that no toleration tolerates (upstream
/// `FindMatchingUntoleratedTaint` with the scheduler's filter).
pub fn untolerated_taint<'a>(tolerations: &[Toleration], node: &'a Node) -> Option<&'a Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == NO_SCHEDULE || t.effect == NO_EXECUTE)
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
}

/// A cordoned node (`spec.unschedulable`) refuses the Pod unless it tolerates the
/// unschedulable taint (upstream's `nodeunschedulable` filter).
pub fn refuses_unschedulable(tolerations: &[Toleration], node: &Node) -> bool {
    let cordoned = node
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let taint = Taint {
        key: UNSCHEDULABLE_TAINT.to_owned(),
        effect: NO_SCHEDULE.to_owned(),
        ..Default::default()
    };
    cordoned && !tolerations.iter().any(|t| tolerates(t, &taint))
}

/// A quantity in thousandths of its unit (`"100m"` is 100, `"1Gi"` is 1024^3 * 1000), rounded
/// up as Kubernetes rounds requests; `None` when it does not parse.
pub fn milli_value(q: &Quantity) -> Option<i128> {
    let s = q.0.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let scale: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse().ok()?),
        _ => return None,
    };
    let v = (num * scale * 1000.0).ceil();
    v.is_finite().then_some(v as i128)
}

/// What the Pod requests (upstream `computePodResourceRequest`): per resource, the larger of
/// the sum over the app containers and the largest init container, plus the overhead.
pub fn pod_requests(spec: &PodSpec) -> BTreeMap<String, i128> {
    let mut sum: BTreeMap<String, i128> = BTreeMap::new();
    let requests = |c: &k8s_openapi::api::core::v1::Container| {
        c.resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .unwrap_or_default()
    };
    for c in &spec.containers {
        for (k, q) in requests(c) {
            *sum.entry(k).or_default() += milli_value(&q).unwrap_or(0);
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, q) in requests(c) {
            let v = milli_value(&q).unwrap_or(0);
            let e = sum.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    for (k, q) in spec.overhead.iter().flatten() {
        *sum.entry(k.clone()).or_default() += milli_value(q).unwrap_or(0);
    }
    sum
}

/// The resources the Pod requests more of than the node can allocate, as the scheduler words
/// them (`Insufficient cpu`); empty when it fits. Like upstream's BroadcastJob, only the Pod
/// itself is weighed against `allocatable` (the node's other Pods are the scheduler's concern).
pub fn insufficient_resources(spec: &PodSpec, node: &Node) -> Vec<String> {
    let empty = BTreeMap::new();
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .unwrap_or(&empty);
    let mut out = Vec::new();
    if let Some(pods) = allocatable.get("pods").and_then(milli_value)
        && pods < 1000
    {
        out.push("Too many pods".to_owned());
    }
    for (name, want) in pod_requests(spec) {
        if want <= 0 {
            continue;
        }
        let have = allocatable.get(&name).and_then(milli_value).unwrap_or(0);
        if want > have {
            out.push(format!("Insufficient {name}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_in_thousandths() {
        let q = |s: &str| milli_value(&Quantity(s.to_owned()));
        assert_eq!(q("100m"), Some(100));
        assert_eq!(q("2"), Some(2000));
        assert_eq!(q("1.5"), Some(1500));
        assert_eq!(q("1Ki"), Some(1_024_000));
        assert_eq!(q("1Gi"), Some(1024 * 1024 * 1024 * 1000));
        assert_eq!(q("1k"), Some(1_000_000));
        assert_eq!(q("1e3"), Some(1_000_000));
        assert_eq!(q("1n"), Some(1), "rounded up");
        assert_eq!(q("abc"), None);
        assert_eq!(q("1Zi"), None);
    }

    #[test]
    fn requests_take_the_larger_of_apps_and_inits() {
        let spec: PodSpec = serde_json::from_value(json!({
            "containers": [
                {"name": "a", "image": "i", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "b", "image": "i", "resources": {"requests": {"cpu": "200m", "memory": "1Mi"}}}],
            "initContainers": [{"name": "i", "image": "i", "resources": {"requests": {"cpu": "500m"}}}],
            "overhead": {"cpu": "10m"}}))
        .expect("spec");
        let r = pod_requests(&spec);
        assert_eq!(r["cpu"], 510);
        assert_eq!(r["memory"], 1024 * 1024 * 1000);
    }

    #[test]
    fn a_node_without_room_for_pods_refuses() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"},
            "status": {"allocatable": {"pods": "0", "cpu": "1"}}}))
        .expect("node");
        let spec: PodSpec =
            serde_json::from_value(json!({"containers": [{"name": "a", "image": "i"}]}))
                .expect("spec");
        assert_eq!(insufficient_resources(&spec, &node), ["Too many pods"]);
    }
}
