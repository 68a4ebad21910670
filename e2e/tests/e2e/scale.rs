//! CloneSet scaling timing, seen from outside: when the next Pod is created under
//! `scaleStrategy.maxUnavailable` with `minReadySeconds`, scaling that converges when the
//! manager's Pod event subscribers lag, and how often a CloneSet retries creating Pods in a
//! namespace that is being deleted.
//!
//! The lag test reconfigures the manager with the test knob `KRUISE_DEBUG_POD_EVENT_LAG=1` and
//! restores it afterwards ([`kruise_e2e::manager::reconfigure`]), so it runs in the serial phase;
//! the namespace test reads the leading manager's log.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_e2e::cloneset::{self, patch_spec, status_i64};
use kruise_e2e::manager::{self, ManagerConfig};
use kruise_e2e::{TestNamespace, client, wait_for};
use kube::api::{DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

/// A CloneSet of testapp Pods with `extra` merged into its spec.
fn cloneset_with(name: &str, replicas: i32, extra: Value) -> DynamicObject {
    let mut cs = cloneset::new(name, replicas, "v1", json!({})).expect("cloneset");
    if let (Value::Object(spec), Value::Object(extra)) = (&mut cs.data["spec"], extra) {
        for (k, v) in extra {
            spec.insert(k, v);
        }
    }
    cs
}

fn ready_since(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

fn created_at(pod: &Pod) -> Timestamp {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or_default()
}

/// Pods of the CloneSet, terminating ones included, oldest first.
async fn all_pods(pods: &Api<Pod>, name: &str) -> Vec<Pod> {
    let mut list = pods
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .expect("list pods")
        .items;
    list.sort_by_key(created_at);
    list
}

#[tokio::test]
async fn min_ready_seconds_next_pod_is_created_when_the_previous_becomes_available() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-scale-minready")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let cs = cloneset_with(
        "web",
        3,
        json!({"minReadySeconds": 10, "scaleStrategy": {"maxUnavailable": 1}}),
    );
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    cloneset::wait_status(
        &api,
        "web",
        "3 available replicas",
        Duration::from_secs(100),
        |cs| status_i64(cs, "availableReplicas") == 3,
    )
    .await
    .expect("scale-up completes");

    let list = all_pods(&pods, "web").await;
    assert_eq!(list.len(), 3, "one Pod at a time, never more than asked");
    for pair in list.windows(2) {
        let ready = ready_since(&pair[0]).expect("the earlier Pod is Ready");
        let next = created_at(&pair[1]);
        // Both timestamps have whole seconds; the Pod is available once it has been Ready for
        // more than 10 s, so the next one is due 10 s (give or take a second) after `ready`.
        let gap = next.duration_since(ready).as_secs_f64();
        assert!(
            (9.0..=12.0).contains(&gap),
            "{} was created {gap:.1} s after {} became Ready; expected ~10 s (minReadySeconds)",
            pair[1].name_any(),
            pair[0].name_any()
        );
    }
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn serial_scale_down_and_up_converge_when_every_pod_event_is_lost_to_lag() {
    let client = client().await.expect("cluster");
    let lagging = manager::reconfigure(
        &client,
        &ManagerConfig::default().env(kruise_manager::podcache::ENV_DEBUG_POD_EVENT_LAG, "1"),
    )
    .await
    .expect("the manager runs with every Pod event lost to lag");
    let ns = TestNamespace::create(&client, "e2e-scale-lag")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    // A preStop hook keeps deleted Pods terminating for 20 s: a scale-up right after a
    // scale-down shows whether the controller waits for them to be gone.
    let mut cs = cloneset::new("web", 4, "v1", json!({})).expect("cloneset");
    let tpl = &mut cs.data["spec"]["template"]["spec"];
    tpl["terminationGracePeriodSeconds"] = json!(30);
    tpl["containers"][0]["lifecycle"] = json!({"preStop": {"exec": {"command": ["sleep", "20"]}}});
    api.create(&PostParams::default(), &cs)
        .await
        .expect("create");
    // Every creation is observed from the cache alone (no Pod event gets through).
    cloneset::wait_status(
        &api,
        "web",
        "4 ready replicas",
        Duration::from_secs(60),
        |cs| status_i64(cs, "readyReplicas") == 4,
    )
    .await
    .expect("scale-up from 0 completes without Pod events");

    patch_spec(&api, "web", json!({"replicas": 1}))
        .await
        .expect("scale down");
    cloneset::wait_status(&api, "web", "1 replica", Duration::from_secs(20), |cs| {
        status_i64(cs, "replicas") == 1
    })
    .await
    .expect("scale-down");
    let started = Instant::now();
    patch_spec(&api, "web", json!({"replicas": 3}))
        .await
        .expect("scale up");
    let took = wait_for(
        "3 live Pods while the deleted ones still terminate",
        Duration::from_secs(30),
        || async {
            let list = all_pods(&pods, "web").await;
            let live = list
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count();
            let terminating = list.len() - live;
            Ok((live == 3).then_some((started.elapsed(), terminating)))
        },
    )
    .await
    .expect("scale-up after scale-down");
    assert!(
        took.0 < Duration::from_secs(10),
        "the new Pods came {:?} after the scale-up; the deletions should count once the Pods \
         are terminating",
        took.0
    );
    assert!(
        took.1 > 0,
        "the scaled-down Pods were already gone; the test did not exercise graceful deletion"
    );
    cloneset::wait_status(
        &api,
        "web",
        "3 ready replicas",
        Duration::from_secs(60),
        |cs| status_i64(cs, "readyReplicas") == 3 && status_i64(cs, "replicas") == 3,
    )
    .await
    .expect("scale-up completes");
    ns.delete().await.expect("delete ns");
    lagging
        .restore(&client)
        .await
        .expect("the installed manager is back");
}

/// Times of the leading manager's "creating pods" lines for `cloneset` (`ns/name`) written at
/// or after `since`.
async fn creation_attempts(
    client: &kube::Client,
    since: Timestamp,
    cloneset: &str,
) -> Vec<Timestamp> {
    let log = manager::leader_log(client).await.expect("manager log");
    log.lines()
        .filter_map(|l| manager::log_line_matches(l, "creating pods", "cloneset", cloneset))
        .filter(|t| *t >= since)
        .collect()
}

async fn apply_json<K>(api: &Api<K>, obj: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(obj).expect("object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create");
}

#[tokio::test]
async fn pod_creation_backs_off_while_the_namespace_is_deleted() {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-scale-nsdel")
        .await
        .expect("ns");
    let ns_name = ns.name.clone();
    let api = cloneset::api(&client, &ns_name);
    api.create(&PostParams::default(), &cloneset_with("web", 3, json!({})))
        .await
        .expect("create");
    cloneset::wait_status(&api, "web", "3 ready", Duration::from_secs(90), |cs| {
        status_i64(cs, "readyReplicas") == 3
    })
    .await
    .expect("CloneSet ready");

    // Keep the CloneSet and its revisions while the namespace controller deletes the Pods, as
    // happens when the namespace controller reaches Pods first: the CloneSet then wants new Pods
    // that the namespace refuses.
    let policy_name = format!("e2e-keep-{ns_name}");
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    apply_json(
        &policies,
        json!({
            "metadata": {"name": policy_name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [
                    {"apiGroups": ["apps.kruise.io"], "apiVersions": ["*"],
                     "operations": ["DELETE"], "resources": ["clonesets"]},
                    {"apiGroups": ["apps"], "apiVersions": ["*"],
                     "operations": ["DELETE"], "resources": ["controllerrevisions"]}
                ]},
                "validations": [{"expression": "false", "message": "kept by an e2e test"}]
            }
        }),
    )
    .await;
    apply_json(
        &bindings,
        json!({
            "metadata": {"name": policy_name},
            "spec": {
                "policyName": policy_name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {
                    "kubernetes.io/metadata.name": ns_name
                }}}
            }
        }),
    )
    .await;
    let dry_run = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let policy_active = wait_for(
        "the policy to refuse deleting the CloneSet",
        Duration::from_secs(30),
        || async { Ok(api.delete("web", &dry_run).await.is_err().then_some(())) },
    )
    .await;

    let deleted_at = Timestamp::now();
    let outcome = if policy_active.is_ok() {
        ns.delete().await.expect("delete ns");
        // Pods go within a few seconds; then watch what the controller does for a while.
        tokio::time::sleep(Duration::from_secs(20)).await;
        Some(creation_attempts(&client, deleted_at, &format!("{ns_name}/web")).await)
    } else {
        None
    };

    // Let the namespace go, whatever happened above.
    let _ = bindings
        .delete(&policy_name, &DeleteParams::default())
        .await;
    let _ = policies
        .delete(&policy_name, &DeleteParams::default())
        .await;
    policy_active.expect("the admission policy takes effect");
    let attempts = outcome.expect("attempts were counted");

    let offsets: Vec<f64> = attempts
        .iter()
        .map(|t| t.duration_since(deleted_at).as_secs_f64())
        .collect();
    assert!(
        !attempts.is_empty(),
        "the CloneSet never tried to replace its deleted Pods; the test did not exercise the \
         refusal (manager log lines after the deletion: none)"
    );
    let gaps: Vec<f64> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|g| *g >= 0.9) && attempts.len() <= 6,
        "{} Pod creation attempts in 20 s at {offsets:.2?} s after the namespace deletion; \
         expected them spaced out by a backoff (at least ~1 s apart, doubling)",
        attempts.len()
    );
}
