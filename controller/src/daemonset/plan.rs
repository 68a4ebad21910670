//! Pure decisions of a sync (upstream `manage` / `podsShouldBeOnNode`, `rollingUpdate`,
//! `filterDaemonPodsToUpdate`, `updatedDesiredNodeCounts` and `syncNodes`' burst limit): which
//! nodes get a Pod, which Pods go, and which old Pods are replaced (in place when possible)
//! now. Time is a parameter; no client.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{DaemonSet, RollingUpdateType};
use kruise_api::appspub::LifecycleStateType;
use kruise_api::selector;

use super::nodes::Placement;
use super::pod::pod_hash;
use crate::workload::podutil;

/// Default `burstReplicas` (upstream).
pub const DEFAULT_BURST_REPLICAS: i32 = 250;

/// One node and the Pods of the DaemonSet that target it.
#[derive(Clone, Debug)]
pub struct NodePods<'a> {
    pub node: &'a Node,
    pub placement: Placement,
    /// Every Pod for this node, terminating ones included.
    pub pods: Vec<&'a Pod>,
}

impl NodePods<'_> {
    fn name(&self) -> &str {
        self.node.metadata.name.as_deref().unwrap_or("")
    }
    fn live(&self) -> impl Iterator<Item = &Pod> {
        self.pods
            .iter()
            .copied()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
    }
}

/// The rolling-update limits of one sync, resolved against the desired number of Pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_unavailable: usize,
    pub max_surge: usize,
    pub partition: usize,
    pub burst: usize,
    /// `scaleStrategy.partitionedScaling`: the partition that also holds back creations
    /// (upstream `GetNodesNeedingPods`), `None` when creations are not held back.
    pub creation_partition: Option<usize>,
}

/// Why the spec's numbers cannot be used (the field and the fix).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("spec.{field}: {value:?} is not a number or a percentage like \"10%\"")]
pub struct BadNumber {
    pub field: &'static str,
    pub value: String,
}

/// An int-or-percent of `total`, percentages rounded up (upstream
/// `GetScaledValueFromIntOrPercent(…, true)`).
pub fn scaled(v: &IntOrString, total: usize, field: &'static str) -> Result<usize, BadNumber> {
    let bad = || BadNumber {
        field,
        value: match v {
            IntOrString::Int(i) => i.to_string(),
            IntOrString::String(s) => s.clone(),
        },
    };
    match v {
        IntOrString::Int(i) => usize::try_from(*i).map_err(|_| bad()),
        IntOrString::String(s) => {
            let pct: usize = s
                .strip_suffix('%')
                .and_then(|n| n.parse().ok())
                .ok_or_else(bad)?;
            Ok((pct * total).div_ceil(100))
        }
    }
}

/// Resolve the limits for `desired` Pods. Surging (or any type with maxSurge) surges; without
/// either limit the update still moves one node at a time (upstream's fallback).
pub fn limits(ds: &DaemonSet, desired: usize) -> Result<Limits, BadNumber> {
    let ru = ds.spec.rolling_update().unwrap_or_default();
    let surging = ru.type_ == Some(RollingUpdateType::Surging);
    let max_surge = match &ru.max_surge {
        Some(v) => scaled(v, desired, "updateStrategy.rollingUpdate.maxSurge")?,
        None if surging => 1,
        None => 0,
    };
    let mut max_unavailable = match &ru.max_unavailable {
        Some(v) => scaled(v, desired, "updateStrategy.rollingUpdate.maxUnavailable")?,
        None if max_surge > 0 => 0,
        None => 1,
    };
    if desired > 0 && max_unavailable == 0 && max_surge == 0 {
        max_unavailable = 1;
    }
    let partition = match &ru.partition {
        Some(v) => scaled(v, desired, "updateStrategy.rollingUpdate.partition")?,
        None => 0,
    };
    let burst = match &ds.spec.burst_replicas {
        Some(v) => scaled(v, desired, "burstReplicas")?.max(1),
        None => DEFAULT_BURST_REPLICAS as usize,
    };
    Ok(Limits {
        max_unavailable,
        max_surge,
        partition,
        burst,
        creation_partition: creation_partition(ds)?,
    })
}

/// Whether new Pods are created only within the partition (upstream
/// `isDaemonSetCreationProgressively`; the v1alpha1 annotation converts to this field).
pub fn is_creation_progressive(ds: &DaemonSet) -> bool {
    ds.spec
        .scale_strategy
        .as_ref()
        .is_some_and(|s| s.partitioned_scaling)
}

/// The partition that holds back creations: only with partitioned scaling under a
/// RollingUpdate with a non-zero partition. As upstream, a percentage is of the last status's
/// desired number, rounded down (so a new DaemonSet's percentage holds nothing back yet).
fn creation_partition(ds: &DaemonSet) -> Result<Option<usize>, BadNumber> {
    let Some(p) = ds.spec.rolling_update().and_then(|r| r.partition) else {
        return Ok(None);
    };
    if !is_creation_progressive(ds) {
        return Ok(None);
    }
    let last_desired = ds.status.as_ref().map_or(0, |s| s.desired_number_scheduled);
    let partition = crate::workload::intstr::scaled_value(&p, last_desired, false)
        .ok()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| BadNumber {
            field: "updateStrategy.rollingUpdate.partition",
            value: match &p {
                IntOrString::Int(i) => i.to_string(),
                IntOrString::String(s) => s.clone(),
            },
        })?;
    Ok((partition > 0).then_some(partition))
}

/// The nodes that get a new Pod now (upstream `GetNodesNeedingPods`): all of `needing` unless
/// creation is progressive, else, in name order, only as many as keep the Pods at the update
/// revision within `desired - partition`.
pub fn nodes_needing_pods(
    new_pods: usize,
    desired: usize,
    partition: Option<usize>,
    mut needing: Vec<String>,
) -> Vec<String> {
    needing.sort();
    let Some(partition) = partition else {
        return needing;
    };
    let max_create = desired
        .saturating_sub(new_pods)
        .saturating_sub(partition.min(desired));
    needing.truncate(max_create);
    needing
}

/// What one sync does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Nodes that get a new Pod.
    pub create_on: Vec<String>,
    /// Pods to delete (gone or misplaced nodes, failed, duplicates, replaced under surge).
    pub delete: Vec<String>,
    /// Old Pods to replace now: in place when the type allows it and the change fits, else
    /// deleted (the next sync creates their successor).
    pub replace: Vec<String>,
}

/// A Pod the preDelete hook holds: it waits to be deleted and counts as no Pod (upstream
/// `isPodPreDeleting`).
pub fn is_pre_deleting(pod: &Pod) -> bool {
    podutil::lifecycle_state(pod) == Some(LifecycleStateType::PreparingDelete)
}

fn nil_or_pre_deleting(pod: Option<&Pod>) -> bool {
    pod.is_none_or(is_pre_deleting)
}

fn oldest_first(a: &&Pod, b: &&Pod) -> std::cmp::Ordering {
    let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
    t(a).cmp(&t(b))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// The manage loop for one node (upstream `podsShouldBeOnNode`): create, or delete failed,
/// surplus, misplaced and pre-deleting Pods (the reconcile deletes a pre-deleting one once its
/// hook lets go). With surge a node may hold one old and one new Pod, and a node whose only
/// Pods are pre-deleting gets a new one beside them.
fn manage_node(np: &NodePods<'_>, hash: &str, surge: bool, plan: &mut Plan) {
    let p = np.placement;
    if p.should_run && np.pods.is_empty() {
        plan.create_on.push(np.name().to_owned());
        return;
    }
    if !p.should_continue_running {
        plan.delete
            .extend(np.live().map(|pod| podutil::name(pod).to_owned()));
        return;
    }
    let mut running = Vec::new();
    for pod in np.live() {
        if podutil::phase(pod) == "Failed" || is_pre_deleting(pod) {
            // Its replacement is created by the next sync, once this one is gone.
            plan.delete.push(podutil::name(pod).to_owned());
        } else {
            running.push(pod);
        }
    }
    running.sort_by(oldest_first);
    if !surge {
        plan.delete.extend(
            running
                .iter()
                .skip(1)
                .map(|pod| podutil::name(pod).to_owned()),
        );
        return;
    }
    if running.is_empty() && p.should_run {
        plan.create_on.push(np.name().to_owned());
        return;
    }
    let (new, old): (Vec<&Pod>, Vec<&Pod>) = running
        .into_iter()
        .partition(|pod| pod_hash(pod) == Some(hash));
    for extra in new.iter().skip(1).chain(old.iter().skip(1)) {
        plan.delete.push(podutil::name(extra).to_owned());
    }
}

/// The node's new and old Pod, or `None` when it has more than one of either (the manage loop
/// cleans that up first; upstream `findUpdatedPodsOnNode`).
fn updated_pods_on_node<'a>(
    np: &NodePods<'a>,
    hash: &str,
) -> Option<(Option<&'a Pod>, Option<&'a Pod>)> {
    let (mut new, mut old) = (None, None);
    for pod in np
        .pods
        .iter()
        .copied()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let slot = if pod_hash(pod) == Some(hash) {
            &mut new
        } else {
            &mut old
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(pod);
    }
    Some((new, old))
}

/// The nodes whose Pods this update may touch (upstream `filterDaemonPodsNodeToUpdate`): in
/// reverse name order, nodes already updated or being updated first, then the nodes matching
/// `rollingUpdate.selector` (all nodes without one), cut to all minus `partition`.
fn nodes_to_update<'n, 'a>(
    nodes: &'n [NodePods<'a>],
    hash: &str,
    partition: usize,
    selector: Option<&LabelSelector>,
) -> Vec<&'n NodePods<'a>> {
    let mut all: Vec<&NodePods<'a>> = nodes.iter().collect();
    all.sort_by(|a, b| b.name().cmp(a.name()));
    let (mut updated, mut updating, mut candidates) = (Vec::new(), Vec::new(), Vec::new());
    let empty = BTreeMap::new();
    for np in &all {
        match updated_pods_on_node(np, hash) {
            None | Some((Some(_), _)) => updated.push(*np),
            Some((None, None)) => updating.push(*np),
            Some((None, Some(old))) if is_pre_deleting(old) => updating.push(*np),
            Some((None, Some(_))) => {
                let labels = np.node.metadata.labels.as_ref().unwrap_or(&empty);
                if selector.is_none_or(|s| selector::matches(s, labels)) {
                    candidates.push(*np);
                }
            }
        }
    }
    let max_update = all.len().saturating_sub(partition);
    let mut sorted = updated;
    sorted.extend(updating);
    sorted.extend(candidates);
    sorted.truncate(max_update);
    sorted
}

/// The rolling update (upstream `rollingUpdate`): without surge, replace old Pods while at most
/// `max_unavailable` of the nodes it may touch are without an available Pod (an unavailable old
/// Pod is replaced regardless, outside the budget); with surge, create a new Pod beside at most `max_surge` available old ones and
/// delete each old Pod once its new one is available.
fn rolling_update(
    nodes: &[NodePods<'_>],
    hash: &str,
    lim: &Limits,
    selector: Option<&LabelSelector>,
    min_ready: i32,
    now: Timestamp,
    plan: &mut Plan,
) {
    let available = |p: &Pod| podutil::is_available(p, min_ready, now);
    let eligible: Vec<NodePods<'_>> = nodes
        .iter()
        .filter(|n| n.placement.should_run || n.live().next().is_some())
        .cloned()
        .collect();
    let targets = nodes_to_update(&eligible, hash, lim.partition, selector);
    if lim.max_surge == 0 {
        // As upstream: the budget is counted over the nodes this update may touch (partition
        // and selector applied), and an unavailable old Pod is replaced without using it up
        // (replacing it makes nothing less available).
        let mut unavailable = 0usize;
        let mut allowed = Vec::new();
        let mut candidates = Vec::new();
        for np in &targets {
            let Some((new, old)) = updated_pods_on_node(np, hash) else {
                unavailable += 1;
                continue;
            };
            // A pre-deleting Pod counts as none: the manage loop deletes it and creates anew.
            match (new, old) {
                (new, old) if nil_or_pre_deleting(new) == nil_or_pre_deleting(old) => {
                    unavailable += 1
                }
                (Some(new), _) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                    if is_pre_deleting(new) {
                        unavailable += 1;
                    }
                }
                (None, None) => unavailable += 1,
                (None, Some(old)) => {
                    if available(old) {
                        candidates.push(podutil::name(old).to_owned());
                    } else {
                        allowed.push(podutil::name(old).to_owned());
                    }
                }
            }
        }
        let room = lim.max_unavailable.saturating_sub(unavailable);
        plan.replace.extend(allowed);
        plan.replace.extend(candidates.into_iter().take(room));
        return;
    }
    let mut surging = 0usize;
    let mut allowed = Vec::new();
    let mut candidates = Vec::new();
    for np in &targets {
        match updated_pods_on_node(np, hash) {
            None => surging += 1,
            Some((_, old)) if nil_or_pre_deleting(old) => {}
            Some((_, None)) => {}
            Some((None, Some(old))) => {
                if available(old) {
                    candidates.push(np.name().to_owned());
                } else {
                    allowed.push(np.name().to_owned());
                }
            }
            Some((Some(new), Some(old))) => {
                if available(new) && !is_pre_deleting(new) {
                    plan.delete.push(podutil::name(old).to_owned());
                } else {
                    surging += 1;
                }
            }
        }
    }
    let room = lim.max_surge.saturating_sub(surging);
    plan.create_on.extend(allowed);
    plan.create_on.extend(candidates.into_iter().take(room));
}

/// Everything one sync does, within `burst` creations and deletions.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    nodes: &[NodePods<'_>],
    orphaned: &[&Pod],
    hash: &str,
    lim: &Limits,
    rolling: Option<&kruise_api::apps::v1beta1::RollingUpdateDaemonSet>,
    min_ready: i32,
    now: Timestamp,
) -> Plan {
    let mut plan = Plan::default();
    // Pods whose node is gone (or that never named one) are misplaced.
    plan.delete.extend(
        orphaned
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| podutil::name(p).to_owned()),
    );
    let surge = lim.max_surge > 0;
    for np in nodes {
        manage_node(np, hash, surge, &mut plan);
    }
    if lim.creation_partition.is_some() {
        let desired = nodes.iter().filter(|n| n.placement.should_run).count();
        let new_pods = nodes
            .iter()
            .filter(|n| matches!(updated_pods_on_node(n, hash), Some((Some(_), _))))
            .count();
        let needing = std::mem::take(&mut plan.create_on);
        plan.create_on = nodes_needing_pods(new_pods, desired, lim.creation_partition, needing);
    }
    // The update waits until placement is settled, as upstream's expectations make it. A Pod
    // already pre-deleting does not hold it up: it may wait for its hook for a long time, and
    // the update counts it as no Pod (upstream sets no expectation for a held Pod).
    let pre_deleting: BTreeSet<&str> = nodes
        .iter()
        .flat_map(|n| n.pods.iter())
        .filter(|p| is_pre_deleting(p))
        .map(|p| podutil::name(p))
        .collect();
    if plan.create_on.is_empty()
        && plan
            .delete
            .iter()
            .all(|n| pre_deleting.contains(n.as_str()))
        && let Some(ru) = rolling.filter(|r| !r.is_paused())
    {
        rolling_update(
            nodes,
            hash,
            lim,
            ru.selector.as_ref(),
            min_ready,
            now,
            &mut plan,
        );
    }
    plan.create_on.truncate(lim.burst);
    plan.delete.truncate(lim.burst);
    plan
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
