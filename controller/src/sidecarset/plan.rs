//! What the SidecarSet controller does next, as data (upstream `pkg/controller/sidecarset/`
//! `sidecarset_processor.go` and `sidecarset_strategy.go`): the status counts, which Pods to
//! upgrade in place now within partition / maxUnavailable / selector / paused, and which
//! finished upgrades release the Pod's readiness.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::{SidecarSet, SidecarSetStatus};
use kruise_api::{keys, pod as kpod, selector, sidecarset as wire};

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
}

/// Hashes of the latest SidecarSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latest {
    /// Full hash.
    pub hash: String,
    /// Hash without images.
    pub without_image: String,
}

/// Whether the Pod carries (was injected by) this SidecarSet and still matches it.
pub fn is_matched(set: &SidecarSet, pod: &Pod) -> bool {
    let name = set.metadata.name.as_deref().unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    wire::pod_hash(
        pod.metadata.annotations.as_ref(),
        keys::SIDECARSET_HASH_ANNOTATION,
        name,
    )
    .is_some()
        && wire::selects(&set.spec, ns, &labels, &BTreeMap::new())
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
/// is recorded counts once its imageID moved off the recorded one and it is ready (upstream
/// `IsPodSidecarConsistent` compares with the status in the same way).
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
        statuses
            .into_iter()
            .flatten()
            .find(|s| &s.name == c)
            .is_some_and(|s| s.image_id != before.image_id && s.ready)
    })
}

/// Go's `GetScaledValueFromIntOrPercent`.
pub fn scaled(v: &IntOrString, total: i32, round_up: bool) -> i32 {
    match v {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let p: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
            let t = i64::from(total) * p;
            let r = if round_up { (t + 99) / 100 } else { t / 100 };
            i32::try_from(r).unwrap_or(i32::MAX)
        }
    }
}

/// The plan, from the Pods' states in a stable order (upstream upgrades not-ready Pods first).
pub fn plan(set: &SidecarSet, pods: &[PodState]) -> Plan {
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
        latest_revision: String::new(),
        collision_count: set.status.as_ref().and_then(|s| s.collision_count),
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
    };
    if us.is_not_update() || us.paused {
        return out;
    }
    let mut waiting: Vec<usize> = pods
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.updated && p.image_only && p.selected)
        .map(|(i, _)| i)
        .collect();
    // Not-ready Pods first: upgrading them costs no availability.
    waiting.sort_by_key(|&i| pods[i].ready);
    let partition = us
        .partition
        .as_ref()
        .map_or(0, |p| scaled(p, matched, true))
        .max(0);
    let to_upgrade = (i32::try_from(waiting.len()).unwrap_or(i32::MAX) - partition).max(0);
    let max_unavailable = us
        .max_unavailable
        .as_ref()
        .map_or(1, |m| scaled(m, matched, false))
        .max(1);
    let unavailable = count(&|p| !p.ready || !p.consistent);
    let mut budget = (max_unavailable - unavailable).max(0);
    for &i in waiting
        .iter()
        .take(usize::try_from(to_upgrade).unwrap_or(0))
    {
        // An unready Pod's upgrade takes nothing more away.
        if pods[i].ready {
            if budget == 0 {
                continue;
            }
            budget -= 1;
        }
        out.upgrade.push(i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(strategy: serde_json::Value) -> SidecarSet {
        serde_json::from_value(
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "s", "generation": 3},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": "e:2"}],
                "updateStrategy": strategy}}),
        )
        .expect("set")
    }

    fn old() -> PodState {
        PodState {
            updated: false,
            image_only: true,
            consistent: true,
            ready: true,
            selected: true,
            held: false,
        }
    }

    #[test]
    fn max_unavailable_one_upgrades_one_at_a_time() {
        let pods = vec![old(), old(), old()];
        let p = plan(&set(json!({})), &pods);
        assert_eq!(p.upgrade, vec![0]);
        assert_eq!(p.status.matched_pods, 3);
        assert_eq!(p.status.updated_pods, 0);
        assert_eq!(p.status.observed_generation, 3);
        // One upgrading (not consistent) uses the whole budget.
        let mut busy = pods.clone();
        busy[0] = PodState {
            updated: true,
            consistent: false,
            ready: false,
            held: true,
            ..old()
        };
        assert!(plan(&set(json!({})), &busy).upgrade.is_empty());
    }

    #[test]
    fn partition_holds_back_exactly() {
        let pods = vec![old(); 4];
        let p = plan(&set(json!({"maxUnavailable": 10, "partition": 1})), &pods);
        assert_eq!(p.upgrade, vec![0, 1, 2]);
        let p = plan(
            &set(json!({"maxUnavailable": "100%", "partition": "50%"})),
            &pods,
        );
        assert_eq!(p.upgrade.len(), 2);
    }

    #[test]
    fn paused_not_update_selector_and_non_image_changes_upgrade_nothing() {
        let pods = vec![old(); 2];
        assert!(
            plan(&set(json!({"paused": true})), &pods)
                .upgrade
                .is_empty()
        );
        assert!(
            plan(&set(json!({"type": "NotUpdate"})), &pods)
                .upgrade
                .is_empty()
        );
        let unselected = vec![
            PodState {
                selected: false,
                ..old()
            };
            2
        ];
        assert!(plan(&set(json!({})), &unselected).upgrade.is_empty());
        let env_change = vec![
            PodState {
                image_only: false,
                ..old()
            };
            2
        ];
        assert!(
            plan(&set(json!({"maxUnavailable": 2})), &env_change)
                .upgrade
                .is_empty()
        );
    }

    #[test]
    fn finished_upgrades_are_released_and_counted() {
        let done = PodState {
            updated: true,
            held: true,
            ..old()
        };
        let p = plan(&set(json!({})), &[done, old()]);
        assert_eq!(p.release, vec![0]);
        assert_eq!(p.status.updated_ready_pods, 1);
        assert_eq!(p.upgrade, vec![1]);
    }
}
