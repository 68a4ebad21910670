use super::testpod::*;
use super::*;
use crate::workload::podfacts::AVAILABILITY_MARGIN;

#[test]
fn availability_needs_running_ready_and_min_ready() {
    let now = ts(100);
    let p = pod("a").running_ready(90).build();
    assert!(is_update_ready(&p, 0, now));
    assert!(is_update_ready(&p, 5, now));
    assert!(!is_update_ready(&p, 10, now));
    assert!(!is_update_ready(&pod("b").build(), 0, now));
}

#[test]
fn availability_is_strictly_after_min_ready_to_the_subsecond() {
    let t = |ms: i64| Timestamp::from_millisecond(1_700_000_000_000 + ms).expect("ts");
    let p = pod("a").running_ready(90).build();
    assert!(!is_available(&p, 10, t(100_000)), "exactly 10 s: not yet");
    assert!(is_available(&p, 10, t(100_001)), "just past 10 s");
    assert!(is_available(&p, 10, t(100_500)));
}

#[test]
fn available_in_is_the_moment_the_pod_becomes_available() {
    let t = |ms: i64| Timestamp::from_millisecond(1_700_000_000_000 + ms).expect("ts");
    let p = pod("a").running_ready(90).build();
    // Ready at 90 s, minReadySeconds 10: due at 100 s, plus the margin.
    assert_eq!(
        available_in(&p, 10, t(95_300)),
        Some(Duration::from_millis(4_700) + AVAILABILITY_MARGIN)
    );
    assert_eq!(
        available_in(&p, 10, t(100_000)),
        Some(AVAILABILITY_MARGIN),
        "at the exact moment it is not available yet"
    );
    assert_eq!(available_in(&p, 10, t(100_001)), None, "available already");
    // Following the answer lands on an available pod.
    let now = t(93_250);
    let wait = available_in(&p, 10, now).expect("due");
    let later = now
        .checked_add(SignedDuration::try_from(wait).expect("fits"))
        .expect("ts");
    assert!(is_available(&p, 10, later));
    assert_eq!(available_in(&p, 0, now), None, "no minReadySeconds");
}

#[test]
fn available_in_ignores_pods_that_need_more_than_time() {
    let now = ts(95);
    assert_eq!(available_in(&pod("b").build(), 10, now), None, "not ready");
    let held = pod("a")
        .running_ready(90)
        .cond(keys::INPLACE_UPDATE_READY, "False", 0)
        .build();
    assert_eq!(
        available_in(&held, 10, now),
        None,
        "in-place update not ready"
    );
    let updating = pod("a")
        .running_ready(90)
        .state(LifecycleStateType::Updating)
        .build();
    assert_eq!(
        available_in(&updating, 10, now),
        None,
        "lifecycle not Normal"
    );
}

#[test]
fn inplace_update_ready_false_blocks_readiness() {
    let now = ts(100);
    let p = pod("a")
        .running_ready(0)
        .cond(keys::INPLACE_UPDATE_READY, "False", 0)
        .build();
    assert!(!is_update_ready(&p, 0, now));
    let p = pod("a")
        .running_ready(0)
        .cond(keys::INPLACE_UPDATE_READY, "True", 0)
        .build();
    assert!(is_update_ready(&p, 0, now));
}

#[test]
fn lifecycle_other_than_normal_is_unavailable() {
    let now = ts(100);
    let base = || pod("a").running_ready(0);
    assert!(is_available(&base().build(), 0, now));
    assert!(is_available(
        &base().state(LifecycleStateType::Normal).build(),
        0,
        now
    ));
    assert!(!is_available(
        &base().state(LifecycleStateType::PreparingNormal).build(),
        0,
        now
    ));
    assert!(!is_available(
        &base().state(LifecycleStateType::Updating).build(),
        0,
        now
    ));
}

#[test]
fn active_pods_order() {
    let unscheduled = pod("u").build();
    let pending = pod("p").node("n").build();
    let running_notready = pod("r").node("n").phase("Running").build();
    let ready_recent = pod("rr").running_ready(50).build();
    let ready_old = pod("ro").running_ready(10).build();
    let mut v = [
        ready_old.clone(),
        ready_recent.clone(),
        running_notready.clone(),
        pending.clone(),
        unscheduled.clone(),
    ];
    v.sort_by(active_pods_cmp);
    let names: Vec<&str> = v.iter().map(name).collect();
    assert_eq!(names, vec!["u", "p", "r", "rr", "ro"]);
}

#[test]
fn restarts_and_age_break_ties() {
    let a = pod("a").node("n").restarts(5).created(10).build();
    let b = pod("b").node("n").restarts(1).created(10).build();
    assert_eq!(active_pods_cmp(&a, &b), Ordering::Less);
    let newer = pod("n").node("n").created(20).build();
    let older = pod("o").node("n").created(10).build();
    assert_eq!(active_pods_cmp(&newer, &older), Ordering::Less);
    let no_time = pod("z").node("n").build();
    assert_eq!(active_pods_cmp(&no_time, &older), Ordering::Less);
}

#[test]
fn deletion_cost_parsing() {
    assert_eq!(
        deletion_cost(
            &pod("a")
                .annotation(k8s::POD_DELETION_COST_ANNOTATION, "-5")
                .build()
        ),
        -5
    );
    assert_eq!(
        deletion_cost(
            &pod("a")
                .annotation(k8s::POD_DELETION_COST_ANNOTATION, "10")
                .build()
        ),
        10
    );
    assert_eq!(
        deletion_cost(
            &pod("a")
                .annotation(k8s::POD_DELETION_COST_ANNOTATION, "+10")
                .build()
        ),
        0
    );
    assert_eq!(
        deletion_cost(
            &pod("a")
                .annotation(k8s::POD_DELETION_COST_ANNOTATION, "007")
                .build()
        ),
        0
    );
    assert_eq!(deletion_cost(&pod("a").build()), 0);
}

#[test]
fn hooks() {
    let hook = LifecycleHook {
        labels_handler: [("a".to_string(), "1".to_string())].into(),
        finalizers_handler: vec!["f".into()],
        mark_pod_not_ready: false,
    };
    let none = pod("x").build();
    let label_only = pod("x").label("a", "1").build();
    let both = pod("x").label("a", "1").finalizer("f").build();
    assert!(!is_hooked(Some(&hook), &none));
    assert!(is_hooked(Some(&hook), &label_only));
    assert!(!is_all_hooked(Some(&hook), &label_only));
    assert!(is_all_hooked(Some(&hook), &both));
    assert!(!is_all_hooked(None, &both));
    assert!(is_all_hooked(Some(&LifecycleHook::default()), &none));
}
