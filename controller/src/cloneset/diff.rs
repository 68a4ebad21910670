//! The CloneSet numbers: partition, maxUnavailable, maxSurge, and the scale/update differences
//! between what exists and what the spec asks for (upstream's `calculateDiffsWithExpectation`).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::appspub::LifecycleStateType;
use kruise_api::keys;

use crate::workload::intstr::{NumberError, partition_replicas, scaled_value};
use crate::workload::podfacts::PodFacts;

/// The rolling-update part of a CloneSet strategy, when present.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rolling {
    pub partition: Option<IntOrString>,
    pub max_unavailable: Option<IntOrString>,
    pub max_surge: Option<IntOrString>,
    pub paused: bool,
}

/// Everything the scale and update arithmetic reads from a CloneSet.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    pub replicas: i32,
    pub rolling: Option<Rolling>,
    pub scale_max_unavailable: Option<IntOrString>,
    pub pods_to_delete: Vec<String>,
    pub min_ready_seconds: i32,
    pub exclude_preparing_delete: bool,
    /// Pods also move back to the current revision when more than `replicas - partition` run
    /// the update revision: the `CloneSetPartitionRollback` gate is on and the two revisions
    /// differ (upstream's condition in `calculateDiffsWithExpectation`).
    pub partition_rollback: bool,
}

/// Resolved numbers of a CloneSet for its current replica count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub partition: i32,
    pub max_surge: i32,
    pub max_unavailable: i32,
    pub scale_max_unavailable: i32,
}

impl Settings {
    pub fn limits(&self) -> Limits {
        let replicas = self.replicas;
        let default_unavailable =
            IntOrString::String(keys::DEFAULT_CLONESET_MAX_UNAVAILABLE.into());
        let mut l = Limits::default();
        match &self.rolling {
            Some(r) => {
                // A bad partition is logged by the caller through `partition_error`; it must not
                // block scaling, so it counts as 0 here like upstream.
                l.partition = partition_replicas(r.partition.as_ref(), replicas).unwrap_or(0);
                if let Some(s) = &r.max_surge {
                    l.max_surge = if r.paused {
                        0
                    } else {
                        scaled_value(s, replicas, true).unwrap_or(0)
                    };
                }
                let mu = r.max_unavailable.as_ref().unwrap_or(&default_unavailable);
                l.max_unavailable = scaled_value(mu, replicas, l.max_surge == 0).unwrap_or(0);
            }
            None => {
                l.max_unavailable =
                    scaled_value(&default_unavailable, replicas, false).unwrap_or(0);
            }
        }
        l.scale_max_unavailable = match &self.scale_max_unavailable {
            Some(v) => scaled_value(v, replicas, true).unwrap_or(i32::MAX),
            None => i32::MAX,
        };
        l
    }

    /// The partition error, if the partition cannot be parsed (for an Event).
    pub fn partition_error(&self) -> Option<NumberError> {
        let r = self.rolling.as_ref()?;
        partition_replicas(r.partition.as_ref(), self.replicas).err()
    }

    /// In spec.scaleStrategy.podsToDelete, or labelled for deletion.
    pub fn is_specified_delete(&self, pod: &PodFacts) -> bool {
        pod.marked_for_delete || self.pods_to_delete.iter().any(|n| n == pod.name)
    }
}

/// How far the pods are from the spec. All counts are non-negative except `update_num`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Diffs {
    /// Pods to create.
    pub scale_up_num: i32,
    /// Of those, how many should be at the current (old) revision.
    pub scale_up_num_old_revision: i32,
    /// Pods to delete, not counting pods already marked for deletion.
    pub scale_down_num: i32,
    /// Of those, how many should be at the old revision.
    pub scale_down_num_old_revision: i32,
    /// Most pods that may be created now (scaleStrategy.maxUnavailable).
    pub scale_up_limit: i32,
    /// Most ready pods that may be deleted now (maxUnavailable).
    pub delete_ready_limit: i32,
    /// Pods temporarily above replicas.
    pub use_surge: i32,
    /// Part of `use_surge` at the old revision.
    pub use_surge_old_revision: i32,
    /// Pods to move to the update revision (negative: back to the current revision, only with
    /// [`Settings::partition_rollback`]).
    pub update_num: i32,
    /// Most pods that may be unavailable while updating.
    pub update_max_unavailable: i32,
}

/// Counts of pods by revision and state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub new_total: i32,
    pub new_active: i32,
    pub old_total: i32,
    pub old_active: i32,
    pub new_unavailable: i32,
    pub old_unavailable: i32,
    pub new_to_delete: i32,
    pub old_to_delete: i32,
    pub new_pre_deleting: i32,
    pub old_pre_deleting: i32,
}

/// Counts the pods by revision: total, active, pre-deleting, specified for deletion and
/// unavailable.
fn count_pods(
    settings: &Settings,
    pods: &[PodFacts],
    is_updated: &dyn Fn(&PodFacts) -> bool,
    now: Timestamp,
) -> Counts {
    let mut c = Counts::default();
    for pod in pods {
        let pre_deleting = pod.lifecycle == Some(LifecycleStateType::PreparingDelete);
        let to_delete = !pre_deleting && settings.is_specified_delete(pod);
        let unavailable =
            !pre_deleting && !to_delete && !pod.is_available(settings.min_ready_seconds, now);
        let (total, active, pre, del, unav) = if is_updated(pod) {
            (
                &mut c.new_total,
                &mut c.new_active,
                &mut c.new_pre_deleting,
                &mut c.new_to_delete,
                &mut c.new_unavailable,
            )
        } else {
            (
                &mut c.old_total,
                &mut c.old_active,
                &mut c.old_pre_deleting,
                &mut c.old_to_delete,
                &mut c.old_unavailable,
            )
        };
        *total += 1;
        if pre_deleting {
            *pre += 1;
            continue;
        }
        *active += 1;
        if to_delete {
            *del += 1;
        } else if unavailable {
            *unav += 1;
        }
    }
    c
}

/// How many pods above replicas to use now, and how many of those at the old revision: for
/// pods specified for deletion (their replacements come first) or for an update that moves pods
/// both ways, whichever needs more, within maxSurge.
fn surge(
    l: &Limits,
    c: &Counts,
    update_old_diff: i32,
    update_new_diff: i32,
    total_unavailable: i32,
) -> (i32, i32) {
    let mut scale_surge = 0;
    let mut scale_old_surge = 0;
    let to_delete = c.new_to_delete + c.old_to_delete;
    if to_delete > 0 {
        scale_surge = ((total_unavailable + to_delete) - l.max_unavailable)
            .max(0)
            .min(to_delete);
        if scale_surge > c.new_to_delete {
            scale_old_surge = scale_surge - c.new_to_delete;
        }
    }
    let mut update_surge = 0;
    let mut update_old_surge = 0;
    let opposite = (update_old_diff < 0 && update_new_diff > 0)
        || (update_old_diff > 0 && update_new_diff < 0);
    if opposite {
        if update_old_diff.abs() <= update_new_diff.abs() {
            update_surge = update_old_diff.abs();
            if update_old_diff < 0 {
                update_old_surge = update_surge;
            }
        } else {
            update_surge = update_new_diff.abs();
            if update_new_diff > 0 {
                update_old_surge = update_surge;
            }
        }
    }
    // Scale and update never happen in the same reconcile, so take the bigger need.
    let (need, need_old) = if scale_surge >= update_surge {
        (scale_surge, scale_old_surge)
    } else {
        (update_surge, update_old_surge)
    };
    let use_surge = l.max_surge.min(need);
    (use_surge, use_surge.min(need_old))
}

/// Compute the diffs. `is_updated` says whether a pod counts as the update revision.
pub fn calculate_diffs(
    settings: &Settings,
    pods: &[PodFacts],
    is_updated: &dyn Fn(&PodFacts) -> bool,
    now: Timestamp,
) -> (Diffs, Counts) {
    let replicas = settings.replicas;
    let l = settings.limits();
    let c = count_pods(settings, pods, is_updated, now);

    let mut d = Diffs::default();
    let mut update_old_diff = c.old_active - l.partition;
    let mut update_new_diff = c.new_active - (replicas - l.partition);
    // Without rollback (the gate is off by default upstream) pods only move forward.
    if !settings.partition_rollback {
        update_old_diff = update_old_diff.max(0);
        update_new_diff = update_new_diff.min(0);
    }
    let total_unavailable =
        c.new_pre_deleting + c.old_pre_deleting + c.new_unavailable + c.old_unavailable;

    if l.max_surge > 0 {
        (d.use_surge, d.use_surge_old_revision) =
            surge(&l, &c, update_old_diff, update_new_diff, total_unavailable);
    }

    let pod_count = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    let mut current_total = pod_count;
    let mut current_old = c.old_total;
    if settings.exclude_preparing_delete {
        current_total -= c.old_pre_deleting + c.new_pre_deleting;
        current_old -= c.old_pre_deleting;
    }
    let expected_total = replicas.saturating_add(d.use_surge);
    let expected_old = l.partition + d.use_surge_old_revision;

    let up = expected_total - current_total;
    if up > 0 {
        d.scale_up_num = up;
        d.scale_up_num_old_revision = (expected_old - current_old).max(0);
        d.scale_up_limit = up.min(
            l.scale_max_unavailable
                .saturating_sub(total_unavailable)
                .max(0),
        );
    }

    let down = current_total - c.old_to_delete - c.new_to_delete - expected_total;
    if down > 0 {
        d.scale_down_num = down;
        d.scale_down_num_old_revision = (current_old - c.old_to_delete - expected_old).max(0);
    }
    if c.new_to_delete > 0 || c.old_to_delete > 0 || d.scale_down_num > 0 {
        d.delete_ready_limit =
            (l.max_unavailable + (pod_count - replicas) - total_unavailable).max(0);
    }

    d.update_num = if update_old_diff.abs() <= update_new_diff.abs() {
        update_old_diff
    } else {
        -update_new_diff
    };
    if d.update_num != 0 {
        d.update_max_unavailable = l.max_unavailable + pod_count - replicas;
    }
    (d, c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::podutil::testpod::*;
    use k8s_openapi::api::core::v1::Pod;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.to_string())
    }

    fn settings(replicas: i32, rolling: Option<Rolling>) -> Settings {
        Settings {
            replicas,
            rolling,
            ..Default::default()
        }
    }

    #[test]
    fn max_unavailable_defaults_and_rounding() {
        // No rollingUpdate: 20% rounds down.
        assert_eq!(settings(3, None).limits().max_unavailable, 0);
        assert_eq!(settings(10, None).limits().max_unavailable, 2);
        // rollingUpdate without maxSurge: 20% rounds up.
        assert_eq!(
            settings(3, Some(Rolling::default()))
                .limits()
                .max_unavailable,
            1
        );
        // With maxSurge the default rounds down.
        let r = Rolling {
            max_surge: Some(IntOrString::Int(1)),
            ..Default::default()
        };
        let l = settings(3, Some(r)).limits();
        assert_eq!((l.max_surge, l.max_unavailable), (1, 0));
        // Surge rounds up, and is 0 when paused.
        let r = Rolling {
            max_surge: Some(s("10%")),
            paused: true,
            ..Default::default()
        };
        assert_eq!(settings(3, Some(r)).limits().max_surge, 0);
        let r = Rolling {
            max_surge: Some(s("10%")),
            ..Default::default()
        };
        assert_eq!(settings(3, Some(r)).limits().max_surge, 1);
        assert_eq!(settings(3, None).limits().scale_max_unavailable, i32::MAX);
    }

    fn partitioned(replicas: i32, partition: i32) -> Settings {
        settings(
            replicas,
            Some(Rolling {
                partition: Some(IntOrString::Int(partition)),
                ..Default::default()
            }),
        )
    }

    fn ready(name: &str, rev: &str) -> Pod {
        pod(name).rev(rev).running_ready(0).build()
    }

    /// `n` ready pods `p0`, `p1`... at `rev`.
    fn ready_pods(n: usize, rev: &str) -> Vec<Pod> {
        (0..n).map(|i| ready(&format!("p{i}"), rev)).collect()
    }

    /// Ready pods at revision `r`, the first one held in PreparingDelete.
    fn one_preparing_delete() -> [Pod; 2] {
        [
            pod("a")
                .rev("r")
                .running_ready(0)
                .state(LifecycleStateType::PreparingDelete)
                .build(),
            ready("b", "r"),
        ]
    }

    fn diffs_and_counts(st: &Settings, pods: &[Pod], update: &str) -> (Diffs, Counts) {
        let refs: Vec<&Pod> = pods.iter().collect();
        let facts = PodFacts::all(&refs);
        calculate_diffs(st, &facts, &|p| p.is_at_revision(update), ts(1000))
    }

    fn diffs(st: &Settings, pods: &[Pod], update: &str) -> Diffs {
        diffs_and_counts(st, pods, update).0
    }

    #[test]
    fn scale_up_from_zero() {
        let st = settings(3, Some(Rolling::default()));
        let d = diffs(&st, &[], "cs-new");
        assert_eq!(d.scale_up_num, 3);
        assert_eq!(d.scale_up_num_old_revision, 0);
        assert_eq!(d.scale_up_limit, 3);
        assert_eq!(d.update_num, 0);
    }

    #[test]
    fn scale_up_with_partition_creates_old_revision_pods() {
        let st = partitioned(4, 2);
        let d = diffs(&st, &[], "cs-new");
        assert_eq!(d.scale_up_num, 4);
        assert_eq!(d.scale_up_num_old_revision, 2);
    }

    #[test]
    fn scale_up_limited_by_scale_max_unavailable() {
        let mut st = settings(5, Some(Rolling::default()));
        st.scale_max_unavailable = Some(IntOrString::Int(2));
        let pods = [pod("a").rev("cs-new").build()];
        let d = diffs(&st, &pods, "cs-new");
        assert_eq!(d.scale_up_num, 4);
        // One pod is already unavailable.
        assert_eq!(d.scale_up_limit, 1);
    }

    #[test]
    fn scale_down_prefers_old_revision() {
        let st = settings(2, Some(Rolling::default()));
        let pods = [
            ready("a", "cs-old"),
            ready("b", "cs-new"),
            ready("c", "cs-new"),
        ];
        let d = diffs(&st, &pods, "cs-new");
        assert_eq!(d.scale_down_num, 1);
        assert_eq!(d.scale_down_num_old_revision, 1);
        // 20% of 2 rounds up to 1, plus one extra pod.
        assert_eq!(d.delete_ready_limit, 2);
    }

    #[test]
    fn update_num_respects_partition() {
        let st = partitioned(5, 2);
        let pods = ready_pods(5, "cs-old");
        let d = diffs(&st, &pods, "cs-new");
        assert_eq!(d.update_num, 3);
        assert_eq!(d.update_max_unavailable, 1);
        assert_eq!(d.scale_up_num + d.scale_down_num, 0);
    }

    /// Upstream's "rollback partition=4" steps: 5 replicas, maxUnavailable 2, the partition
    /// raised to 4 while 4 Pods run the update revision.
    #[test]
    fn a_raised_partition_rolls_pods_back_with_the_gate() {
        let mut st = settings(
            5,
            Some(Rolling {
                partition: Some(IntOrString::Int(4)),
                max_unavailable: Some(IntOrString::Int(2)),
                max_surge: Some(IntOrString::Int(0)),
                ..Default::default()
            }),
        );
        st.partition_rollback = true;
        let at = |new: usize| -> Vec<Pod> {
            (0..5)
                .map(|i| ready(&format!("p{i}"), if i < new { "cs-new" } else { "cs-old" }))
                .collect()
        };
        for (new, want) in [(4, -3), (2, -1), (1, 0)] {
            let d = diffs(&st, &at(new), "cs-new");
            assert_eq!(d.update_num, want, "{new} updated");
            assert_eq!(d.update_max_unavailable, if want == 0 { 0 } else { 2 });
            assert_eq!(d.scale_up_num + d.scale_down_num, 0);
        }
        // Upstream's "disable rollback feature-gate" (and the same when both revisions are
        // one, which the caller folds into the flag): nothing moves back.
        st.partition_rollback = false;
        assert_eq!(diffs(&st, &at(4), "cs-new"), Diffs::default());
        // Forward updates are the same with or without the gate.
        st.partition_rollback = true;
        st.rolling.as_mut().expect("rolling").partition = Some(IntOrString::Int(2));
        let d = diffs(&st, &at(1), "cs-new");
        assert_eq!((d.update_num, d.update_max_unavailable), (2, 2));
    }

    #[test]
    fn surge_creates_extra_pods_during_update() {
        let st = settings(
            3,
            Some(Rolling {
                max_surge: Some(IntOrString::Int(1)),
                max_unavailable: Some(IntOrString::Int(0)),
                ..Default::default()
            }),
        );
        let pods = ready_pods(3, "cs-old");
        let d = diffs(&st, &pods, "cs-new");
        assert_eq!(d.update_num, 3);
        // With maxSurge, the surge is used for the update: updateOldDiff=3, updateNewDiff=-3 is
        // "plus and minus", so surge = min(maxSurge, 3) = 1, at the new revision.
        assert_eq!(d.use_surge, 1);
        assert_eq!(d.use_surge_old_revision, 0);
        assert_eq!(d.scale_up_num, 1);
        assert_eq!(d.scale_up_num_old_revision, 0);
    }

    #[test]
    fn specified_delete_is_not_scaled_down_twice() {
        let mut st = settings(3, Some(Rolling::default()));
        st.pods_to_delete = vec!["c".into()];
        let pods = [ready("a", "r"), ready("b", "r"), ready("c", "r")];
        let d = diffs(&st, &pods, "r");
        // Pod c will be deleted and replaced: one to create, none extra to delete.
        assert_eq!(d.scale_up_num, 0);
        assert_eq!(d.scale_down_num, 0);
        assert_eq!(d.delete_ready_limit, 1);
    }

    #[test]
    fn preparing_delete_counts_as_unavailable() {
        let st = settings(2, Some(Rolling::default()));
        let (_, c) = diffs_and_counts(&st, &one_preparing_delete(), "r");
        assert_eq!(c.new_pre_deleting, 1);
        assert_eq!(c.new_active, 1);
    }

    #[test]
    fn exclude_preparing_delete_scales_up_replacement() {
        let mut st = settings(2, Some(Rolling::default()));
        let pods = one_preparing_delete();
        assert_eq!(diffs(&st, &pods, "r").scale_up_num, 0);
        st.exclude_preparing_delete = true;
        assert_eq!(diffs(&st, &pods, "r").scale_up_num, 1);
    }

    proptest::proptest! {
        #[test]
        fn scale_up_plus_existing_reaches_replicas(replicas in 0i32..20, existing in 0usize..20) {
            let st = settings(replicas, Some(Rolling::default()));
            let pods = ready_pods(existing, "r");
            let d = diffs(&st, &pods, "r");
            let n = i32::try_from(existing).expect("small");
            proptest::prop_assert_eq!(n + d.scale_up_num - d.scale_down_num, replicas);
        }
    }
}
