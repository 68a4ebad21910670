//! What the SidecarSet controller does next, as data (upstream `pkg/controller/sidecarset/`
//! `sidecarset_processor.go` and `sidecarset_strategy.go`): the status counts, which Pods to
//! upgrade in place now within partition / maxUnavailable / selector / paused, and which
//! finished upgrades release the Pod's readiness.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{SidecarSet, SidecarSetCondition, SidecarSetStatus};
use kruise_api::appspub::UpdateScatterTerm;
use kruise_api::{keys, pod as kpod, selector, sidecarset as wire};

use crate::workload::{intstr, podutil, updatesort};

/// One matched Pod as the plan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    /// The Pod carries the latest SidecarSet hash.
    pub updated: bool,
    /// Its sidecars differ from the latest only in images (an in-place upgrade may fix that).
    pub image_only: bool,
    /// Its sidecar containers run what the spec says (no restart pending).
    pub consistent: bool,
    /// The Pod is Ready.
    pub ready: bool,
    /// `updateStrategy.selector` allows upgrading it.
    pub selected: bool,
    /// It carries our not-ready key.
    pub held: bool,
}

/// The plan for one SidecarSet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Status to write.
    pub status: SidecarSetStatus,
    /// Indexes of the Pods to upgrade now.
    pub upgrade: Vec<usize>,
    /// Indexes of the Pods whose upgrade is done and whose readiness key can go.
    pub release: Vec<usize>,
    /// Indexes of the Pods this SidecarSet should upgrade but cannot in place (more than
    /// images changed): their `SidecarSetUpgradable` condition goes False (upstream
    /// `GetNextUpgradePods`' `notUpgradablePods`).
    pub not_upgradable: Vec<usize>,
}

/// Hashes of the latest SidecarSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latest {
    /// Full hash.
    pub hash: String,
    /// Hash without images.
    pub without_image: String,
    /// The latest ControllerRevision's name (`status.latestRevision`), recorded on the Pods
    /// an upgrade brings to this spec.
    pub revision: String,
}

/// Whether the Pod carries (was injected by) this SidecarSet and still matches it, with the
/// matcher the webhook injects with; `namespace_labels` are those of the Pod's namespace
/// (upstream `getMatchingPods`).
pub fn is_matched(
    set: &SidecarSet,
    pod: &Pod,
    namespace_labels: &BTreeMap<String, String>,
) -> bool {
    let name = set.metadata.name.as_deref().unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    wire::pod_hash(
        pod.metadata.annotations.as_ref(),
        keys::SIDECARSET_HASH_ANNOTATION,
        name,
    )
    .is_some()
        && wire::selects_pod(&set.spec, pod, namespace_labels)
}

/// The `scatterStrategy` with every `key: "*"` term replaced by one term per value of that
/// label among `pods`, duplicates dropped (upstream `parseUpdateScatterTerms`).
pub fn expand_scatter_terms(terms: &[UpdateScatterTerm], pods: &[&Pod]) -> Vec<UpdateScatterTerm> {
    let mut out: Vec<UpdateScatterTerm> = Vec::new();
    let mut push = |t: UpdateScatterTerm| {
        if !out.contains(&t) {
            out.push(t);
        }
    };
    for t in terms {
        if t.value != "*" {
            push(t.clone());
            continue;
        }
        for p in pods {
            if let Some(v) = p.metadata.labels.as_ref().and_then(|l| l.get(&t.key)) {
                push(UpdateScatterTerm {
                    key: t.key.clone(),
                    value: v.clone(),
                });
            }
        }
    }
    out
}

/// The upgrade order of the waiting Pods (upstream `SortUpdateIndexes`): Kubernetes' ActivePods
/// order (not-ready and unscheduled first: upgrading them costs no availability), then
/// `priorityStrategy` (stable, so ties keep that order), then `scatterStrategy`. The same
/// sorters as CloneSet's, as upstream shares `updatesort`.
pub fn sort_waiting(set: &SidecarSet, pods: &[&Pod], mut idx: Vec<usize>) -> Vec<usize> {
    idx.sort_by(|&a, &b| podutil::active_pods_cmp(pods[a], pods[b]));
    let us = &set.spec.update_strategy;
    if let Some(p) = &us.priority_strategy {
        updatesort::sort_by_priority(p, pods, &mut idx);
    }
    if !us.scatter_strategy.is_empty() {
        let terms = expand_scatter_terms(&us.scatter_strategy, pods);
        idx = updatesort::scatter(&terms, pods, idx);
    }
    idx
}

/// The status conditions after this reconcile: [`keys::SIDECARSET_CONDITION_POD_UPGRADE_BLOCKED`]
/// True naming the Pods in `blocked`, False once none is (written only after it was True once);
/// the transition time moves only when the status does.
pub fn conditions(
    prev: Option<&SidecarSetStatus>,
    blocked: &[String],
    now: Timestamp,
) -> Vec<SidecarSetCondition> {
    let mut out: Vec<SidecarSetCondition> = prev.map(|s| s.conditions.clone()).unwrap_or_default();
    let at = out
        .iter()
        .position(|c| c.type_ == keys::SIDECARSET_CONDITION_POD_UPGRADE_BLOCKED);
    if blocked.is_empty() && at.is_none() {
        return out;
    }
    let (status, reason, message) = if blocked.is_empty() {
        (keys::k8s::CONDITION_FALSE, "", String::new())
    } else {
        const SHOWN: usize = 5;
        let mut m = blocked
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if blocked.len() > SHOWN {
            m.push_str(&format!("; and {} more", blocked.len() - SHOWN));
        }
        (
            keys::k8s::CONDITION_TRUE,
            keys::SIDECARSET_REASON_UPGRADE_FAILED,
            m,
        )
    };
    let transition = match at.map(|i| &out[i]) {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Some(Time(now)),
    };
    let cond = SidecarSetCondition {
        type_: keys::SIDECARSET_CONDITION_POD_UPGRADE_BLOCKED.to_owned(),
        status: status.to_owned(),
        last_transition_time: transition,
        reason: reason.to_owned(),
        message,
    };
    match at {
        Some(i) => out[i] = cond,
        None => out.push(cond),
    }
    out
}

/// The plan's view of one matched Pod.
pub fn pod_state(set: &SidecarSet, latest: &Latest, pod: &Pod) -> PodState {
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let ann = pod.metadata.annotations.as_ref();
    let hash = wire::pod_hash(ann, keys::SIDECARSET_HASH_ANNOTATION, name);
    let without = wire::pod_hash(ann, keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION, name);
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let held = kpod::condition(pod, keys::KRUISE_POD_READY)
        .and_then(|c| c.message.as_deref())
        .and_then(|m| kruise_api::appspub::parse_readiness_messages(m).ok())
        .is_some_and(|l| {
            l.iter().any(|m| {
                m.user_agent == keys::READINESS_USER_AGENT_SIDECARSET
                    && m.key == keys::READINESS_KEY_SIDECAR_UPGRADE
            })
        });
    PodState {
        updated: hash.as_deref() == Some(latest.hash.as_str()),
        image_only: without.as_deref() == Some(latest.without_image.as_str()),
        // A started hot upgrade is consistent only once the pair has flipped.
        consistent: is_consistent(set, pod) && !super::hot::in_progress(set, pod),
        ready: kpod::is_ready(pod),
        selected: set
            .spec
            .update_strategy
            .selector
            .as_ref()
            .is_none_or(|s| selector::matches(s, &labels)),
        held,
    }
}

/// Whether every sidecar container of the Pod runs its spec image: a container whose upgrade
/// (or hot-upgrade reset) is recorded counts once it has [`super::hot::restarted_since`] and
/// is ready.
pub fn is_consistent(set: &SidecarSet, pod: &Pod) -> bool {
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let states = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION))
        .and_then(|v| wire::parse_inplace_states(v).ok())
        .unwrap_or_default();
    let Some(state) = states.get(name) else {
        return true;
    };
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    state.last_container_statuses.iter().all(|(c, before)| {
        let ready = statuses
            .into_iter()
            .flatten()
            .any(|s| &s.name == c && s.ready);
        ready && super::hot::restarted_since(pod, c, &before.image_id)
    })
}

/// How many of `matched` Pods `partition` holds back (upstream `calculateUpgradeCount` via
/// `util.CalculatePartitionReplicas`, the CloneSet rule): a percentage rounds up, one that
/// rounds to every Pod (more than one, not "100%") still lets one upgrade. A value the webhook
/// would have refused holds every Pod back rather than upgrading them all.
pub fn partition_count(partition: Option<&IntOrString>, matched: i32) -> i32 {
    intstr::partition_replicas(partition, matched).unwrap_or(matched)
}

/// How many Pods may be unavailable (upstream: `intstrutil.GetValueFromIntOrPercent(..., true)`,
/// default 1): a percentage rounds up. An unreadable value (the webhook refuses it) counts as 1.
pub fn max_unavailable_count(max_unavailable: Option<&IntOrString>, matched: i32) -> i32 {
    max_unavailable.map_or(1, |m| intstr::scaled_value(m, matched, true).unwrap_or(1))
}

/// The plan, from the Pods' states; `objects[i]` is the Pod of `pods[i]` (for the upgrade
/// order, [`sort_waiting`]).
pub fn plan(set: &SidecarSet, pods: &[PodState], objects: &[&Pod]) -> Plan {
    let matched = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    let count = |f: &dyn Fn(&PodState) -> bool| {
        i32::try_from(pods.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let status = SidecarSetStatus {
        observed_generation: set.metadata.generation.unwrap_or_default(),
        matched_pods: matched,
        updated_pods: count(&|p| p.updated),
        ready_pods: count(&|p| p.ready),
        updated_ready_pods: count(&|p| p.updated && p.consistent && p.ready),
        latest_revision: set
            .status
            .as_ref()
            .map(|s| s.latest_revision.clone())
            .unwrap_or_default(),
        collision_count: set.status.as_ref().and_then(|s| s.collision_count),
        conditions: set
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default(),
    };
    let release = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| p.held && p.consistent)
        .map(|(i, _)| i)
        .collect();
    let us = &set.spec.update_strategy;
    let mut out = Plan {
        status,
        upgrade: Vec::new(),
        release,
        not_upgradable: Vec::new(),
    };
    if us.is_not_update() || us.paused {
        return out;
    }
    out.not_upgradable = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.updated && !p.image_only && p.selected)
        .map(|(i, _)| i)
        .collect();
    let waiting: Vec<usize> = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.updated && p.image_only && p.selected)
        .map(|(i, _)| i)
        .collect();
    let waiting = sort_waiting(set, objects, waiting);
    let partition = partition_count(us.partition.as_ref(), matched);
    let to_upgrade = (i32::try_from(waiting.len()).unwrap_or(i32::MAX) - partition).max(0);
    let max_unavailable = max_unavailable_count(us.max_unavailable.as_ref(), matched);
    // Upstream counts against maxUnavailable only the Pods already on the latest revision
    // whose sidecars are still starting or that are not ready: a Pod that was unready before
    // its upgrade is not made unavailable by it.
    let mut unavailable = count(&|p| p.updated && (!p.consistent || !p.ready));
    for &i in waiting
        .iter()
        .take(usize::try_from(to_upgrade).unwrap_or(0))
    {
        // An unready Pod's upgrade takes nothing more away.
        if pods[i].ready {
            // The order is the upgrade priority: once the budget is spent, nothing after
            // this Pod goes either (upstream breaks here too).
            if unavailable >= max_unavailable {
                break;
            }
            unavailable += 1;
        }
        out.upgrade.push(i);
    }
    out
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
