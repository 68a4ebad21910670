//! SidecarSet `resourcesPolicy` (OpenKruise v1.9) end to end: the injected sidecar's cpu/memory
//! are computed from the Pod's target containers (sum or max, percentages, a target without a
//! limit leaves the limit unset), read back as a user reads them (`kubectl get pod -o json`);
//! a bad policy is refused naming its field; and, with the gate
//! `EnableSortSidecarContainerByName`, injected containers come in name order.
//!
//! The Pods are only admitted, never waited for: what is asserted is their stored spec.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::features::Gate;
use kruise_e2e::manager;
use kruise_e2e::sidecarset::{self as sc, Guard};
use kruise_e2e::{TestNamespace, client, image, repo_root, wait_for};
use kube::api::PostParams;
use serde_json::{Value, json};

fn kubectl() -> PathBuf {
    if let Some(k) = std::env::var_os("KUBECTL") {
        return PathBuf::from(k);
    }
    let local = repo_root().join(".cluster/bin/kubectl");
    if local.is_file() {
        local
    } else {
        PathBuf::from("kubectl")
    }
}

/// Runs kubectl with `args`, `stdin` fed to it.
fn run_kubectl(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(kubectl())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    child.wait_with_output().expect("kubectl output")
}

/// The Pod as `kubectl get pod -o json` prints it.
fn kubectl_pod(ns: &str, name: &str) -> Value {
    let out = run_kubectl(&["get", "pod", "-n", ns, name, "-o", "json"], None);
    assert!(
        out.status.success(),
        "kubectl get pod: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("pod json")
}

/// `resources` of a container of the printed Pod.
fn resources_of(pod: &Value, container: &str) -> Value {
    pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == container)
        .map(|c| c["resources"].clone())
        .unwrap_or_else(|| panic!("no container {container} in {pod}"))
}

/// A container with (cpu, memory) limits and requests; an empty value is left out.
fn app(name: &str, limits: (&str, &str), requests: (&str, &str)) -> Value {
    let list = |(cpu, mem): (&str, &str)| {
        let mut m = serde_json::Map::new();
        if !cpu.is_empty() {
            m.insert("cpu".into(), json!(cpu));
        }
        if !mem.is_empty() {
            m.insert("memory".into(), json!(mem));
        }
        Value::Object(m)
    };
    json!({"name": name, "image": image("testapp", "v1"),
        "resources": {"limits": list(limits), "requests": list(requests)}})
}

async fn create_pod(ns: &TestNamespace, name: &str, containers: Vec<Value>) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "engine"}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": containers}
    }))
    .expect("pod");
    let pods = ns.api::<Pod>();
    // The webhook reads SidecarSets from its watch cache, which learns of a new one a moment
    // after the API server answered (upstream's e2e sleeps for it): a dry run through admission
    // shows when the sidecars would be injected.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let own = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    wait_for(
        "the Pod webhook to know the SidecarSet",
        Duration::from_secs(30),
        || async {
            let answer = pods.create(&dry, &pod).await?;
            let n = answer.spec.as_ref().map_or(0, |s| s.containers.len());
            Ok((n > own).then_some(()))
        },
    )
    .await
    .expect("the webhook's cache");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create pod");
}

/// A sidecar sized by a policy over the `engine-*` containers.
fn sized(name: &str, mode: &str, limits: Value, requests: Value) -> Value {
    json!({"name": name, "image": image("sidecar", "v1"),
        "resourcesPolicy": {"targetContainersMode": mode,
            "targetContainersNameRegex": "^engine-",
            "resourcesExpr": {"limits": limits, "requests": requests}}})
}

fn half_with_floor(mode: &str, name: &str) -> Value {
    sized(
        name,
        mode,
        json!({"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"}),
        json!({"cpu": "max(cpu*50%, 50m)", "memory": "memory*50%"}),
    )
}

/// Two sidecars, one summing and one taking the max of two engines (the third container is
/// not a target): limits cpu 600m/400m × 50%, requests 150m/100m × 50% floored at 50m,
/// memory requests 300Mi/200Mi × 50%.
#[tokio::test]
async fn resources_policy_sizes_the_sidecar_by_sum_and_by_max() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-res-sum")
        .await
        .expect("ns");
    let set = sc::new(
        &format!("{}-set", ns.name),
        &ns.name,
        "engine",
        json!({"containers": [half_with_floor("sum", "by-sum"), half_with_floor("max", "by-max")]}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set).await.expect("create set");
    create_pod(
        &ns,
        "p",
        vec![
            app("engine-a", ("200m", "200Mi"), ("50m", "100Mi")),
            app("engine-b", ("400m", "400Mi"), ("100m", "200Mi")),
            app("other", ("2", "2Gi"), ("1", "1Gi")),
        ],
    )
    .await;
    let pod = kubectl_pod(&ns.name, "p");
    assert_eq!(
        resources_of(&pod, "by-sum"),
        json!({"limits": {"cpu": "300m", "memory": "200Mi"},
               "requests": {"cpu": "75m", "memory": "150Mi"}})
    );
    assert_eq!(
        resources_of(&pod, "by-max"),
        json!({"limits": {"cpu": "200m", "memory": "200Mi"},
               "requests": {"cpu": "50m", "memory": "100Mi"}})
    );
    // The Pod's own containers are left as they were.
    assert_eq!(
        resources_of(&pod, "other"),
        json!({"limits": {"cpu": "2", "memory": "2Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}})
    );
    guard.delete().await.expect("delete set");
    ns.delete().await.expect("delete ns");
}

/// A target without a cpu limit makes the aggregate unlimited: the sidecar gets no cpu limit,
/// while its memory limit and its requests are still computed (the API server has defaulted
/// the engines' missing memory requests to their limits, 400Mi and 256Mi, before the webhook).
#[tokio::test]
async fn resources_policy_leaves_the_limit_unset_when_a_target_is_unlimited() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-res-unl")
        .await
        .expect("ns");
    let policy = sized(
        "sized",
        "max",
        json!({"cpu": "cpu*50%", "memory": "memory*50%"}),
        json!({"cpu": "cpu*50%", "memory": "max(memory*50%, 64Mi)"}),
    );
    let set = sc::new(
        &format!("{}-set", ns.name),
        &ns.name,
        "engine",
        json!({"containers": [policy]}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set).await.expect("create set");
    create_pod(
        &ns,
        "p",
        vec![
            app("engine-a", ("400m", "400Mi"), ("200m", "")),
            app("engine-b", ("", "256Mi"), ("100m", "")),
        ],
    )
    .await;
    let pod = kubectl_pod(&ns.name, "p");
    assert_eq!(
        resources_of(&pod, "sized"),
        json!({"limits": {"memory": "200Mi"},
               "requests": {"cpu": "100m", "memory": "200Mi"}})
    );
    guard.delete().await.expect("delete set");
    ns.delete().await.expect("delete ns");
}

/// A bad policy is refused at `kubectl apply`, the message naming the field; a Pod the policy
/// targets nothing in is refused at creation, naming the SidecarSet and the regex.
#[tokio::test]
async fn resources_policy_refuses_a_bad_policy_and_a_pod_without_targets() {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, "sc-res-bad")
        .await
        .expect("ns");
    let name = format!("{}-set", ns.name);
    for (policy, field) in [
        (
            json!({"targetContainersMode": "avg",
                "resourcesExpr": {"limits": {"cpu": "cpu"}}}),
            "spec.containers[0].resourcesPolicy.targetContainersMode",
        ),
        (
            json!({"targetContainersMode": "sum",
                "resourcesExpr": {"requests": {"memory": "memory / 0"}}}),
            "spec.containers[0].resourcesPolicy.resourcesExpr.requests.memory",
        ),
        (
            json!({"targetContainersMode": "sum", "targetContainersNameRegex": "(engine",
                "resourcesExpr": {"limits": {"cpu": "cpu"}}}),
            "spec.containers[0].resourcesPolicy.targetContainersNameRegex",
        ),
    ] {
        let set = sc::new(
            &name,
            &ns.name,
            "engine",
            json!({"containers": [{"name": "sized", "image": image("sidecar", "v1"),
                "resourcesPolicy": policy}]}),
        )
        .expect("set");
        let yaml = serde_json::to_string(&set).expect("json");
        let out = run_kubectl(&["apply", "-f", "-"], Some(&yaml));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{field}: accepted: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(stderr.contains(field), "{field}: {stderr}");
    }
    // A valid policy whose regex matches none of the Pod's containers.
    let set = sc::new(
        &name,
        &ns.name,
        "engine",
        json!({"containers": [sized("sized", "sum", json!({"cpu": "cpu"}), json!({}))]}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set).await.expect("create set");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "labels": {"app": "engine"}},
        "spec": {"containers": [app("web", ("1", "1Gi"), ("1", "1Gi"))]}
    }))
    .expect("pod");
    let err = ns
        .api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .expect_err("a Pod without targets is refused");
    let msg = err.to_string();
    assert!(
        msg.contains(&name)
            && msg.contains("resourcesPolicy")
            && msg.contains("no containers match the regex pattern"),
        "{msg}"
    );
    guard.delete().await.expect("delete set");
    ns.delete().await.expect("delete ns");
}

/// The order a Pod's containers come in once the four sidecars of [`sort_case`]'s SidecarSet
/// (`zeta`, `alpha` before the Pod's own `main`; `omega`, `beta` after it) are injected.
async fn sort_case(prefix: &str) -> Vec<String> {
    let client = client().await.expect("client");
    let ns = TestNamespace::create(&client, prefix).await.expect("ns");
    let set = sc::new(
        &format!("{}-set", ns.name),
        &ns.name,
        "engine",
        json!({"containers": [
            {"name": "zeta", "image": image("sidecar", "v1")},
            {"name": "alpha", "image": image("sidecar", "v1")},
            {"name": "omega", "image": image("sidecar", "v1"), "podInjectPolicy": "AfterAppContainer"},
            {"name": "beta", "image": image("sidecar", "v1"), "podInjectPolicy": "AfterAppContainer"}]}),
    )
    .expect("set");
    let (guard, _) = Guard::create(&client, &set).await.expect("create set");
    create_pod(
        &ns,
        "web",
        vec![app("main", ("100m", "64Mi"), ("100m", "64Mi"))],
    )
    .await;
    let names = kubectl_pod(&ns.name, "web")["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect();
    guard.delete().await.expect("delete set");
    ns.delete().await.expect("delete ns");
    names
}

/// `EnableSortSidecarContainerByName` off (upstream's default, as shipped): the sidecars come in
/// the SidecarSet's order, on each side of the Pod's own.
#[tokio::test]
async fn sidecarset_injects_in_its_own_order_by_default() {
    assert_eq!(
        sort_case("sc-order").await,
        ["zeta", "alpha", "main", "omega", "beta"]
    );
}

/// With `EnableSortSidecarContainerByName` on (off by default, as upstream: a gated-phase test)
/// the injected containers come in name order, on each side of the Pod's own.
#[tokio::test]
async fn gated_sidecarset_sorts_injected_containers_with_the_gate() {
    let client = client().await.expect("client");
    manager::require_gates(&client, &[Gate::EnableSortSidecarContainerByName])
        .await
        .expect("the gated phase's manager");
    assert_eq!(
        sort_case("sc-sort").await,
        ["alpha", "zeta", "main", "beta", "omega"]
    );
}
