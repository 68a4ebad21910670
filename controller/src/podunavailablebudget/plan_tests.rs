use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::{
    PodUnavailableBudget, PodUnavailableBudgetSpec, PodUnavailableBudgetStatus,
};

use super::plan::*;

fn ts(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).expect("in range")
}

fn pod(name: &str, ready: bool) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    })
}

fn budget(max: i32, status: Option<PodUnavailableBudgetStatus>) -> PodUnavailableBudget {
    let mut b = PodUnavailableBudget::new(
        "pub",
        PodUnavailableBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                match_expressions: None,
            }),
            max_unavailable: Some(IntOrString::Int(max)),
            ..Default::default()
        },
    );
    b.metadata.generation = Some(2);
    b.status = status;
    b
}

#[test]
fn three_ready_pods_with_max_unavailable_one() {
    let pods = vec![pod("a", true), pod("b", true), pod("c", true)];
    let b = budget(1, None);
    let d = desired(&b, 3).expect("int");
    let plan = plan_status(&b, &pods, 3, d, ts(0));
    let s = &plan.status;
    assert_eq!(
        (
            s.total_replicas,
            s.desired_available,
            s.current_available,
            s.unavailable_allowed
        ),
        (3, 2, 3, 1)
    );
    assert_eq!(s.observed_generation, 2);
    assert!(plan.changed && plan.recheck.is_none());
    // The same status again is no change.
    let again = plan_status(&budget(1, Some(s.clone())), &pods, 3, d, ts(1));
    assert!(!again.changed);
}

#[test]
fn an_evicted_pod_is_not_counted_until_its_entry_expires() {
    let pods = vec![pod("a", true), pod("b", true), pod("c", true)];
    let charged = PodUnavailableBudgetStatus {
        disrupted_pods: BTreeMap::from([("a".into(), Time(ts(0)))]),
        unavailable_allowed: 0,
        current_available: 3,
        desired_available: 2,
        total_replicas: 3,
        observed_generation: 2,
        ..Default::default()
    };
    let plan = plan_status(&budget(1, Some(charged.clone())), &pods, 3, 2, ts(5));
    assert_eq!(plan.status.current_available, 2);
    assert_eq!(plan.status.unavailable_allowed, 0);
    assert_eq!(plan.recheck, Some(ts(20)));
    // 20 s later the Pod is still there: the entry is dropped and an Event reported.
    let plan = plan_status(&budget(1, Some(charged)), &pods, 3, 2, ts(21));
    assert!(plan.status.disrupted_pods.is_empty());
    assert_eq!(plan.not_deleted, vec!["a".to_owned()]);
    assert_eq!(plan.status.unavailable_allowed, 1);
}

#[test]
fn not_ready_and_finished_pods_do_not_count() {
    let mut done = (*pod("d", true)).clone();
    if let Some(s) = done.status.as_mut() {
        s.phase = Some("Succeeded".into());
    }
    let pods = vec![pod("a", true), pod("b", false), Arc::new(done)];
    let sel = budget(1, None).spec.selector.unwrap_or_default();
    assert_eq!(
        select_pods(&pods, &sel).len(),
        2,
        "the finished Pod is not covered"
    );
    let plan = plan_status(&budget(1, None), &select_pods(&pods, &sel), 3, 2, ts(0));
    assert_eq!(plan.status.current_available, 1);
    assert_eq!(plan.status.unavailable_allowed, 0);
}

#[test]
fn annotation_and_total_override() {
    let mut marked = (*pod("m", true)).clone();
    marked.metadata.annotations = Some(BTreeMap::from([(
        keys::PUB_RELATED_ANNOTATION.into(),
        "pub".into(),
    )]));
    let pods = vec![pod("a", true), Arc::new(marked)];
    let names: Vec<_> = pods_to_annotate(&pods)
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, vec!["a".to_owned()]);
    let mut b = budget(1, None);
    assert_eq!(expected_count(&b, 3), 3);
    b.metadata.annotations = Some(BTreeMap::from([(
        keys::PUB_PROTECT_TOTAL_REPLICAS_ANNOTATION.into(),
        "15".into(),
    )]));
    assert_eq!(expected_count(&b, 3), 15);
}

#[test]
fn scale_selectors_parse() {
    let s = parse_selector("app=web,tier in (a, b),!x,y").expect("parses");
    assert_eq!(
        s.match_labels,
        Some(BTreeMap::from([("app".into(), "web".into())]))
    );
    let ops: Vec<_> = s
        .match_expressions
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.key, r.operator))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("tier".into(), "In".into()),
            ("x".into(), "DoesNotExist".into()),
            ("y".into(), "Exists".into())
        ]
    );
    assert!(parse_selector("a in (b").is_none());
}
