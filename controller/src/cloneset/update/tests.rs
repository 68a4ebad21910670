use super::super::podutil::testpod::*;
use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::appspub::{UpdatePriorityOrderTerm, UpdatePriorityWeightTerm};
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
    let (wait, skipped) = candidates(&refs, "cs-new");
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
    let (wait, skipped) = candidates(&refs, "cs-new");
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
fn weight_priority() {
    let pods = [
        pod("a").running_ready(0).label("tier", "low").build(),
        pod("b").running_ready(0).label("tier", "high").build(),
        pod("c").running_ready(0).build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let strategy = UpdatePriorityStrategy {
        weight_priority: vec![
            UpdatePriorityWeightTerm {
                weight: 50,
                match_selector: LabelSelector {
                    match_labels: Some([("tier".to_string(), "high".to_string())].into()),
                    ..Default::default()
                },
            },
            UpdatePriorityWeightTerm {
                weight: 10,
                match_selector: LabelSelector {
                    match_labels: Some([("tier".to_string(), "low".to_string())].into()),
                    ..Default::default()
                },
            },
        ],
        ..Default::default()
    };
    let mut idx = vec![0, 1, 2];
    sort_by_priority(&strategy, &refs, &mut idx);
    assert_eq!(names(&refs, &idx), vec!["b", "a", "c"]);
}

#[test]
fn order_priority() {
    let pods = [
        pod("a").label("order", "sts-2").build(),
        pod("b").label("order", "sts-10").build(),
        pod("c").build(),
        pod("d").label("other", "x-7").build(),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let strategy = UpdatePriorityStrategy {
        order_priority: vec![
            UpdatePriorityOrderTerm {
                ordered_key: "order".into(),
            },
            UpdatePriorityOrderTerm {
                ordered_key: "other".into(),
            },
        ],
        ..Default::default()
    };
    let mut idx = vec![0, 1, 2, 3];
    sort_by_priority(&strategy, &refs, &mut idx);
    // No key first (level -1), then level 0 by descending suffix, then level 1.
    assert_eq!(names(&refs, &idx), vec!["c", "b", "a", "d"]);
}

#[test]
fn lifecycle_refresh_transitions() {
    use LifecycleStateType::*;
    use kruise_api::appspub::LifecycleHook;
    let unscheduled = pod("a").state(PreparingNormal).build();
    assert_eq!(next_lifecycle_state(None, &unscheduled, "new", false), None);
    let scheduled = pod("a").state(PreparingNormal).running_ready(0).build();
    assert_eq!(
        next_lifecycle_state(None, &scheduled, "new", false),
        Some(Normal)
    );

    let updating = pod("a").rev("new").state(Updating).build();
    assert_eq!(next_lifecycle_state(None, &updating, "new", false), None);
    assert_eq!(
        next_lifecycle_state(None, &updating, "new", true),
        Some(Normal)
    );

    let hook = Lifecycle {
        in_place_update: Some(LifecycleHook {
            labels_handler: [("hold".to_string(), "true".to_string())].into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    // The hook label was removed during the update: wait in Updated until it is back.
    assert_eq!(
        next_lifecycle_state(Some(&hook), &updating, "new", true),
        Some(Updated)
    );
    let updated = pod("a").rev("new").state(Updated).build();
    assert_eq!(
        next_lifecycle_state(Some(&hook), &updated, "new", true),
        None
    );
    let rehooked = pod("a")
        .rev("new")
        .state(Updated)
        .label("hold", "true")
        .build();
    assert_eq!(
        next_lifecycle_state(Some(&hook), &rehooked, "new", true),
        Some(Normal)
    );

    // PreparingUpdate only resolves by itself when the pod is already at the update revision
    // (a rollback while waiting for the hook).
    let prep_old = pod("a").rev("old").state(PreparingUpdate).build();
    assert_eq!(next_lifecycle_state(None, &prep_old, "new", false), None);
    let prep_new = pod("a").rev("new").state(PreparingUpdate).build();
    assert_eq!(
        next_lifecycle_state(None, &prep_new, "new", false),
        Some(Normal)
    );
    assert_eq!(
        next_lifecycle_state(None, &pod("a").state(Normal).build(), "new", true),
        None
    );
}

#[test]
fn int_suffixes() {
    assert_eq!(int_suffix("sts-10"), 10);
    assert_eq!(int_suffix("abc"), 0);
    assert_eq!(int_suffix("7"), 7);
    assert_eq!(int_suffix(""), 0);
}

#[test]
fn selector_expressions() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
    let labels: BTreeMap<String, String> = [("a".to_string(), "1".to_string())].into();
    let sel = |op: &str, vals: Option<Vec<&str>>| LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "a".into(),
            operator: op.into(),
            values: vals.map(|v| v.into_iter().map(String::from).collect()),
        }]),
        ..Default::default()
    };
    assert!(selector::matches(&sel("In", Some(vec!["1", "2"])), &labels));
    assert!(!selector::matches(&sel("NotIn", Some(vec!["1"])), &labels));
    assert!(selector::matches(&sel("Exists", None), &labels));
    assert!(!selector::matches(&sel("DoesNotExist", None), &labels));
    assert!(!selector::matches(&sel("Bogus", None), &labels));
}

#[test]
fn scatter_spreads_matching_pods() {
    // Four pods with zone=a and four without: matched pods should not all come first.
    let pods: Vec<Pod> = (0..8)
        .map(|i| {
            let p = pod(&format!("p{i}"));
            if i < 4 {
                p.label("zone", "a").build()
            } else {
                p.build()
            }
        })
        .collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    let terms = vec![UpdateScatterTerm {
        key: "zone".into(),
        value: "a".into(),
    }];
    let idx = scatter(&terms, &refs, (0..8).collect());
    assert_eq!(idx.len(), 8);
    let first_four: usize = idx[..4].iter().filter(|&&i| i < 4).count();
    assert!(
        first_four <= 2,
        "matched pods bunched at the front: {idx:?}"
    );
    assert_eq!(*idx.last().expect("last"), 3);
    let mut sorted = idx.clone();
    sorted.sort();
    assert_eq!(sorted, (0..8).collect::<Vec<_>>());
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
    let idx = limit_candidates(&refs, (0..5).collect(), &d, "new", 0, ts(100));
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
    let idx = limit_candidates(&refs, vec![3, 0, 1, 2], &d, "new", 0, ts(100));
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
    assert!(limit_candidates(&refs, vec![1, 2], &d, "new", 0, ts(100)).is_empty());
}
