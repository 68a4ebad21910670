use kruise_api::apps::v1alpha1::UnitedDeployment;
use serde_json::{Value, json};

use super::defaults::default_united_deployment;
use super::validation::{spec_errors, update_errors};
use crate::field::aggregate;
use crate::review::tests::{response, review_body};

fn ud(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "UnitedDeployment",
        "metadata": {"name": "web", "namespace": "ns"}, "spec": spec})
}

fn good_spec() -> Value {
    json!({
        "replicas": 4,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"cloneSetTemplate": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "nginx"}]}}}}},
        "topology": {"subsets": [{"name": "a"}, {"name": "b", "replicas": "50%"}]},
        "updateStrategy": {"manualUpdate": {"partitions": {"a": 1}}}
    })
}

fn errors_of(spec: Value) -> String {
    let u: UnitedDeployment = serde_json::from_value(ud(spec)).expect("decodes");
    aggregate(&spec_errors(&u.spec))
}

/// `spec` with the value at `pointer` set (objects along the way made as needed).
fn with(mut spec: Value, pointer: &str, v: Value) -> Value {
    let mut cur = &mut spec;
    for k in pointer.trim_start_matches('/').split('/') {
        cur = match k.parse::<usize>() {
            Ok(i) => &mut cur[i],
            Err(_) => &mut cur[k],
        };
    }
    *cur = v;
    spec
}

#[test]
fn a_good_spec_passes_and_defaults_as_upstream() {
    assert_eq!(errors_of(good_spec()), "");
    let mut u = ud(good_spec());
    default_united_deployment(&mut u, true);
    assert_eq!(u["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(u["spec"]["updateStrategy"]["type"], "Manual");
    let mut u =
        ud(json!({"topology": {"subsets": [{"name": "a", "maxReplicas": 2}, {"name": "b"}]}}));
    default_united_deployment(&mut u, true);
    assert_eq!(u["spec"]["topology"]["subsets"][1]["minReplicas"], 0);
    assert_eq!(u["spec"]["updateStrategy"]["manualUpdate"], json!({}));
}

#[test]
fn refusals_name_the_field() {
    let cases: Vec<(Value, &str)> = vec![
        (
            with(good_spec(), "/topology/subsets/1/name", json!("a")),
            "spec.topology.subsets[1].name: Invalid value: \"a\": duplicated subset name a",
        ),
        (
            with(good_spec(), "/topology/subsets/1/name", json!("B_1")),
            "spec.topology.subsets[1].name: Invalid value: \"B_1\": invalid subset name",
        ),
        (
            with(
                good_spec(),
                "/selector",
                json!({"matchLabels": {"app": "other"}}),
            ),
            "spec.template.cloneSetTemplate.metadata.labels: Invalid value",
        ),
        (
            with(
                good_spec(),
                "/template/deploymentTemplate",
                json!({"spec": {}}),
            ),
            "spec.template: Invalid value: [\"cloneSetTemplate\",\"deploymentTemplate\"]: should provide only one of",
        ),
        (
            with(good_spec(), "/template", json!({})),
            "spec.template: Required value: should provide one of",
        ),
        (
            with(
                good_spec(),
                "/updateStrategy/manualUpdate/partitions",
                json!({"zz": 1}),
            ),
            "spec.updateStrategy.manualUpdate.partitions: Invalid value: {\"zz\":1}: subset zz does not exist",
        ),
        (
            with(good_spec(), "/topology/subsets/1/replicas", json!(5)),
            "sum of indicated subset replicas 5 should not be greater than UnitedDeployment replicas 4",
        ),
        (
            with(good_spec(), "/topology/subsets/1/replicas", json!("150%")),
            "spec.topology.subsets[1].replicas: Invalid value: \"150%\": subset replicas (150%) should be in range [0, 100]",
        ),
        (
            with(good_spec(), "/topology/subsets/0/maxReplicas", json!(1)),
            "mutually exclusive",
        ),
        (
            with(
                good_spec(),
                "/topology/scheduleStrategy",
                json!({"type": "Spread"}),
            ),
            "spec.topology.scheduleStrategy.type: Unsupported value: \"Spread\"",
        ),
        (
            with(good_spec(), "/replicas", json!(-1)),
            "spec.replicas: Invalid value: -1",
        ),
        (
            with(
                good_spec(),
                "/topology/subsets/0",
                json!({"name": "a", "nodeSelectorTerm": {"matchExpressions": [{"key": "k", "operator": "Near"}]}}),
            ),
            "spec.topology.subsets[0].nodeSelectorTerm.matchExpressions[0].operator: Unsupported value: \"Near\"",
        ),
    ];
    for (spec, want) in cases {
        let got = errors_of(spec);
        assert!(got.contains(want), "want {want:?} in {got:?}");
    }
    // Elastic rules.
    let elastic = |subsets: Value, replicas: Value| {
        let s = with(
            with(good_spec(), "/topology/subsets", subsets),
            "/replicas",
            replicas,
        );
        errors_of(with(s, "/updateStrategy", json!({})))
    };
    let got = elastic(
        json!([{"name": "a", "maxReplicas": 1}, {"name": "b", "maxReplicas": 2}]),
        json!(3),
    );
    assert!(
        got.contains("at least one subset.maxReplicas must be empty"),
        "{got}"
    );
    let got = elastic(
        json!([{"name": "a", "minReplicas": 3, "maxReplicas": 2}, {"name": "b"}]),
        json!(3),
    );
    assert!(
        got.contains("spec.topology.subsets[0].minReplicas"),
        "{got}"
    );
    let got = elastic(
        json!([{"name": "a", "minReplicas": 1}, {"name": "b"}]),
        Value::Null,
    );
    assert!(got.contains("spec.replicas: Required value"), "{got}");
}

/// The Adaptive strategy: min/max bounds only, as upstream; reserving unschedulable Pods only
/// for stateless templates; no negative durations (beyond upstream).
#[test]
fn adaptive_is_accepted_with_its_rules() {
    let adaptive = |strategy: Value| {
        let s = with(
            good_spec(),
            "/topology/subsets",
            json!([{"name": "a", "maxReplicas": 2}, {"name": "b"}]),
        );
        let s = with(s, "/topology/scheduleStrategy", strategy);
        with(s, "/updateStrategy", json!({}))
    };
    let ok = adaptive(json!({"type": "Adaptive", "adaptive": {
        "rescheduleCriticalSeconds": 10, "unschedulableDuration": 60,
        "reserveUnschedulablePods": true}}));
    assert_eq!(errors_of(ok.clone()), "");
    assert_eq!(errors_of(adaptive(json!({"type": "Adaptive"}))), "");
    let cases: Vec<(Value, &str)> = vec![
        (
            with(
                adaptive(json!({"type": "Adaptive"})),
                "/topology/subsets/1/replicas",
                json!(1),
            ),
            "spec.topology.subsets[1].replicas: Forbidden: specify replicas use minReplicas/maxReplicas to enable adaptive strategy",
        ),
        (
            adaptive(json!({"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": -1}})),
            "spec.topology.scheduleStrategy.adaptive.rescheduleCriticalSeconds: Invalid value: -1",
        ),
        (
            adaptive(json!({"type": "Adaptive", "adaptive": {"unschedulableDuration": -5}})),
            "spec.topology.scheduleStrategy.adaptive.unschedulableDuration: Invalid value: -5",
        ),
        (
            with(
                with(ok.clone(), "/template", json!({})),
                "/template/statefulSetTemplate",
                json!({"metadata": {"labels": {"app": "web"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}),
            ),
            "spec.topology.scheduleStrategy.adaptive.reserveUnschedulablePods: Invalid value: true: only stateless workloads",
        ),
    ];
    for (spec, want) in cases {
        let got = errors_of(spec);
        assert!(got.contains(want), "want {want:?} in {got:?}");
    }
    // Fixed ignores the Adaptive parameters, as upstream.
    let fixed = with(
        good_spec(),
        "/topology/scheduleStrategy",
        json!({"type": "Fixed", "adaptive": {"rescheduleCriticalSeconds": -1}}),
    );
    assert_eq!(errors_of(fixed), "");
}

#[test]
fn placement_may_not_change_in_an_update() {
    let old: UnitedDeployment = serde_json::from_value(ud(good_spec())).expect("decodes");
    let spec = with(
        good_spec(),
        "/topology/subsets/0",
        json!({"name": "a", "tolerations": [{"key": "k", "operator": "Exists"}]}),
    );
    let new: UnitedDeployment = serde_json::from_value(ud(spec)).expect("decodes");
    let got = aggregate(&update_errors(&new.spec, &old.spec));
    assert_eq!(
        got,
        "spec.topology.subsets[0].tolerations: Forbidden: may not be changed in an update"
    );
}

#[test]
fn the_handlers_answer_through_the_review() {
    let gvk = ("apps.kruise.io", "v1alpha1", "UnitedDeployment");
    let bad = ud(with(good_spec(), "/topology/subsets/1/name", json!("a")));
    let body = review_body("CREATE", gvk, "uniteddeployments", Some(bad), None);
    let out = response(
        &crate::handle_admission(crate::paths::VALIDATE_UNITEDDEPLOYMENT, &body).expect("routed"),
    );
    assert_eq!(out["allowed"], false);
    let body = review_body(
        "CREATE",
        gvk,
        "uniteddeployments",
        Some(ud(good_spec())),
        None,
    );
    let out = response(
        &crate::handle_admission(crate::paths::MUTATE_UNITEDDEPLOYMENT, &body).expect("routed"),
    );
    assert_eq!(out["allowed"], true);
    // The patch comes back as bytes (a JSON array here).
    assert!(
        out["patch"].as_array().is_some_and(|b| !b.is_empty()),
        "{out}"
    );
}

/// A UnitedDeployment holds whole Pod templates; the handler must not need a large stack to
/// decode one (a debug build's frames once overflowed a worker thread on an update).
#[test]
fn an_update_is_validated_within_a_small_stack() {
    let gvk = ("apps.kruise.io", "v1alpha1", "UnitedDeployment");
    let body = review_body(
        "UPDATE",
        gvk,
        "uniteddeployments",
        Some(ud(good_spec())),
        Some(ud(good_spec())),
    );
    let out = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            crate::handle_admission(crate::paths::VALIDATE_UNITEDDEPLOYMENT, &body)
                .map(|b| response(&b))
        })
        .expect("thread")
        .join()
        .expect("no overflow");
    assert_eq!(out.expect("routed")["allowed"], true);
}

/// The CloneSet template is a v1alpha1 CloneSet spec, its strategies checked by that
/// version's rules and reported at the template's path.
#[test]
fn the_cloneset_template_is_a_v1alpha1_cloneset_spec() {
    let release = with(
        good_spec(),
        "/template/cloneSetTemplate/spec/updateStrategy",
        json!({"type": "InPlaceIfPossible", "partition": 1, "maxUnavailable": 1, "paused": false,
            "inPlaceUpdateStrategy": {"gracePeriodSeconds": 3}}),
    );
    let release = with(
        release,
        "/template/cloneSetTemplate/spec/scaleStrategy",
        json!({"disablePVCReuse": true}),
    );
    assert_eq!(errors_of(release.clone()), "");
    let bad = with(
        release.clone(),
        "/template/cloneSetTemplate/spec/updateStrategy/maxUnavailable",
        json!("150%"),
    );
    assert!(
        errors_of(bad)
            .contains("spec.template.cloneSetTemplate.spec.updateStrategy.maxUnavailable"),
        "the template's own path"
    );
    let surge = with(
        with(
            release.clone(),
            "/template/cloneSetTemplate/spec/updateStrategy/type",
            json!("InPlaceOnly"),
        ),
        "/template/cloneSetTemplate/spec/updateStrategy/maxSurge",
        json!(1),
    );
    assert!(
        errors_of(surge).contains("can not use maxSurge with strategy type InPlaceOnly"),
        "v1alpha1's rule, by v1alpha1's name"
    );
    let dup = with(
        release,
        "/template/cloneSetTemplate/spec/scaleStrategy/podsToDelete",
        json!(["p", "p"]),
    );
    assert!(
        errors_of(dup).contains("spec.template.cloneSetTemplate.spec.scaleStrategy.podsToDelete")
    );
    // v1beta1's type, kept by an object an earlier build stored (the CRD refuses it in a
    // write), reads as unset rather than failing to decode.
    let beta = with(
        good_spec(),
        "/template/cloneSetTemplate/spec/updateStrategy",
        json!({"type": "RollingUpdate"}),
    );
    let u: UnitedDeployment = serde_json::from_value(ud(beta)).expect("decodes");
    let t = u.spec.template.clone_set_template.expect("template");
    assert_eq!(t.spec.update_strategy.type_, None);
}
