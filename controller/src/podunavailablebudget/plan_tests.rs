use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::{
    PodUnavailableBudget, PodUnavailableBudgetSpec, PodUnavailableBudgetStatus, TargetReference,
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

fn in_ns(mut b: PodUnavailableBudget, name: &str, ns: &str) -> PodUnavailableBudget {
    b.metadata.name = Some(name.into());
    b.metadata.namespace = Some(ns.into());
    b
}

fn deployment_change(ns: &str, name: &str, app: &str) -> WorkloadChange {
    WorkloadChange {
        namespace: ns.into(),
        target: TargetReference {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            name: name.into(),
        },
        template_labels: BTreeMap::from([("app".into(), app.into())]),
    }
}

#[test]
fn a_workload_change_wakes_the_budgets_selecting_or_targeting_it() {
    let selecting = in_ns(budget(1, None), "selecting", "ns");
    let elsewhere = in_ns(budget(1, None), "elsewhere", "other");
    let mut targeting = in_ns(budget(1, None), "targeting", "ns");
    targeting.spec.selector = None;
    // Another version of the same group names the same workload.
    targeting.spec.target_reference = Some(TargetReference {
        api_version: "apps/v1beta2".into(),
        kind: "Deployment".into(),
        name: "web".into(),
    });
    let mut empty = in_ns(budget(1, None), "empty", "ns");
    empty.spec.selector = Some(LabelSelector::default());
    let all = [selecting, elsewhere, targeting, empty];
    let names = |c: &WorkloadChange| -> Vec<String> {
        workload_budgets(all.iter(), c)
            .iter()
            .map(|b| b.metadata.name.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(
        names(&deployment_change("ns", "web", "web")),
        ["selecting", "targeting"]
    );
    // A budget with a target is matched by it only, never by its labels; an empty selector
    // matches nothing.
    assert_eq!(names(&deployment_change("ns", "api", "web")), ["selecting"]);
    assert!(names(&deployment_change("ns", "api", "api")).is_empty());
    let mut sts = deployment_change("ns", "web", "api");
    sts.target.kind = "StatefulSet".into();
    assert!(names(&sts).is_empty());
}

#[test]
fn only_creation_and_replica_changes_count() {
    assert!(replicas_changed(None, Some(3)), "first seen");
    assert!(replicas_changed(Some(Some(3)), Some(1)), "scaled");
    assert!(!replicas_changed(Some(Some(3)), Some(3)), "other change");
    assert!(!replicas_changed(Some(None), None));
}
