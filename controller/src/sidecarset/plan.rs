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
}

/// Hashes of the latest SidecarSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latest {
    /// Full hash.
    pub hash: String,
    /// Hash without images.
    pub without_image: String,
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
    };
    if us.is_not_update() || us.paused {
        return out;
    }
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

    /// Pods `p0`, `p1`, … with these labels, scheduled, running and ready.
    fn objects(labels: &[serde_json::Value]) -> Vec<Pod> {
        labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_value(json!({
                    "metadata": {"name": format!("p{i}"), "namespace": "team", "labels": l,
                        "creationTimestamp": "2026-01-01T00:00:00Z"},
                    "spec": {"nodeName": "n1", "containers": [{"name": "proxy", "image": "e:1"}]},
                    "status": {"phase": "Running", "conditions": [
                        {"type": "Ready", "status": "True",
                         "lastTransitionTime": "2026-01-01T00:00:10Z"}]}
                }))
                .expect("pod")
            })
            .collect()
    }

    /// The plan over Pods without labels.
    fn run(set: &SidecarSet, states: &[PodState]) -> Plan {
        let objs = objects(&vec![json!({}); states.len()]);
        let refs: Vec<&Pod> = objs.iter().collect();
        plan(set, states, &refs)
    }

    /// The plan over labelled Pods, every one waiting and ready.
    fn run_labelled(set: &SidecarSet, labels: &[serde_json::Value]) -> Plan {
        let objs = objects(labels);
        let refs: Vec<&Pod> = objs.iter().collect();
        plan(set, &vec![old(); labels.len()], &refs)
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
        let p = run(&set(json!({})), &pods);
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
        assert!(run(&set(json!({})), &busy).upgrade.is_empty());
    }

    #[test]
    fn partition_holds_back_exactly() {
        let pods = vec![old(); 4];
        let p = run(&set(json!({"maxUnavailable": 10, "partition": 1})), &pods);
        assert_eq!(p.upgrade, vec![0, 1, 2]);
        let p = run(
            &set(json!({"maxUnavailable": "100%", "partition": "50%"})),
            &pods,
        );
        assert_eq!(p.upgrade.len(), 2);
    }

    #[test]
    fn paused_not_update_selector_and_non_image_changes_upgrade_nothing() {
        let pods = vec![old(); 2];
        assert!(run(&set(json!({"paused": true})), &pods).upgrade.is_empty());
        assert!(
            run(&set(json!({"type": "NotUpdate"})), &pods)
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
        assert!(run(&set(json!({})), &unselected).upgrade.is_empty());
        let env_change = vec![
            PodState {
                image_only: false,
                ..old()
            };
            2
        ];
        assert!(
            run(&set(json!({"maxUnavailable": 2})), &env_change)
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
        let p = run(&set(json!({})), &[done, old()]);
        assert_eq!(p.release, vec![0]);
        assert_eq!(p.status.updated_ready_pods, 1);
        assert_eq!(p.upgrade, vec![1]);
    }

    #[test]
    fn weight_priority_upgrades_the_heaviest_pod_first() {
        let s = set(json!({"priorityStrategy": {"weightPriority": [
            {"weight": 50, "matchSelector": {"matchLabels": {"tier": "canary"}}},
            {"weight": 10, "matchSelector": {"matchLabels": {"zone": "a"}}}]}}));
        let labels = [
            json!({"zone": "a"}),
            json!({}),
            json!({"tier": "canary"}),
            json!({"tier": "canary", "zone": "a"}),
        ];
        assert_eq!(run_labelled(&s, &labels).upgrade, vec![3]);
        let all = set(
            json!({"maxUnavailable": 4, "priorityStrategy": {"weightPriority": [
            {"weight": 50, "matchSelector": {"matchLabels": {"tier": "canary"}}},
            {"weight": 10, "matchSelector": {"matchLabels": {"zone": "a"}}}]}}),
        );
        // 60, 50, 10, 0; the tie-free order shows the weights are summed.
        assert_eq!(run_labelled(&all, &labels).upgrade, vec![3, 2, 0, 1]);
    }

    #[test]
    fn order_priority_upgrades_higher_suffix_first_and_unlabelled_first() {
        let s = set(
            json!({"maxUnavailable": 10, "priorityStrategy": {"orderPriority": [
            {"orderedKey": "rank"}]}}),
        );
        let labels = [
            json!({"rank": "web-1"}),
            json!({"rank": "web-12"}),
            json!({}),
            json!({"rank": "web-3"}),
        ];
        // Upstream puts Pods without the key first, then the larger integer suffix.
        assert_eq!(run_labelled(&s, &labels).upgrade, vec![2, 1, 3, 0]);
    }

    #[test]
    fn not_ready_pods_come_first() {
        let s = set(json!({"maxUnavailable": 1}));
        let mut objs = objects(&[json!({}), json!({})]);
        if let Some(st) = objs[1].status.as_mut() {
            st.conditions = Some(Vec::new());
        }
        let refs: Vec<&Pod> = objs.iter().collect();
        let states = vec![
            old(),
            PodState {
                ready: false,
                ..old()
            },
        ];
        // The unready one goes first and costs nothing: an unready Pod that is not upgraded
        // yet is not counted against maxUnavailable (upstream `calculateUpgradeCount`), so
        // the ready one takes the one slot.
        assert_eq!(plan(&s, &states, &refs).upgrade, vec![1, 0]);
        // An unready Pod already on the latest revision does use the slot.
        let upgraded_unready = vec![
            old(),
            PodState {
                updated: true,
                ready: false,
                ..old()
            },
        ];
        assert!(plan(&s, &upgraded_unready, &refs).upgrade.is_empty());
    }

    #[test]
    fn max_unavailable_counts_only_upgraded_pods_not_ready_or_still_starting() {
        let s = set(json!({"maxUnavailable": 2}));
        // An env change that will never be upgraded in place, and unready: not counted.
        let stuck = PodState {
            image_only: false,
            ready: false,
            ..old()
        };
        // Upgraded and ready but its sidecar not yet running the new image: counted.
        let starting = PodState {
            updated: true,
            consistent: false,
            ..old()
        };
        // Upgraded, consistent and ready: available.
        let done = PodState {
            updated: true,
            ..old()
        };
        let p = run(
            &s,
            &[stuck.clone(), starting, done.clone(), old(), old(), old()],
        );
        assert_eq!(p.upgrade, vec![3], "one slot left of two");
        let p = run(&s, &[stuck, done.clone(), done, old(), old(), old()]);
        assert_eq!(p.upgrade, vec![3, 4]);
    }

    /// Partition and maxUnavailable as counts of the matched Pods, against upstream's
    /// `CalculatePartitionReplicas` and `GetValueFromIntOrPercent(roundUp=true)`.
    #[test]
    fn percentages_round_as_upstream() {
        let s = |v: &str| IntOrString::String(v.to_owned());
        let i = IntOrString::Int;
        // (partition, matched, held back)
        let partitions = [
            (None, 5, 0),
            (Some(i(2)), 5, 2),
            (Some(i(9)), 5, 5),
            (Some(s("30%")), 5, 2),  // 1.5 rounds up
            (Some(s("50%")), 3, 2),  // 1.5 rounds up
            (Some(s("10%")), 4, 1),  // 0.4 rounds up: one old Pod stays
            (Some(s("99%")), 5, 4),  // all but one: one Pod still upgrades
            (Some(s("100%")), 5, 5), // exactly 100% holds every Pod
            (Some(s("99%")), 1, 1),  // one Pod: nothing to leave
            (Some(s("0%")), 3, 0),
            (Some(s("x%")), 3, 3), // unreadable: hold every Pod
        ];
        for (p, matched, want) in partitions {
            assert_eq!(
                partition_count(p.as_ref(), matched),
                want,
                "{p:?} of {matched}"
            );
        }
        // (maxUnavailable, matched, allowed)
        let budgets = [
            (None, 10, 1),
            (Some(i(3)), 10, 3),
            (Some(s("10%")), 10, 1),
            (Some(s("15%")), 10, 2), // 1.5 rounds up
            (Some(s("1%")), 3, 1),   // 0.03 rounds up
            (Some(s("50%")), 5, 3),  // 2.5 rounds up
            (Some(s("100%")), 4, 4),
        ];
        for (m, matched, want) in budgets {
            assert_eq!(
                max_unavailable_count(m.as_ref(), matched),
                want,
                "{m:?} of {matched}"
            );
        }
        // The plan uses them: 50% of 3 holds two back, so one of three upgrades.
        let p = run(
            &set(json!({"maxUnavailable": "100%", "partition": "50%"})),
            &[old(), old(), old()],
        );
        assert_eq!(p.upgrade, vec![0]);
    }

    #[test]
    fn scatter_spreads_a_label_value_over_the_order() {
        let s = set(json!({"maxUnavailable": 6,
            "scatterStrategy": [{"key": "zone", "value": "a"}]}));
        let labels = [
            json!({"zone": "a"}),
            json!({"zone": "a"}),
            json!({"zone": "a"}),
            json!({"zone": "b"}),
            json!({"zone": "b"}),
            json!({"zone": "b"}),
        ];
        let order = run_labelled(&s, &labels).upgrade;
        assert_eq!(order.len(), 6);
        let zone_a = |i: usize| i < 3;
        // Never two zone=a Pods next to each other.
        assert!(
            order.windows(2).all(|w| !(zone_a(w[0]) && zone_a(w[1]))),
            "{order:?}"
        );
    }

    #[test]
    fn wildcard_scatter_terms_expand_to_the_pods_values() {
        let objs = objects(&[
            json!({"zone": "a"}),
            json!({"zone": "b"}),
            json!({"zone": "a"}),
            json!({}),
        ]);
        let refs: Vec<&Pod> = objs.iter().collect();
        let terms = vec![
            UpdateScatterTerm {
                key: "zone".into(),
                value: "*".into(),
            },
            UpdateScatterTerm {
                key: "zone".into(),
                value: "b".into(),
            },
        ];
        let got = expand_scatter_terms(&terms, &refs);
        let pairs: Vec<(&str, &str)> = got
            .iter()
            .map(|t| (t.key.as_str(), t.value.as_str()))
            .collect();
        assert_eq!(pairs, vec![("zone", "a"), ("zone", "b")]);
    }

    #[test]
    fn matching_reads_the_namespace_labels() {
        let s: SidecarSet = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "s"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "namespaceSelector": {"matchLabels": {"mesh": "on"}},
                "containers": [{"name": "proxy", "image": "e:1"}]}
        }))
        .expect("set");
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "team", "labels": {"app": "web"},
                "annotations": {keys::SIDECARSET_HASH_ANNOTATION:
                    r#"{"s":{"updateTimestamp":"2026-01-01T00:00:00Z","hash":"h","sidecarSetName":"s"}}"#}}
        }))
        .expect("pod");
        let on = BTreeMap::from([("mesh".to_owned(), "on".to_owned())]);
        assert!(is_matched(&s, &pod, &on));
        assert!(!is_matched(&s, &pod, &BTreeMap::new()));
        let other = BTreeMap::from([("mesh".to_owned(), "off".to_owned())]);
        assert!(!is_matched(&s, &pod, &other));
    }

    #[test]
    fn blocked_pods_set_the_condition_and_clear_it_later() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().expect("t");
        let t1: Timestamp = "2026-01-01T00:01:00Z".parse().expect("t");
        assert!(conditions(None, &[], t0).is_empty(), "nothing to report");
        let blocked = vec!["team/p0: bad annotation".to_owned()];
        let c = conditions(None, &blocked, t0);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].type_, keys::SIDECARSET_CONDITION_POD_UPGRADE_BLOCKED);
        assert_eq!(c[0].status, "True");
        assert_eq!(c[0].reason, keys::SIDECARSET_REASON_UPGRADE_FAILED);
        assert!(c[0].message.contains("team/p0"), "{}", c[0].message);
        let prev = SidecarSetStatus {
            conditions: c,
            ..Default::default()
        };
        // Still blocked: the transition time stays.
        let again = conditions(Some(&prev), &blocked, t1);
        assert_eq!(again[0].last_transition_time, Some(Time(t0)));
        let cleared = conditions(Some(&prev), &[], t1);
        assert_eq!(cleared[0].status, "False");
        assert_eq!(cleared[0].last_transition_time, Some(Time(t1)));
        assert!(cleared[0].message.is_empty());
        let many: Vec<String> = (0..8).map(|i| format!("team/p{i}: x")).collect();
        let c = conditions(None, &many, t0);
        assert!(c[0].message.ends_with("and 3 more"), "{}", c[0].message);
    }

    proptest::proptest! {
        /// Whatever the labels and the strategy, the order is a permutation of the waiting
        /// Pods, the budget holds, and the partition holds back exactly.
        #[test]
        fn upgrade_order_is_a_permutation_within_budget(
            zones in proptest::collection::vec(0u8..3, 1..12),
            ready in proptest::collection::vec(proptest::bool::ANY, 12),
            max_unavailable in 1i32..5,
            partition in 0i32..4,
            weighted in proptest::bool::ANY,
        ) {
            let labels: Vec<serde_json::Value> =
                zones.iter().map(|z| json!({"zone": format!("z{z}")})).collect();
            let mut strategy = json!({"maxUnavailable": max_unavailable, "partition": partition,
                "scatterStrategy": [{"key": "zone", "value": "*"}]});
            if weighted {
                strategy["priorityStrategy"] = json!({"weightPriority": [
                    {"weight": 5, "matchSelector": {"matchLabels": {"zone": "z1"}}}]});
            }
            let s = set(strategy);
            let objs = objects(&labels);
            let refs: Vec<&Pod> = objs.iter().collect();
            let states: Vec<PodState> = (0..labels.len())
                .map(|i| PodState { ready: ready[i], ..old() })
                .collect();
            let order = sort_waiting(&s, &refs, (0..labels.len()).collect());
            let mut sorted = order.clone();
            sorted.sort_unstable();
            proptest::prop_assert_eq!(sorted, (0..labels.len()).collect::<Vec<_>>());
            let p = plan(&s, &states, &refs);
            let n = i32::try_from(labels.len()).expect("small");
            proptest::prop_assert!(i32::try_from(p.upgrade.len()).expect("small") <= (n - partition).max(0));
            // No Pod is on the latest revision yet, so only the ready Pods upgraded now count.
            let ready_upgraded = p.upgrade.iter().filter(|&&i| states[i].ready).count();
            let budget = usize::try_from(max_unavailable).expect("positive");
            proptest::prop_assert!(ready_upgraded <= budget, "{} > {}", ready_upgraded, budget);
        }
    }
}
