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

#[test]
fn pods_whose_change_is_beyond_images_are_marked_not_upgradable() {
    let beyond = PodState {
        image_only: false,
        ..old()
    };
    let unselected = PodState {
        selected: false,
        ..beyond.clone()
    };
    let updated = PodState {
        updated: true,
        ..beyond.clone()
    };
    let pods = vec![beyond.clone(), old(), unselected, updated];
    let p = run(&set(json!({})), &pods);
    assert_eq!(p.not_upgradable, vec![0]);
    assert_eq!(p.upgrade, vec![1]);
    // Paused and NotUpdate look at no Pod, as upstream returns before the strategy.
    for strategy in [json!({"paused": true}), json!({"type": "NotUpdate"})] {
        assert!(run(&set(strategy), &pods).not_upgradable.is_empty());
    }
}

/// A Pod whose in-place state records `proxy` running image ID `id-1` before its last change;
/// its spec says `spec_image`, the kubelet reports `runs` with `runs_id`.
fn recorded(spec_image: &str, runs: &str, runs_id: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "annotations": {
            keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION:
                json!({"s": {"revision": "h", "updateTimestamp": "2026-01-01T00:00:00Z",
                    "lastContainerStatuses": {"proxy": {"imageID": "id-1"}}}}).to_string()}},
        "spec": {"containers": [{"name": "proxy", "image": spec_image}]},
        "status": {"containerStatuses": [{"name": "proxy", "image": runs, "imageID": runs_id,
            "ready": true, "restartCount": 0, "state": {"running": {}}}]}
    }))
    .expect("pod")
}

#[test]
fn a_recorded_container_is_consistent_once_it_restarted_or_already_runs_its_spec_image() {
    let s = set(json!({}));
    // Changed to e:2 (or emptied), the kubelet still runs the old container: not yet.
    assert!(!is_consistent(&s, &recorded("e:2", "e:1", "id-1")));
    // Restarted: its image ID moved.
    assert!(is_consistent(&s, &recorded("e:2", "e:2", "id-2")));
    // The spec came back to what runs before the kubelet stopped it (a hot upgrade back to the
    // first image): nothing to wait for, as upstream's check sees it.
    assert!(is_consistent(&s, &recorded("e:1", "e:1", "id-1")));
    // The runtime's fully qualified spelling of the same image.
    assert!(is_consistent(
        &s,
        &recorded("e:1", "docker.io/library/e:1", "id-1")
    ));
}
