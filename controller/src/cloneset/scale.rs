//! Scale decisions (upstream `cloneset_scale.go`): which pods to delete, which pods leave
//! PreparingDelete, which instance ids new pods get.

use std::collections::{BTreeSet, HashMap};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{Lifecycle, LifecycleStateType};
use rand::Rng;

use super::diff::Settings;
use crate::workload::podfacts::PodFacts;
use crate::workload::podutil;

/// Whether `pod` counts as the update revision when the CloneSet scales (upstream
/// `revision.IsPodUpdate`): at the update revision, or, with `preparing_update_as_update` (the
/// `PreparingUpdateAsUpdate` gate), held in PreparingUpdate by a lifecycle hook on its way
/// there. Counting such a pod as old makes the scale-up after an old pod's deletion create the
/// replacement at the update revision, so once the held pods finish more pods than the
/// partition allows may run it; upstream accepts that by default. Updates and scale-in choices
/// always split pods by their revision label.
pub fn counts_as_updated(
    pod: &PodFacts,
    update_revision: &str,
    preparing_update_as_update: bool,
) -> bool {
    (preparing_update_as_update && pod.lifecycle == Some(LifecycleStateType::PreparingUpdate))
        || pod.is_at_revision(update_revision)
}

/// Length of the random instance id in pod names (`{cs}-{id}`).
pub const INSTANCE_ID_LEN: usize = 5;

/// Pods asked to be deleted and pods already in PreparingDelete.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlannedDeletes {
    pub specified: Vec<usize>,
    pub pre_delete: Vec<usize>,
    /// Distinct pods in either list.
    pub count: i32,
}

pub fn planned_deletes(settings: &Settings, pods: &[PodFacts]) -> PlannedDeletes {
    let mut out = PlannedDeletes::default();
    for (i, pod) in pods.iter().enumerate() {
        let specified = settings.is_specified_delete(pod);
        let pre = pod.lifecycle == Some(LifecycleStateType::PreparingDelete);
        if specified {
            out.specified.push(i);
        }
        if pre {
            out.pre_delete.push(i);
        }
        if specified || pre {
            out.count += 1;
        }
    }
    out
}

/// Pods in PreparingDelete that can go back to PreparingNormal because replicas grew again.
/// Never when a hook marks pods not-ready: that transition could lose the Updated hook.
pub fn pre_deletes_to_cancel(
    settings: &Settings,
    lifecycle: Option<&Lifecycle>,
    pods: &[PodFacts],
    planned: &PlannedDeletes,
) -> Vec<usize> {
    let marks_not_ready = lifecycle.is_some_and(|l| {
        l.pre_delete.as_ref().is_some_and(|h| h.mark_pod_not_ready)
            || l.in_place_update
                .as_ref()
                .is_some_and(|h| h.mark_pod_not_ready)
    });
    if marks_not_ready {
        return Vec::new();
    }
    let pod_count = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    let mut room = settings.replicas - pod_count + planned.count;
    let mut out = Vec::new();
    for &i in &planned.pre_delete {
        if room <= 0 {
            break;
        }
        if settings.is_specified_delete(&pods[i]) {
            continue;
        }
        out.push(i);
        room -= 1;
    }
    out
}

/// Keep not-ready pods, and ready ones while `ready_limit` lasts (it is decremented).
pub fn limit_ready_deletes(
    pods: &[PodFacts],
    chosen: &[usize],
    ready_limit: &mut i32,
    now: Timestamp,
) -> Vec<usize> {
    let mut out = Vec::new();
    for &i in chosen {
        if !pods[i].is_available(0, now) {
            out.push(i);
        } else if *ready_limit > 0 {
            out.push(i);
            *ready_limit -= 1;
        }
    }
    out
}

/// Rank per pod index: pods sharing a node with others get a rank so that the node's least
/// valuable pods go first; the most valuable pod on each node keeps rank 0.
fn same_node_ranks(pods: &[&Pod], idx: &[usize]) -> HashMap<usize, f64> {
    let mut by_node: HashMap<&str, Vec<usize>> = HashMap::new();
    for &i in idx {
        let n = podutil::node_name(pods[i]);
        if !n.is_empty() {
            by_node.entry(n).or_default().push(i);
        }
    }
    let mut ranks = HashMap::new();
    for (_, mut on_node) in by_node {
        if on_node.len() <= 1 {
            continue;
        }
        on_node.sort_by(|&a, &b| podutil::ranked_cmp(pods[a], pods[b], None, None));
        on_node.pop();
        let n = on_node.len();
        for (k, i) in on_node.into_iter().enumerate() {
            ranks.insert(i, (n - k) as f64);
        }
    }
    ranks
}

fn choose_from(
    pods: &[&Pod],
    mut idx: Vec<usize>,
    n: usize,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Vec<usize> {
    if n < idx.len() {
        let ranks = same_node_ranks(pods, &idx);
        let rank = |i: usize| ranks.get(&i).copied().unwrap_or(0.0);
        let avail = |p: &Pod| podutil::is_available(p, min_ready_seconds, now);
        idx.sort_by(|&a, &b| {
            podutil::ranked_cmp(pods[a], pods[b], Some(&avail), Some((rank(a), rank(b))))
        });
    }
    idx.truncate(n);
    idx
}

/// Choose `total` pods to scale in, `old_diff` of them from pods not at the update revision.
pub fn choose_pods_to_delete(
    pods: &[&Pod],
    total: i32,
    old_diff: i32,
    not_updated: Vec<usize>,
    updated: Vec<usize>,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Vec<usize> {
    let total_n = usize::try_from(total.max(0)).unwrap_or(0);
    let old_n = usize::try_from(old_diff.max(0)).unwrap_or(0);
    if old_diff >= total {
        choose_from(pods, not_updated, total_n, min_ready_seconds, now)
    } else if old_diff > 0 {
        let mut out = choose_from(pods, not_updated, old_n, min_ready_seconds, now);
        out.extend(choose_from(
            pods,
            updated,
            total_n - old_n,
            min_ready_seconds,
            now,
        ));
        out
    } else {
        choose_from(pods, updated, total_n, min_ready_seconds, now)
    }
}

/// A random instance id: lowercase consonants and digits, like Kubernetes' `rand.String`.
pub fn random_id(rng: &mut impl Rng) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..INSTANCE_ID_LEN)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Ids for `num` new pods: ids of PVCs whose pod is gone are reused first (so the new pod gets
/// its volumes back), then fresh random ids that no pod or PVC uses.
pub fn available_ids(
    num: usize,
    pod_ids: &BTreeSet<String>,
    pvc_ids: &BTreeSet<String>,
    rng: &mut impl Rng,
) -> Vec<String> {
    let mut existing: BTreeSet<String> = pod_ids.union(pvc_ids).cloned().collect();
    let mut out: Vec<String> = pvc_ids.difference(pod_ids).take(num).cloned().collect();
    while out.len() < num {
        let id = random_id(rng);
        if existing.insert(id.clone()) {
            out.push(id);
        }
    }
    out
}

/// What to do with owned PVCs when PVCs are not reused: keep those of active pods, hand those of
/// finished pods over to the pod (so they go when it goes), delete the rest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PvcCleanup {
    pub keep: Vec<usize>,
    /// (pvc index, index into the inactive pods)
    pub reown: Vec<(usize, usize)>,
    pub delete: Vec<usize>,
}

pub fn plan_pvc_cleanup(
    pvc_ids: &[Option<&str>],
    active_ids: &BTreeSet<&str>,
    inactive_ids: &[Option<&str>],
) -> PvcCleanup {
    let mut out = PvcCleanup::default();
    for (i, id) in pvc_ids.iter().enumerate() {
        let id = id.unwrap_or_default();
        if active_ids.contains(id) {
            out.keep.push(i);
        } else if let Some(p) = inactive_ids
            .iter()
            .position(|x| !id.is_empty() && *x == Some(id))
        {
            out.reown.push((i, p));
        } else {
            out.delete.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::diff::Rolling;
    use super::*;
    use crate::workload::podutil::testpod::*;
    use kruise_api::appspub::LifecycleHook;
    use kruise_api::keys;

    /// Partition 2 of 4, an inPlaceUpdate hook holding the two pods chosen for the update in
    /// PreparingUpdate (still labelled with the old revision); then an old pod that was not
    /// chosen is deleted. With `PreparingUpdateAsUpdate` the replacement is at the current
    /// revision, so that two pods stay there as the partition asks; without it (upstream's
    /// default) the held pods count as old and the replacement takes the update revision.
    #[test]
    fn replacement_of_an_old_pod_next_to_held_pods_follows_the_gate() {
        use super::super::diff::calculate_diffs;
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        let settings = Settings {
            replicas: 4,
            rolling: Some(Rolling {
                partition: Some(IntOrString::Int(2)),
                max_unavailable: Some(IntOrString::Int(2)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let held = |n: &str| {
            pod(n)
                .rev("cs-old")
                .running_ready(0)
                .state(LifecycleStateType::PreparingUpdate)
                .build()
        };
        let normal = |n: &str| {
            pod(n)
                .rev("cs-old")
                .running_ready(0)
                .state(LifecycleStateType::Normal)
                .build()
        };
        // cs-d was deleted: three pods left.
        let pods = [held("cs-a"), held("cs-b"), normal("cs-c")];
        let refs: Vec<&Pod> = pods.iter().collect();
        let facts = PodFacts::all(&refs);
        let (d, _) = calculate_diffs(
            &settings,
            &facts,
            &|p| counts_as_updated(p, "cs-new", true),
            ts(1000),
        );
        assert_eq!(d.scale_up_num, 1);
        assert_eq!(
            d.scale_up_num_old_revision, 1,
            "gate on: the new pod is created at the current revision"
        );
        let (d, _) = calculate_diffs(
            &settings,
            &facts,
            &|p| counts_as_updated(p, "cs-new", false),
            ts(1000),
        );
        assert_eq!(d.scale_up_num, 1);
        assert_eq!(
            d.scale_up_num_old_revision, 0,
            "gate off: held pods count by their label, the new pod takes the update revision"
        );
    }

    #[test]
    fn held_pods_count_as_updated_only_under_the_gate() {
        use LifecycleStateType::*;
        let at = |rev: &str, state: LifecycleStateType| pod("p").rev(rev).state(state).build();
        // (revision, state, counted with the gate off, counted with it on)
        let cases = [
            ("cs-new", Normal, true, true),
            ("cs-old", PreparingUpdate, false, true),
            ("cs-old", Normal, false, false),
            ("cs-old", Updating, false, false),
            ("cs-old", PreparingDelete, false, false),
        ];
        for (rev, state, off, on) in cases {
            let p = at(rev, state);
            assert_eq!(
                counts_as_updated(&PodFacts::of(&p), "cs-new", false),
                off,
                "{rev} {state:?} gate off"
            );
            assert_eq!(
                counts_as_updated(&PodFacts::of(&p), "cs-new", true),
                on,
                "{rev} {state:?} gate on"
            );
        }
    }

    fn st(replicas: i32) -> Settings {
        Settings {
            replicas,
            rolling: Some(Rolling::default()),
            ..Default::default()
        }
    }

    #[test]
    fn planned_deletes_counts_distinct() {
        let mut s = st(3);
        s.pods_to_delete = vec!["b".into()];
        let pods = [
            pod("a")
                .label(keys::SPECIFIED_DELETE_LABEL, "true")
                .state(LifecycleStateType::PreparingDelete)
                .build(),
            pod("b").build(),
            pod("c").build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let facts = PodFacts::all(&refs);
        let p = planned_deletes(&s, &facts);
        assert_eq!(p.specified, vec![0, 1]);
        assert_eq!(p.pre_delete, vec![0]);
        assert_eq!(p.count, 2);
    }

    #[test]
    fn cancel_pre_delete_when_replicas_grow() {
        let s = st(3);
        let pods = [
            pod("a").state(LifecycleStateType::PreparingDelete).build(),
            pod("b").build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let facts = PodFacts::all(&refs);
        let p = planned_deletes(&s, &facts);
        assert_eq!(pre_deletes_to_cancel(&s, None, &facts, &p), vec![0]);
        assert!(pre_deletes_to_cancel(&st(1), None, &facts, &p).is_empty());
        let lc = Lifecycle {
            pre_delete: Some(LifecycleHook {
                mark_pod_not_ready: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(pre_deletes_to_cancel(&s, Some(&lc), &facts, &p).is_empty());
    }

    #[test]
    fn ready_limit_applies_only_to_ready_pods() {
        let pods = [
            pod("nr").build(),
            pod("r1").running_ready(0).build(),
            pod("r2").running_ready(0).build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let mut limit = 1;
        assert_eq!(
            limit_ready_deletes(&PodFacts::all(&refs), &[0, 1, 2], &mut limit, ts(10)),
            vec![0, 1]
        );
        assert_eq!(limit, 0);
    }

    #[test]
    fn scale_in_deletes_least_valuable_old_pods_first() {
        let pods = [
            pod("new-ready").rev("new").running_ready(0).build(),
            pod("old-ready").rev("old").running_ready(0).build(),
            pod("old-pending").rev("old").node("n2").build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let out = choose_pods_to_delete(&refs, 1, 1, vec![1, 2], vec![0], 0, ts(10));
        assert_eq!(out, vec![2]);
        let out = choose_pods_to_delete(&refs, 2, 1, vec![1, 2], vec![0], 0, ts(10));
        assert_eq!(out, vec![2, 0]);
        let out = choose_pods_to_delete(&refs, 1, 0, vec![1, 2], vec![0], 0, ts(10));
        assert_eq!(out, vec![0]);
    }

    #[test]
    fn scale_in_prefers_crowded_nodes() {
        let pods = [
            pod("alone").running_ready(0).node("n1").created(1).build(),
            pod("shared1")
                .running_ready(0)
                .node("n2")
                .created(1)
                .build(),
            pod("shared2")
                .running_ready(0)
                .node("n2")
                .created(1)
                .build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let out = choose_pods_to_delete(&refs, 1, 0, vec![], vec![0, 1, 2], 0, ts(10));
        assert_ne!(out, vec![0]);
    }

    #[test]
    fn deletion_cost_is_honoured() {
        let pods = [
            pod("cheap")
                .running_ready(0)
                .node("n1")
                .annotation(kruise_api::keys::k8s::POD_DELETION_COST_ANNOTATION, "-10")
                .build(),
            pod("dear")
                .running_ready(0)
                .node("n2")
                .annotation(kruise_api::keys::k8s::POD_DELETION_COST_ANNOTATION, "100")
                .build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(
            choose_pods_to_delete(&refs, 1, 0, vec![], vec![1, 0], 0, ts(10)),
            vec![0]
        );
    }

    #[test]
    fn pvc_cleanup() {
        let active: BTreeSet<&str> = ["a"].into();
        let plan = plan_pvc_cleanup(
            &[Some("a"), Some("b"), Some("c"), None],
            &active,
            &[Some("b")],
        );
        assert_eq!(plan.keep, vec![0]);
        assert_eq!(plan.reown, vec![(1, 0)]);
        assert_eq!(plan.delete, vec![2, 3]);
    }

    #[test]
    fn ids_reuse_free_pvcs_then_random() {
        let pods: BTreeSet<String> = ["aaaaa".to_string()].into();
        let pvcs: BTreeSet<String> = ["aaaaa".to_string(), "bbbbb".to_string()].into();
        let mut rng = rand::rng();
        let ids = available_ids(3, &pods, &pvcs, &mut rng);
        assert_eq!(ids.len(), 3);
        assert_eq!(ids[0], "bbbbb");
        assert!(!ids.contains(&"aaaaa".to_string()));
        let unique: BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), 3);
        assert!(ids.iter().all(|i| i.len() == INSTANCE_ID_LEN));
    }
}
