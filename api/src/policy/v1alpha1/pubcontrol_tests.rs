use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::prelude::*;
use serde_json::json;

use super::pubcontrol::*;
use super::{
    PodUnavailableBudget, PodUnavailableBudgetSpec, PodUnavailableBudgetStatus, PubOperation,
    TargetReference,
};
use crate::keys;

fn pod(name: &str, phase: &str, ready: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                image: Some("nginx:1.25".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                image: "nginx:1.25".into(),
                image_id: "docker.io/library/nginx@sha256:aaa".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).expect("in range")
}

fn spec(max: Option<IntOrString>, min: Option<IntOrString>) -> PodUnavailableBudgetSpec {
    PodUnavailableBudgetSpec {
        max_unavailable: max,
        min_available: min,
        ..Default::default()
    }
}

#[test]
fn desired_available_rounds_percentages_up_like_upstream() {
    let pct = |s: &str| Some(IntOrString::String(s.into()));
    // maxUnavailable 25% of 10 = ceil(2.5) = 3 → 7 must stay.
    assert_eq!(desired_available(&spec(pct("25%"), None), 10), Ok(7));
    assert_eq!(
        desired_available(&spec(Some(IntOrString::Int(1)), None), 3),
        Ok(2)
    );
    // More unavailable allowed than Pods: nothing needs to stay.
    assert_eq!(
        desired_available(&spec(Some(IntOrString::Int(5)), None), 3),
        Ok(0)
    );
    // minAvailable 50% of 5 = ceil(2.5) = 3.
    assert_eq!(desired_available(&spec(None, pct("50%")), 5), Ok(3));
    assert_eq!(
        desired_available(&spec(None, Some(IntOrString::Int(2))), 5),
        Ok(2)
    );
    // maxUnavailable wins when both are set, as upstream.
    assert_eq!(
        desired_available(
            &spec(Some(IntOrString::Int(1)), Some(IntOrString::Int(0))),
            4
        ),
        Ok(3)
    );
    assert_eq!(desired_available(&spec(None, None), 4), Ok(0));
    assert!(desired_available(&spec(pct("abc"), None), 4).is_err());
}

#[test]
fn unavailable_allowed_never_negative() {
    assert_eq!(unavailable_allowed(3, 2), 1);
    assert_eq!(unavailable_allowed(1, 2), 0);
}

#[test]
fn ready_means_running_ready_and_no_unavailable_label() {
    assert!(is_pod_ready(&pod("a", "Running", true)));
    assert!(!is_pod_ready(&pod("a", "Running", false)));
    assert!(!is_pod_ready(&pod("a", "Pending", true)));
    let mut p = pod("a", "Running", true);
    p.metadata.labels = Some(BTreeMap::from([(
        format!("{}drain", keys::UNAVAILABLE_POD_LABEL_PREFIX),
        "true".into(),
    )]));
    assert!(!is_pod_ready(&p));
    let mut p = pod("a", "Running", true);
    p.metadata.deletion_timestamp = Some(Time(ts(0)));
    assert!(!is_pod_ready(&p));
}

#[test]
fn mid_in_place_update_is_inconsistent() {
    let mut p = pod("a", "Running", true);
    assert!(is_pod_state_consistent(&p));
    // The spec moved to a new image, the status still runs the recorded imageID.
    if let Some(s) = p.spec.as_mut() {
        s.containers[0].image = Some("nginx:1.26".into());
    }
    let state = r#"{"revision":"r2","updateTimestamp":"2024-01-01T00:00:00Z","lastContainerStatuses":{"main":{"imageID":"docker.io/library/nginx@sha256:aaa"}}}"#;
    p.metadata.annotations = Some(BTreeMap::from([(
        keys::INPLACE_UPDATE_STATE_ANNOTATION.into(),
        state.into(),
    )]));
    assert!(!is_pod_state_consistent(&p));
    // The kubelet restarted it: new imageID and image.
    if let Some(s) = p
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        s[0].image = "nginx:1.26".into();
        s[0].image_id = "docker.io/library/nginx@sha256:bbb".into();
    }
    assert!(is_pod_state_consistent(&p));
    // A new tag of the very same image keeps its imageID: done once the status shows it.
    if let Some(s) = p
        .status
        .as_mut()
        .and_then(|s| s.container_statuses.as_mut())
    {
        s[0].image = "docker.io/library/nginx:1.26".into();
        s[0].image_id = "docker.io/library/nginx@sha256:aaa".into();
    }
    assert!(is_pod_state_consistent(&p));
}

#[test]
fn protected_operations_default_and_annotation() {
    let all = protected_operations(None, true);
    assert_eq!(
        all.into_iter().collect::<Vec<_>>(),
        vec![
            PubOperation::Update,
            PubOperation::Delete,
            PubOperation::Evict
        ]
    );
    let ann = BTreeMap::from([(
        keys::PUB_PROTECT_OPERATIONS_ANNOTATION.to_owned(),
        "EVICT".to_owned(),
    )]);
    assert_eq!(
        protected_operations(Some(&ann), true)
            .into_iter()
            .collect::<Vec<_>>(),
        vec![PubOperation::Evict]
    );
    // Without in-place vertical scaling a resize is an update.
    assert!(protected_operations(None, false).contains(&PubOperation::Resize));
    assert!(!protected_operations(None, true).contains(&PubOperation::Resize));
    assert_eq!(
        invalid_protect_operations("DELETE,evict,,EVICT"),
        vec!["evict", ""]
    );
}

#[test]
fn protect_total_replicas_parses_like_upstream() {
    let ann = |v: &str| {
        BTreeMap::from([(
            keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION.to_owned(),
            v.to_owned(),
        )])
    };
    assert_eq!(protect_total_replicas(None), None);
    assert_eq!(protect_total_replicas(Some(&ann(""))), None);
    assert_eq!(protect_total_replicas(Some(&ann("15"))), Some(15));
    assert_eq!(protect_total_replicas(Some(&ann("x"))), Some(0));
}

#[test]
fn entries_expire_and_vanish_with_their_pods() {
    let a = pod("a", "Running", true);
    let b = pod("b", "Running", true);
    let mut gone = pod("c", "Running", true);
    gone.metadata.deletion_timestamp = Some(Time(ts(0)));
    let status = PodUnavailableBudgetStatus {
        disrupted_pods: BTreeMap::from([
            ("a".into(), Time(ts(0))),
            ("b".into(), Time(ts(-30))),
            ("c".into(), Time(ts(0))),
            ("vanished".into(), Time(ts(0))),
        ]),
        unavailable_pods: BTreeMap::from([("b".into(), Time(ts(-3)))]),
        ..Default::default()
    };
    let e = prune_entries(&status, &[&a, &b, &gone], ts(5));
    assert_eq!(e.disrupted.keys().collect::<Vec<_>>(), vec!["a"]);
    assert_eq!(e.unavailable.keys().collect::<Vec<_>>(), vec!["b"]);
    assert_eq!(e.not_deleted, vec!["b".to_owned()]);
    // b's update entry expires first (−3 s + 10 s), before a's deletion entry (0 + 20 s).
    assert_eq!(e.recheck, Some(ts(7)));
    // Recorded Pods do not count as available.
    assert_eq!(count_available(&[&a, &b, &gone], &e), 0);
    let later = prune_entries(&status, &[&a, &b], ts(25));
    assert!(later.disrupted.is_empty() && later.unavailable.is_empty());
    assert_eq!(count_available(&[&a, &b], &later), 2);
}

fn budget(allowed: i32) -> PodUnavailableBudget {
    let mut p = PodUnavailableBudget::new("pub", Default::default());
    p.status = Some(PodUnavailableBudgetStatus {
        unavailable_allowed: allowed,
        ..Default::default()
    });
    p
}

#[test]
fn charge_records_and_refuses_like_upstream() {
    let mut p = budget(1);
    charge(&mut p, "a", PubOperation::Evict, ts(0)).expect("one allowed");
    let st = p.status.clone().unwrap_or_default();
    assert_eq!(st.unavailable_allowed, 0);
    assert!(is_recorded(&st, "a"));
    let err = charge(&mut p, "b", PubOperation::Delete, ts(1)).expect_err("budget spent");
    assert_eq!(
        err.to_string(),
        r#"podunavailablebudget.policy.kruise.io "pub" is forbidden: pub unavailable allowed is negative"#
    );
    let mut p = budget(2);
    charge(&mut p, "u", PubOperation::Update, ts(0)).expect("allowed");
    let st = p.status.unwrap_or_default();
    assert!(st.unavailable_pods.contains_key("u") && st.disrupted_pods.is_empty());
}

#[test]
fn target_references_compare_by_group_kind_name() {
    let r = |v: &str, k: &str, n: &str| TargetReference {
        api_version: v.into(),
        kind: k.into(),
        name: n.into(),
    };
    assert!(
        r("apps.kruise.io/v1alpha1", "CloneSet", "x").same_workload(&r(
            "apps.kruise.io/v1beta1",
            "CloneSet",
            "x"
        ))
    );
    assert!(!r("apps/v1", "StatefulSet", "x").same_workload(&r(
        "apps.kruise.io/v1beta1",
        "StatefulSet",
        "x"
    )));
    assert!(!r("a/b/c", "CloneSet", "x").same_workload(&r("a/b/c", "CloneSet", "x")));
}

proptest! {
    #[test]
    fn desired_plus_allowed_never_exceed_total(total in 0i32..500, pct in 0i64..=100, current in 0i32..500) {
        let current = current.min(total);
        let d = desired_available(&spec(Some(IntOrString::String(format!("{pct}%"))), None), total).expect("valid");
        prop_assert!(d >= 0 && d <= total);
        let allowed = unavailable_allowed(current, d);
        prop_assert!(allowed >= 0);
        prop_assert!(d + allowed <= total.max(d));
        // Round-up of maxUnavailable means never more available required than with floor.
        let floor = total - (pct * i64::from(total) / 100) as i32;
        prop_assert!(d <= floor);
    }

    #[test]
    fn charging_never_overdraws(allowed in 0i32..5, n in 0usize..10) {
        let mut p = budget(allowed);
        let mut ok = 0;
        for i in 0..n {
            if charge(&mut p, &format!("p{i}"), PubOperation::Delete, ts(0)).is_ok() { ok += 1; }
        }
        prop_assert_eq!(ok, n.min(allowed as usize));
        prop_assert!(p.status.map_or(0, |s| s.unavailable_allowed) >= 0);
    }

    #[test]
    fn pruning_keeps_only_unexpired_entries(ages in proptest::collection::vec(0i64..40, 0..8)) {
        let pods: Vec<Pod> = (0..ages.len()).map(|i| pod(&format!("p{i}"), "Running", true)).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let status = PodUnavailableBudgetStatus {
            disrupted_pods: ages.iter().enumerate().map(|(i, a)| (format!("p{i}"), Time(ts(-a)))).collect(),
            ..Default::default()
        };
        let e = prune_entries(&status, &refs, ts(0));
        for (i, a) in ages.iter().enumerate() {
            prop_assert_eq!(e.disrupted.contains_key(&format!("p{i}")), *a <= 20);
        }
        if let Some(r) = e.recheck { prop_assert!(r >= ts(0)); }
        let _ = SignedDuration::ZERO;
    }
}

#[test]
fn updates_that_change_availability() {
    let old = pod("a", "Running", true);
    let mut label_only = old.clone();
    label_only.metadata.labels = Some(BTreeMap::from([("x".into(), "y".into())]));
    assert!(
        !is_unavailable_changed(&old, &label_only),
        "a label is no disruption"
    );
    let mut marked = old.clone();
    marked.metadata.labels = Some(BTreeMap::from([(
        format!("{}x", keys::UNAVAILABLE_POD_LABEL_PREFIX),
        "y".into(),
    )]));
    assert!(is_unavailable_changed(&old, &marked));
    let mut image = old.clone();
    if let Some(s) = image.spec.as_mut() {
        s.containers[0].image = Some("nginx:2".into());
    }
    assert!(is_unavailable_changed(&old, &image));
    assert!(
        !can_resize_in_place(&old, &image),
        "an image change is not a resize"
    );
}

#[test]
fn cpu_resize_is_in_place_unless_it_restarts() {
    use k8s_openapi::api::core::v1::{ContainerResizePolicy, ResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let with = |cpu: &str, policy: Option<&str>| {
        let mut p = pod("a", "Running", true);
        if let Some(s) = p.spec.as_mut() {
            s.containers[0].resources = Some(ResourceRequirements {
                requests: Some(BTreeMap::from([("cpu".into(), Quantity(cpu.into()))])),
                ..Default::default()
            });
            s.containers[0].resize_policy = policy.map(|p| {
                vec![ContainerResizePolicy {
                    resource_name: "cpu".into(),
                    restart_policy: p.into(),
                }]
            });
        }
        p
    };
    assert!(can_resize_in_place(
        &with("100m", None),
        &with("200m", None)
    ));
    assert!(!can_resize_in_place(
        &with("100m", Some("RestartContainer")),
        &with("200m", Some("RestartContainer"))
    ));
}

#[test]
fn what_costs_a_charge() {
    let mut b = budget(1);
    if let Some(s) = b.status.as_mut() {
        s.desired_available = 2;
    }
    assert!(needs_charge(&b, "a", PubOperation::Update, true));
    // Nothing has to stay available: everything passes.
    let free = budget(1);
    assert!(!needs_charge(&free, "a", PubOperation::Delete, true));
    // Recorded already.
    charge(&mut b, "a", PubOperation::Update, ts(0)).expect("allowed");
    assert!(!needs_charge(&b, "a", PubOperation::Update, true));
    // Not a protected operation.
    b.metadata.annotations = Some(BTreeMap::from([(
        keys::PUB_PROTECT_OPERATIONS_ANNOTATION.to_owned(),
        "EVICT".to_owned(),
    )]));
    assert!(!needs_charge(&b, "z", PubOperation::Delete, true));
    // Exempt Pods.
    assert!(!is_exempt(&pod("a", "Running", true)));
    assert!(is_exempt(&pod("a", "Running", false)));
    let mut p = pod("a", "Running", true);
    p.metadata.annotations = Some(BTreeMap::from([(
        keys::PUB_NO_PROTECT_ANNOTATION.to_owned(),
        "true".to_owned(),
    )]));
    assert!(is_exempt(&p));
}

#[test]
fn the_related_budget_is_the_annotation_when_not_empty() {
    for (annotations, want) in [
        (json!({"kruise.io/related-pub": "web"}), Some("web")),
        (json!({"kruise.io/related-pub": ""}), None),
        (json!({"other": "x"}), None),
        (json!(null), None),
    ] {
        let raw = json!({"metadata": {"name": "p", "annotations": annotations}});
        let pod: Pod = serde_json::from_value(raw).expect("pod");
        assert_eq!(related_budget_name(&pod), want, "{annotations}");
    }
}

/// A Pod whose injected sidecar `proxy` a SidecarSet `mesh` upgraded from `proxy:1` (imageID
/// `old`) to `proxy:2`; the status shows `status_image` with `status_id`.
fn sidecar_upgrading(status_image: &str, status_id: &str) -> Pod {
    let mut p = pod("a", "Running", true);
    p.metadata.annotations = Some(BTreeMap::from([
        (
            keys::SIDECARSET_INJECTED_LIST_ANNOTATION.to_owned(),
            "mesh".to_owned(),
        ),
        (
            keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION.to_owned(),
            json!({"mesh": {"revision": "h2", "updateTimestamp": "2026-01-01T00:00:00Z",
                "lastContainerStatuses": {"proxy": {"imageID": "old"}}}})
            .to_string(),
        ),
    ]));
    let spec = p.spec.as_mut().expect("spec");
    spec.containers.push(Container {
        name: "proxy".into(),
        image: Some("proxy:2".into()),
        env: Some(vec![k8s_openapi::api::core::v1::EnvVar {
            name: keys::ENV_SIDECAR_IS_INJECTED.into(),
            value: Some("true".into()),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let status = p.status.as_mut().expect("status");
    status
        .container_statuses
        .get_or_insert_with(Vec::new)
        .push(ContainerStatus {
            name: "proxy".into(),
            image: status_image.into(),
            image_id: status_id.into(),
            ready: true,
            ..Default::default()
        });
    p
}

#[test]
fn a_sidecar_upgrade_not_yet_restarted_is_inconsistent() {
    assert!(
        !is_pod_state_consistent(&sidecar_upgrading("proxy:1", "old")),
        "the kubelet still runs the old sidecar"
    );
    assert!(!is_pod_available(&sidecar_upgrading("proxy:1", "old")));
    assert!(is_pod_state_consistent(&sidecar_upgrading(
        "proxy:2", "new"
    )));
    // A new tag of the very same image keeps its ID: the status image tells.
    assert!(is_pod_state_consistent(&sidecar_upgrading(
        "docker.io/library/proxy:2",
        "old"
    )));
    // A SidecarSet the Pod does not list is not looked at.
    let mut other = sidecar_upgrading("proxy:1", "old");
    if let Some(a) = other.metadata.annotations.as_mut() {
        a.insert(
            keys::SIDECARSET_INJECTED_LIST_ANNOTATION.to_owned(),
            "other".to_owned(),
        );
    }
    assert!(is_pod_state_consistent(&other));
}

#[test]
fn a_refusal_is_recognised_as_the_api_server_relays_it() {
    let refused = ChargeRefused::NoBudget("web".into()).to_string();
    let relayed = format!("admission webhook \"vpod.kb.io\" denied the request: {refused}");
    assert!(is_charge_refusal(&relayed));
    assert!(is_charge_refusal(
        &ChargeRefused::TooManyEntries("web".into()).to_string()
    ));
    assert!(!is_charge_refusal(
        "pods \"a\" is forbidden: exceeded quota"
    ));
}
