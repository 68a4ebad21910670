//! `resourcesPolicy` at injection, after upstream's `sidecarset_resources_test.go` and the
//! stories of its e2e `sidecarset_resources_policy.go`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1beta1::{ResourcesPolicy, SidecarSet};
use serde_json::{Value, json};

use super::inject::{InjectContext, InjectError, inject};
use super::resources::{PolicyError, compute};

fn policy(mode: &str, regex: &str, limits: Value, requests: Value) -> ResourcesPolicy {
    serde_json::from_value(json!({"targetContainersMode": mode,
        "targetContainersNameRegex": regex,
        "resourcesExpr": {"limits": limits, "requests": requests}}))
    .expect("policy")
}

/// A container with `limits` / `requests` as (cpu, memory), `None` for unset lists.
fn c(name: &str, limits: Option<(&str, &str)>, requests: Option<(&str, &str)>) -> Value {
    let list = |l: Option<(&str, &str)>| {
        l.map(|(cpu, mem)| {
            let mut m = serde_json::Map::new();
            if !cpu.is_empty() {
                m.insert("cpu".into(), json!(cpu));
            }
            if !mem.is_empty() {
                m.insert("memory".into(), json!(mem));
            }
            Value::Object(m)
        })
    };
    json!({"name": name, "image": "app:1",
        "resources": {"limits": list(limits), "requests": list(requests)}})
}

fn pod(containers: Vec<Value>, init: Vec<Value>) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns",
        "labels": {"app": "web"}},
        "spec": {"containers": containers, "initContainers": init}}))
    .expect("pod")
}

/// The computed (limits, requests) as `name=value` lists.
fn resources(r: &ResourceRequirements) -> (String, String) {
    let show =
        |l: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
            l.iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.0))
                .collect::<Vec<_>>()
                .join(",")
        };
    (show(&r.limits), show(&r.requests))
}

fn run(p: &ResourcesPolicy, pod: &Pod) -> (String, String) {
    resources(&compute(p, pod, &BTreeSet::new()).expect("compute"))
}

fn half_with_floor() -> ResourcesPolicy {
    policy(
        "sum",
        "^large-engine-v.*$",
        json!({"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"}),
        json!({"cpu": "max(cpu*50%, 50m)", "memory": "100Mi"}),
    )
}

fn two_engines(v5_limits: Option<(&str, &str)>) -> Pod {
    pod(
        vec![
            c(
                "large-engine-v4",
                Some(("200m", "200Mi")),
                Some(("50m", "100Mi")),
            ),
            c("large-engine-v5", v5_limits, Some(("100m", "200Mi"))),
            c("other", Some(("8", "8Gi")), Some(("4", "4Gi"))),
        ],
        vec![],
    )
}

#[test]
fn sum_max_and_regex_follow_upstreams_stories() {
    let p = two_engines(Some(("400m", "400Mi")));
    // Story 2, sum: limits cpu 600m*50%, requests max(150m*50%, 50m).
    assert_eq!(
        run(&half_with_floor(), &p),
        (
            "cpu=300m,memory=200Mi".into(),
            "cpu=75m,memory=100Mi".into()
        )
    );
    // Story 3, max.
    let mut max = half_with_floor();
    max.target_containers_mode = "max".into();
    assert_eq!(
        run(&max, &p),
        (
            "cpu=200m,memory=200Mi".into(),
            "cpu=50m,memory=100Mi".into()
        )
    );
    // Story 1, one container by name.
    let mut one = half_with_floor();
    one.target_containers_name_regex = "^large-engine-v4$".into();
    assert_eq!(
        run(&one, &p),
        (
            "cpu=100m,memory=200Mi".into(),
            "cpu=50m,memory=100Mi".into()
        )
    );
    // The regex is a search, as Go's MatchString: `engine` matches both.
    let mut search = half_with_floor();
    search.target_containers_name_regex = "engine".into();
    assert_eq!(run(&search, &p).0, "cpu=300m,memory=200Mi");
}

#[test]
fn a_target_without_a_limit_makes_the_limit_unlimited() {
    // Story 4: large-engine-v5 has no cpu limit, so the sidecar gets none; memory is kept.
    let p = two_engines(Some(("", "400Mi")));
    let mut max = half_with_floor();
    max.target_containers_mode = "max".into();
    assert_eq!(
        run(&max, &p),
        ("memory=200Mi".into(), "cpu=50m,memory=100Mi".into())
    );
    // No limits at all: no limits list.
    let p = two_engines(None);
    assert_eq!(run(&half_with_floor(), &p).0, "");
}

#[test]
fn missing_requests_count_as_zero() {
    let p = pod(
        vec![
            c("a", Some(("1", "1Gi")), None),
            c("b", Some(("1", "1Gi")), Some(("200m", ""))),
        ],
        vec![],
    );
    let pol = policy(
        "sum",
        ".*",
        json!({"cpu": "cpu*50%"}),
        json!({"cpu": "cpu*50%", "memory": "max(memory*50%, 64Mi)"}),
    );
    assert_eq!(
        run(&pol, &p),
        ("cpu=1".into(), "cpu=100m,memory=64Mi".into())
    );
}

#[test]
fn complex_expressions_and_constants() {
    // Story 5: sum of (200m, 400Mi) and (400m, 600Mi) limits, (100m, 200Mi) and (200m, 300Mi)
    // requests.
    let p = pod(
        vec![
            c("app", Some(("200m", "400Mi")), Some(("100m", "200Mi"))),
            c("worker", Some(("400m", "600Mi")), Some(("200m", "300Mi"))),
        ],
        vec![],
    );
    let pol = policy(
        "sum",
        ".*",
        json!({"cpu": "cpu*50% + 100m", "memory": "max(memory*20% + 100Mi, 200Mi)"}),
        json!({"cpu": "cpu*30% + 50m", "memory": "memory*15% + 50Mi"}),
    );
    assert_eq!(
        run(&pol, &p),
        (
            "cpu=400m,memory=300Mi".into(),
            "cpu=140m,memory=125Mi".into()
        )
    );
    // Plain numbers are cores (upstream reads them so for memory too).
    let pol = policy(
        "max",
        ".*",
        json!({"cpu": "2", "memory": "1Gi"}),
        json!({"cpu": "0.25"}),
    );
    assert_eq!(
        run(&pol, &p),
        ("cpu=2,memory=1Gi".into(), "cpu=250m".into())
    );
}

#[test]
fn native_sidecars_are_targets_and_plain_init_containers_are_not() {
    let mut native = c(
        "app-native",
        Some(("600m", "1200Mi")),
        Some(("300m", "600Mi")),
    );
    native["restartPolicy"] = json!("Always");
    let p = pod(
        vec![c("app", Some(("400m", "800Mi")), Some(("200m", "400Mi")))],
        vec![
            native,
            c("app-init", Some(("8", "8Gi")), Some(("8", "8Gi"))),
        ],
    );
    // Story 6's expressions over app + app-native.
    let pol = policy(
        "sum",
        "^app.*$",
        json!({"cpu": "max(cpu*30%, 50m)", "memory": "max(memory*25%, 100Mi)"}),
        json!({"cpu": "cpu*20%", "memory": "memory*15%"}),
    );
    assert_eq!(
        run(&pol, &p),
        (
            "cpu=300m,memory=500Mi".into(),
            "cpu=100m,memory=150Mi".into()
        )
    );
}

#[test]
fn no_target_and_bad_values_are_errors() {
    let p = two_engines(Some(("400m", "400Mi")));
    let mut none = half_with_floor();
    none.target_containers_name_regex = "^nothing$".into();
    let e = compute(&none, &p, &BTreeSet::new()).expect_err("no target");
    assert!(matches!(e, PolicyError::NoTarget(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "no containers match the regex pattern \"^nothing$\""
    );
    // Kruise sidecars are never targets.
    let kruise = BTreeSet::from(["large-engine-v4".to_owned(), "large-engine-v5".to_owned()]);
    assert!(compute(&half_with_floor(), &p, &kruise).is_err());
    let mut bad = half_with_floor();
    bad.resources_expr.limits =
        Some(serde_json::from_value(json!({"cpu": "cpu * cpu"})).expect("exprs"));
    let e = compute(&bad, &p, &BTreeSet::new()).expect_err("two quantities");
    assert!(
        e.to_string().contains("multiplication of two quantities"),
        "{e}"
    );
}

fn sidecar_set(name: &str, containers: Value, init: Value) -> SidecarSet {
    serde_json::from_value(
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "containers": containers, "initContainers": init}}),
    )
    .expect("set")
}

fn now() -> Time {
    Time(jiff::Timestamp::from_second(1_700_000_000).expect("ts"))
}

#[test]
fn injection_sets_the_sidecars_resources_and_skips_other_sidecars() {
    let policy = json!({"targetContainersMode": "sum", "targetContainersNameRegex": ".*",
        "resourcesExpr": {"limits": {"cpu": "cpu*50%", "memory": "memory*50%"},
                          "requests": {"cpu": "cpu*40%", "memory": "memory*40%"}}});
    let plain = json!({"name": "plain", "image": "b:1",
        "resources": {"limits": {"cpu": "300m", "memory": "300Mi"}}});
    let mut native = json!({"name": "native-sc", "image": "b:1", "restartPolicy": "Always",
        "resources": {"limits": {"cpu": "400m", "memory": "400Mi"}}});
    let sets = vec![
        sidecar_set(
            "a",
            json!([{"name": "sized", "image": "b:1", "resourcesPolicy": policy}]),
            json!([]),
        ),
        sidecar_set("b", json!([plain]), json!([native.take()])),
    ];
    let ctx = InjectContext {
        sidecar_sets: sets.into_iter().map(std::sync::Arc::new).collect(),
        ..Default::default()
    };
    let mut p = pod(
        vec![c("main", Some(("200m", "200Mi")), Some(("100m", "100Mi")))],
        vec![],
    );
    assert!(inject(&mut p, &ctx, &now()).expect("inject"));
    let spec = p.spec.expect("spec");
    let sized = spec
        .containers
        .iter()
        .find(|c| c.name == "sized")
        .expect("sized");
    assert_eq!(
        resources(sized.resources.as_ref().expect("resources")),
        ("cpu=100m,memory=100Mi".into(), "cpu=40m,memory=40Mi".into())
    );
    // The policy's own field is not copied into the Pod.
    let raw = serde_json::to_value(sized).expect("json");
    assert!(raw.get("resourcesPolicy").is_none(), "{raw}");
}

#[test]
fn injection_refuses_the_pod_when_nothing_is_targeted() {
    let policy = json!({"targetContainersMode": "max", "targetContainersNameRegex": "^db$",
        "resourcesExpr": {"requests": {"cpu": "cpu"}}});
    let ctx = InjectContext {
        sidecar_sets: vec![std::sync::Arc::new(sidecar_set(
            "a",
            json!([{"name": "sized", "image": "b:1", "resourcesPolicy": policy}]),
            json!([]),
        ))],
        ..Default::default()
    };
    let mut p = pod(vec![c("main", None, None)], vec![]);
    let e = inject(&mut p, &ctx, &now()).expect_err("no target");
    assert!(matches!(e, InjectError::ResourcesPolicy { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "SidecarSet a container sized: resourcesPolicy: no containers match the regex pattern \"^db$\""
    );
}

#[test]
fn the_gate_sorts_injected_containers_by_name() {
    let sets = vec![std::sync::Arc::new(sidecar_set(
        "a",
        json!([{"name": "zeta", "image": "b:1"}, {"name": "alpha", "image": "b:1"},
               {"name": "mid", "image": "b:1", "podInjectPolicy": "AfterAppContainer"},
               {"name": "beta", "image": "b:1", "podInjectPolicy": "AfterAppContainer"}]),
        json!([]),
    ))];
    let names = |sort: bool| {
        let ctx = InjectContext {
            sidecar_sets: sets.clone(),
            sort_containers_by_name: sort,
            ..Default::default()
        };
        let mut p = pod(vec![c("main", None, None)], vec![]);
        inject(&mut p, &ctx, &now()).expect("inject");
        p.spec
            .expect("spec")
            .containers
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(names(false), "zeta,alpha,main,mid,beta");
    assert_eq!(names(true), "alpha,zeta,main,beta,mid");
}

fn spec_with(container: Value, init: Value) -> kruise_api::apps::v1beta1::SidecarSetSpec {
    sidecar_set("a", json!([container]), init).spec
}

fn violations_of(policy: Value, resources: Value) -> Vec<String> {
    let sc = json!({"name": "sized", "image": "b:1", "resourcesPolicy": policy,
        "resources": resources});
    super::validation::violations(&spec_with(sc, json!([])))
}

#[test]
fn validation_names_the_field_of_each_bad_policy() {
    let good = json!({"targetContainersMode": "sum", "targetContainersNameRegex": ".*",
        "resourcesExpr": {"limits": {"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"},
                          "requests": {"memory": "memory + 10Mi"}}});
    assert_eq!(violations_of(good.clone(), json!({})), Vec::<String>::new());
    let p = "spec.containers[0].resourcesPolicy";
    let with = |path: &str, v: Value| {
        let mut bad = good.clone();
        let mut at = &mut bad;
        let parts: Vec<&str> = path.split('.').collect();
        for k in &parts[..parts.len() - 1] {
            at = &mut at[*k];
        }
        at[parts[parts.len() - 1]] = v;
        violations_of(bad, json!({}))
    };
    assert_eq!(
        with("targetContainersMode", json!("avg")),
        vec![format!(
            "{p}.targetContainersMode: Unsupported value: \"avg\": supported values: \"sum\", \"max\""
        )]
    );
    assert_eq!(
        with("targetContainersNameRegex", json!("")),
        vec![format!(
            "{p}.targetContainersNameRegex: Required value: invalid empty regex"
        )]
    );
    let e = with("targetContainersNameRegex", json!("(app"));
    assert!(
        e[0].starts_with(&format!(
            "{p}.targetContainersNameRegex: Invalid value: \"(app\""
        )),
        "{e:?}"
    );
    let e = with("resourcesExpr.limits.cpu", json!("cpu / 0"));
    assert_eq!(
        e,
        vec![format!(
            "{p}.resourcesExpr.limits.cpu: Invalid value: \"cpu / 0\": invalid expression: division by zero"
        )]
    );
    // The field's own variable only.
    let e = with("resourcesExpr.requests.memory", json!("cpu*50%"));
    assert!(e[0].ends_with("undefined variable: cpu"), "{e:?}");
    // Validated with the variable bound to 1, as upstream: this is negative there.
    let e = with("resourcesExpr.limits.cpu", json!("cpu - 2"));
    assert!(e[0].contains("calculation result is negative"), "{e:?}");
    assert_eq!(
        with("resourcesExpr", json!({})),
        vec![format!(
            "{p}.resourcesExpr: Invalid value: at least one of limits or requests must be configured"
        )]
    );
    assert_eq!(
        violations_of(good.clone(), json!({"limits": {"cpu": "1"}})),
        vec![format!(
            "{p}: Invalid value: resourcesPolicy and resources cannot be configured together"
        )]
    );
    // Among init containers, only native sidecars may carry one.
    let init = |restart: Value| {
        let mut ic = json!({"name": "init", "image": "b:1", "resourcesPolicy": good});
        if !restart.is_null() {
            ic["restartPolicy"] = restart;
        }
        super::validation::violations(&spec_with(
            json!({"name": "c", "image": "b:1"}),
            json!([ic]),
        ))
    };
    assert_eq!(
        init(Value::Null),
        vec!["spec.initContainers[0].resourcesPolicy: Invalid value: resourcesPolicy is only supported for containers with RestartPolicy Always".to_owned()]
    );
    assert_eq!(init(json!("Always")), Vec::<String>::new());
}

fn admission(object: Value) -> crate::review::Request {
    crate::review::Request {
        uid: "u".into(),
        operation: kube::core::admission::Operation::Create,
        group: "apps.kruise.io".into(),
        version: "v1beta1".into(),
        kind: "SidecarSet".into(),
        resource: "sidecarsets".into(),
        sub_resource: None,
        namespace: None,
        name: "a".into(),
        object: Some(object),
        old_object: None,
        options: None,
        dry_run: false,
        username: "tester".to_owned(),
    }
}

#[test]
fn defaulting_fills_an_absent_regex_and_conversion_keeps_the_policy() {
    let raw = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "a"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "containers": [
                {"name": "x", "image": "b:1", "resourcesPolicy": {"targetContainersMode": "sum",
                    "resourcesExpr": {"limits": {"cpu": "cpu"}}}},
                {"name": "y", "image": "b:1", "resourcesPolicy": {"targetContainersMode": "max",
                    "targetContainersNameRegex": "^app$",
                    "resourcesExpr": {"limits": {"cpu": "cpu"}}}}]}});
    let crate::review::Outcome::Patch(patch) = super::defaults::mutate(&admission(raw.clone()))
    else {
        panic!("expected a patch");
    };
    let mut stored = raw;
    json_patch::patch(&mut stored, &patch).expect("patch applies");
    let containers = &stored["spec"]["containers"];
    assert_eq!(
        containers[0]["resourcesPolicy"]["targetContainersNameRegex"],
        ".*"
    );
    assert_eq!(
        containers[1]["resourcesPolicy"]["targetContainersNameRegex"],
        "^app$"
    );
    let alpha = super::conversion::convert(&stored, "apps.kruise.io/v1alpha1").expect("to alpha");
    assert_eq!(
        alpha["spec"]["containers"][1]["resourcesPolicy"],
        stored["spec"]["containers"][1]["resourcesPolicy"]
    );
    let back = super::conversion::convert(&alpha, "apps.kruise.io/v1beta1").expect("back");
    assert_eq!(back["spec"], stored["spec"]);
}
