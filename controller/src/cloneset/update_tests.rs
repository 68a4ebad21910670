use super::*;
use crate::workload::podutil::testpod::*;
use kruise_api::keys;

fn names(pods: &[&Pod], idx: &[usize]) -> Vec<String> {
    idx.iter()
        .map(|&i| podutil::name(pods[i]).to_string())
        .collect()
}

#[test]
fn candidates_skip_updated_predelete_and_grace() {
    let pods = [
        pod("a").rev("cs-new").build(),
        pod("b").rev("cs-old").build(),
        pod("c")
            .rev("cs-old")
            .state(LifecycleStateType::PreparingDelete)
            .build(),
        pod("d")
            .rev("cs-old")
            .annotation(keys::INPLACE_UPDATE_GRACE_ANNOTATION, "{}")
            .build(),
        pod("e")
            .rev("cs-old")
            .state(LifecycleStateType::Updated)
            .build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let (wait, skipped) = candidates(&refs, &PodFacts::all(&refs), "cs-new", false);
    assert_eq!(names(&refs, &wait), vec!["b", "e"]);
    assert_eq!(
        skipped,
        vec![(2, Skip::PreparingDelete), (3, Skip::InGracePeriod)]
    );
}

/// Upstream skips a pod whose grace annotation (new or pre-1.0 key) is present at all, whatever
/// its value; the local copy this replaced let an empty value through.
#[test]
fn any_grace_annotation_skips_the_pod() {
    let pods = [
        pod("a")
            .rev("cs-old")
            .annotation(keys::INPLACE_UPDATE_GRACE_ANNOTATION, "")
            .build(),
        pod("b")
            .rev("cs-old")
            .annotation(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD, "{}")
            .build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let (wait, skipped) = candidates(&refs, &PodFacts::all(&refs), "cs-new", false);
    assert!(wait.is_empty());
    assert_eq!(
        skipped,
        vec![(0, Skip::InGracePeriod), (1, Skip::InGracePeriod)]
    );
}

#[test]
fn not_ready_pods_update_first_and_preparing_update_before_all() {
    let pods = [
        pod("ready").rev("old").running_ready(0).build(),
        pod("pending").rev("old").node("n").build(),
        pod("prep")
            .rev("old")
            .running_ready(0)
            .state(LifecycleStateType::PreparingUpdate)
            .build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let idx = sort_candidates(&refs, vec![0, 1, 2], None, None);
    assert_eq!(names(&refs, &idx), vec!["prep", "pending", "ready"]);
}

#[test]
fn limit_by_max_unavailable() {
    let pods: Vec<Pod> = (0..5)
        .map(|i| pod(&format!("p{i}")).rev("old").running_ready(0).build())
        .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let d = Diffs {
        update_num: 5,
        update_max_unavailable: 1,
        ..Default::default()
    };
    let idx = limit_candidates(
        &PodFacts::all(&refs),
        (0..5).collect(),
        &d,
        "new",
        0,
        ts(100),
    );
    assert_eq!(idx.len(), 1);
}

#[test]
fn unavailable_old_pods_do_not_consume_budget() {
    let mut pods: Vec<Pod> = (0..3)
        .map(|i| pod(&format!("p{i}")).rev("old").running_ready(0).build())
        .collect();
    pods.push(pod("broken").rev("old").node("n").build());
    let refs: Vec<&Pod> = pods.iter().collect();
    let d = Diffs {
        update_num: 4,
        update_max_unavailable: 2,
        ..Default::default()
    };
    // Broken pod first (sorted not-ready first), then one ready pod fits in the budget.
    let idx = limit_candidates(
        &PodFacts::all(&refs),
        vec![3, 0, 1, 2],
        &d,
        "new",
        0,
        ts(100),
    );
    assert_eq!(idx, vec![3, 0]);
}

#[test]
fn stop_when_target_revision_pods_are_unavailable() {
    let pods = [
        pod("n1").rev("new").node("n").build(),
        pod("o1").rev("old").running_ready(0).build(),
        pod("o2").rev("old").running_ready(0).build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let d = Diffs {
        update_num: 2,
        update_max_unavailable: 1,
        ..Default::default()
    };
    // One updated pod is still not available: nothing more may start.
    assert!(limit_candidates(&PodFacts::all(&refs), vec![1, 2], &d, "new", 0, ts(100)).is_empty());
}

/// A rollback (negative update_num) waits on the Pods at the update revision, with the same
/// skips.
#[test]
fn rollback_candidates_are_the_updated_pods() {
    let pods = [
        pod("a").rev("cs-new").build(),
        pod("b").rev("cs-old").build(),
        pod("c")
            .rev("cs-new")
            .state(LifecycleStateType::PreparingDelete)
            .build(),
        pod("d").rev("new").build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let (wait, skipped) = candidates(&refs, &PodFacts::all(&refs), "cs-new", true);
    // "new" is the short-hash form of "cs-new".
    assert_eq!(names(&refs, &wait), vec!["a", "d"]);
    assert_eq!(skipped, vec![(2, Skip::PreparingDelete)]);
}

/// Upstream `TestCalculateUpdateCount`'s rollback case: partition 7 of 8, maxUnavailable 2,
/// the five Pods at the update revision unavailable: two still go back, as the Pods at the
/// target (current) revision are all available.
#[test]
fn rollback_limit_counts_the_target_revision_as_the_current_one() {
    let pods: Vec<Pod> = (0..8)
        .map(|i| {
            let b = pod(&format!("p{i}"));
            if i < 3 {
                b.rev("current").running_ready(0).build()
            } else {
                b.rev("updated").build()
            }
        })
        .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let d = Diffs {
        update_num: -4,
        update_max_unavailable: 2,
        ..Default::default()
    };
    let idx = limit_candidates(
        &PodFacts::all(&refs),
        (3..8).collect(),
        &d,
        "current",
        0,
        ts(100),
    );
    assert_eq!(idx.len(), 2);
}
