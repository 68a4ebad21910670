use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainerContext,
    ContainerRecreateRequestFailurePolicyType, ContainerRecreateRequestSpec,
};
use kruise_api::keys;
use serde_json::{Value, json};

use super::admit::*;
use super::mutation::{PodLookup, mutate};
use super::validation::validate;
use crate::cluster::ApiCluster;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ContainerStatus, ExecAction, HTTPGetAction, Lifecycle,
    LifecycleHandler, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1beta1::ContainerRecreateRequestContainer;

use crate::review::tests::{response, review_body};
use crate::review::{admit_async, admit_review};

/// Pods by (namespace, name), for handlers under test. Every dry-run Pod create is accepted.
pub(crate) struct StaticPods(pub Vec<Pod>);

impl crate::cloneset::template::PodDryRun for StaticPods {
    async fn dry_run_create(
        &self,
        _namespace: &str,
        _pod: &Value,
    ) -> crate::cloneset::template::DryRun {
        crate::cloneset::template::DryRun::Accepted
    }
}

impl crate::sidecarset::SidecarSetLookup for StaticPods {}
impl crate::podunavailablebudget::PubLookup for StaticPods {}
impl crate::persistentpodstate::PpsLookup for StaticPods {}
impl crate::workloadspread::WsLookup for StaticPods {}
impl crate::podprobemarker::PpmLookup for StaticPods {}
impl crate::statefulset::claims::StorageClassLookup for StaticPods {}
impl crate::configuration::scope::ScopeLookup for StaticPods {}

impl crate::deletionprotection::ProtectionLookup for StaticPods {}

impl PodLookup for StaticPods {
    async fn pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, String> {
        Ok(self
            .0
            .iter()
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && p.metadata.name.as_deref() == Some(name)
            })
            .cloned())
    }
}

/// Pod `default/p` on node n1: container `a` (httpGet preStop on a named port, running),
/// container `b` (exec preStop, not started yet).
pub(crate) fn pod() -> Pod {
    let mut p = Pod {
        spec: Some(PodSpec {
            node_name: Some("n1".into()),
            termination_grace_period_seconds: Some(20),
            containers: vec![
                Container {
                    name: "a".into(),
                    lifecycle: Some(Lifecycle {
                        pre_stop: Some(LifecycleHandler {
                            http_get: Some(HTTPGetAction {
                                port: IntOrString::String("http".into()),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ports: Some(vec![ContainerPort {
                        name: Some("http".into()),
                        container_port: 8080,
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
                Container {
                    name: "b".into(),
                    lifecycle: Some(Lifecycle {
                        pre_stop: Some(LifecycleHandler {
                            exec: Some(ExecAction {
                                command: Some(vec!["sleep".into(), "1".into()]),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![
                ContainerStatus {
                    name: "a".into(),
                    container_id: Some("containerd://a1".into()),
                    restart_count: 2,
                    ..Default::default()
                },
                ContainerStatus {
                    name: "b".into(),
                    container_id: None,
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }),
        ..Default::default()
    };
    p.metadata.uid = Some("pod-uid".into());
    p.metadata.name = Some("p".into());
    p.metadata.namespace = Some("default".into());
    p
}

fn crr(names: &[&str]) -> ContainerRecreateRequest {
    ContainerRecreateRequest::new(
        "r",
        ContainerRecreateRequestSpec {
            pod_name: "p".into(),
            containers: names
                .iter()
                .map(|n| ContainerRecreateRequestContainer {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
    )
}

#[test]
fn fills_labels_strategy_and_context() {
    let c = crr(&["a"]);
    assert!(!is_admitted(&c));
    let out = admit(&c, &pod()).expect("admitted");
    assert!(is_admitted(&out));
    let l = out.metadata.labels.as_ref().expect("labels");
    assert_eq!(l[keys::CRR_ACTIVE_LABEL], "true");
    assert_eq!(l[keys::CRR_NODE_NAME_LABEL], "n1");
    assert_eq!(l[keys::CRR_POD_UID_LABEL], "pod-uid");
    let s = out.spec.strategy.as_ref().expect("strategy");
    assert_eq!(
        s.failure_policy,
        Some(ContainerRecreateRequestFailurePolicyType::Fail)
    );
    assert_eq!(s.termination_grace_period_seconds, Some(20));
    let c0 = &out.spec.containers[0];
    assert_eq!(
        c0.status_context,
        Some(ContainerRecreateRequestContainerContext {
            container_id: "containerd://a1".into(),
            restart_count: 2
        })
    );
    assert!(c0.pre_stop.as_ref().is_some_and(|p| p.http_get.is_some()));
    assert_eq!(c0.ports.len(), 1);
}

#[test]
fn user_strategy_is_kept() {
    let mut c = crr(&["a"]);
    c.spec.strategy = Some(
        kruise_api::apps::v1beta1::ContainerRecreateRequestStrategy {
            failure_policy: Some(ContainerRecreateRequestFailurePolicyType::Ignore),
            termination_grace_period_seconds: Some(3),
            ..Default::default()
        },
    );
    let s = admit(&c, &pod()).expect("admitted").spec.strategy;
    let s = s.expect("strategy");
    assert_eq!(
        s.failure_policy,
        Some(ContainerRecreateRequestFailurePolicyType::Ignore)
    );
    assert_eq!(s.termination_grace_period_seconds, Some(3));
}

#[test]
fn every_problem_is_reported() {
    let mut c = crr(&["a", "a", "x", "b"]);
    c.spec.active_deadline_seconds = Some(1);
    let err = admit(&c, &pod()).expect_err("rejected");
    assert_eq!(
        err.0,
        vec![
            AdmitError::DeadlineTooShort(1),
            AdmitError::Duplicate {
                index: 1,
                name: "a".into()
            },
            AdmitError::NoContainer {
                index: 2,
                name: "x".into(),
                pod: "p".into(),
                available: "a, b".into()
            },
            AdmitError::NoContainerId {
                index: 3,
                name: "b".into(),
                pod: "p".into()
            },
        ]
    );
    let msg = err.to_string();
    assert!(msg.starts_with('['), "{msg}");
    assert!(
        msg.contains(
            "spec.containers[2].name: Not found: container \"x\" not found in Pod \"p\" (its containers: a, b)"
        ),
        "{msg}"
    );
}

#[test]
fn pod_state_rejections() {
    let mut p = pod();
    assert_eq!(
        admit(&crr(&[]), &p).map_err(|e| e.to_string()),
        Err("spec.containers: Required value: containers list can not be empty".into())
    );
    p.spec.as_mut().expect("spec").node_name = None;
    assert_eq!(
        admit(&crr(&["a"]), &p).map_err(|e| e.0),
        Err(vec![AdmitError::PendingPod { pod: "p".into() }])
    );
    p.status.as_mut().expect("status").phase = Some("Failed".into());
    assert_eq!(
        admit(&crr(&["a"]), &p).map_err(|e| e.to_string()),
        Err("Pod \"p\" is not active (phase Failed): not allowed to recreate containers in an inactive Pod".into())
    );
    // A job Pod the SidecarTerminator ended is still open to the request that kills its
    // sidecars (upstream `isTerminatedBySidecarTerminator`), whatever the phase it was given.
    for phase in ["Succeeded", "Failed"] {
        let mut ended = pod();
        let st = ended.status.as_mut().expect("status");
        st.phase = Some(phase.into());
        st.conditions = Some(vec![k8s_openapi::api::core::v1::PodCondition {
            type_: kruise_api::keys::SIDECAR_TERMINATED_CONDITION.into(),
            status: "True".into(),
            ..Default::default()
        }]);
        assert!(admit(&crr(&["a"]), &ended).is_ok(), "{phase}");
    }
    let mut deleting = pod();
    deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert!(
        admit(&crr(&["a"]), &deleting)
            .expect_err("deleting")
            .to_string()
            .contains("being deleted")
    );
    let mut c = crr(&["a"]);
    c.spec.containers[0].ports = vec![ContainerPort::default()];
    assert_eq!(
        admit(&c, &pod()).map_err(|e| e.0),
        Err(vec![AdmitError::ReadOnlyFields {
            index: 0,
            name: "a".into()
        }])
    );
}

fn crr_json(spec: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "ContainerRecreateRequest",
        "metadata": {"name": "r", "namespace": "default", "labels": {"team": "x"}},
        "spec": spec})
}

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(f)
}

fn run_mutate(object: Value, pods: Vec<Pod>) -> Value {
    let body = review_body(
        "CREATE",
        ("apps.kruise.io", "v1beta1", "ContainerRecreateRequest"),
        "containerrecreaterequests",
        Some(object),
        None,
    );
    let pods = StaticPods(pods);
    let out = block_on(admit_async(
        &body,
        |req| async move { mutate(req, &pods).await },
    ));
    response(&out)
}

fn patched(object: &Value, resp: &Value) -> Value {
    // kube-core encodes the patch bytes as a JSON array of numbers.
    let bytes: Vec<u8> = resp["patch"]
        .as_array()
        .expect("a patch")
        .iter()
        .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
        .collect();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("patch JSON");
    let mut obj = object.clone();
    json_patch::patch(&mut obj, &patch).expect("patch applies");
    obj
}

#[test]
fn mutate_patches_the_raw_object_and_keeps_unknown_fields() {
    let obj = crr_json(
        json!({"podName": "p", "containers": [{"name": "a", "x-extra": 1}],
        "strategy": {"orderedRecreate": true}, "x-unknown": "kept"}),
    );
    let resp = run_mutate(obj.clone(), vec![pod()]);
    assert_eq!(resp["allowed"], true, "{resp}");
    let after = patched(&obj, &resp);
    let labels = &after["metadata"]["labels"];
    assert_eq!(labels["team"], "x");
    assert_eq!(labels[keys::CRR_ACTIVE_LABEL], "true");
    assert_eq!(labels[keys::CRR_NODE_NAME_LABEL], "n1");
    assert_eq!(labels[keys::CRR_POD_UID_LABEL], "pod-uid");
    let spec = &after["spec"];
    assert_eq!(spec["x-unknown"], "kept");
    assert_eq!(spec["strategy"]["orderedRecreate"], true);
    assert_eq!(spec["strategy"]["failurePolicy"], "Fail");
    assert_eq!(spec["strategy"]["terminationGracePeriodSeconds"], 20);
    let c = &spec["containers"][0];
    assert_eq!(c["x-extra"], 1);
    assert_eq!(c["statusContext"]["containerID"], "containerd://a1");
    assert_eq!(c["statusContext"]["restartCount"], 2);
    assert_eq!(c["preStop"]["httpGet"]["port"], "http");
    assert_eq!(c["ports"][0]["containerPort"], 8080);
}

#[test]
fn mutate_rejects_with_precise_messages() {
    let cases = [
        (
            json!({"podName": "missing", "containers": [{"name": "a"}]}),
            "spec.podName: Not found: Pod \"missing\" not found in namespace \"default\"",
        ),
        (
            json!({"podName": "p", "containers": [{"name": "nope"}]}),
            "container \"nope\" not found in Pod \"p\" (its containers: a, b)",
        ),
        (
            json!({"podName": "p", "containers": [{"name": "a"}],
                "strategy": {"failurePolicy": "Sometimes"}}),
            "spec.strategy.failurePolicy: Unsupported value: \"Sometimes\"",
        ),
        (
            json!({"containers": [{"name": "a"}]}),
            "spec.podName: Required value",
        ),
        (
            json!({"podName": "p", "containers": [{"name": "a",
                "statusContext": {"containerID": "forged", "restartCount": 0}}]}),
            "spec.containers[0]: Forbidden: preStop, ports and statusContext of container \"a\" are read-only",
        ),
        (
            json!({"podName": "p", "containers": "a"}),
            "spec: invalid type",
        ),
    ];
    for (spec, want) in cases {
        let resp = run_mutate(crr_json(spec.clone()), vec![pod()]);
        assert_eq!(resp["allowed"], false, "{spec}: {resp}");
        let msg = resp["status"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(want), "{spec}: {msg}");
    }
    // Several problems at once are all named.
    let resp = run_mutate(
        crr_json(json!({"podName": "missing", "containers": [], "activeDeadlineSeconds": 0})),
        vec![],
    );
    let msg = resp["status"]["message"].as_str().unwrap_or_default();
    for want in [
        "spec.containers: Required value",
        "spec.activeDeadlineSeconds: Invalid value: 0",
        "Pod \"missing\" not found",
    ] {
        assert!(msg.contains(want), "{msg}");
    }
}

#[test]
fn mutate_without_client_fails_closed_with_reason() {
    let body = review_body(
        "CREATE",
        ("apps.kruise.io", "v1beta1", "ContainerRecreateRequest"),
        "containerrecreaterequests",
        Some(crr_json(
            json!({"podName": "p", "containers": [{"name": "a"}]}),
        )),
        None,
    );
    let pods = ApiCluster {
        client: None,
        timeout: Duration::from_secs(1),
        template_dry_run: true,
        sidecar_sets: None,
        budgets: None,
        persistent_pod_states: None,
        workload_spreads: None,
        pod_probe_markers: None,
        pod_marks: None,
        metrics: Default::default(),
    };
    let out = response(&block_on(admit_async(&body, |req| async move {
        mutate(req, &pods).await
    })));
    assert_eq!(out["allowed"], false);
    assert_eq!(out["status"]["code"], 500);
    let msg = out["status"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("failed to get Pod \"p\""), "{msg}");
}

fn validate_update(old: Value, new: Value) -> Value {
    let body = review_body(
        "UPDATE",
        ("apps.kruise.io", "v1beta1", "ContainerRecreateRequest"),
        "containerrecreaterequests",
        Some(new),
        Some(old),
    );
    serde_json::to_value(admit_review(&body, validate))
        .map(|v| v["response"].clone())
        .expect("review")
}

fn admitted_json() -> Value {
    let a = admit(&crr(&["a"]), &pod()).expect("admitted");
    let mut v = serde_json::to_value(&a).expect("json");
    v["metadata"]["namespace"] = json!("default");
    v
}

#[test]
fn admitted_requests_are_frozen() {
    let old = admitted_json();
    // Label and finalizer changes (the controller's) are fine.
    let mut new = old.clone();
    new["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove(keys::CRR_ACTIVE_LABEL);
    new["metadata"]["finalizers"] = json!([keys::CRR_UNREADY_ACQUIRED_FINALIZER]);
    assert_eq!(validate_update(old.clone(), new)["allowed"], true);

    let mut new = old.clone();
    new["spec"]["activeDeadlineSeconds"] = json!(60);
    new["spec"]["containers"][0]["name"] = json!("b");
    let resp = validate_update(old.clone(), new);
    assert_eq!(resp["allowed"], false);
    assert_eq!(
        resp["status"]["message"],
        "spec: Forbidden: spec of ContainerRecreateRequest is immutable (changed: activeDeadlineSeconds, containers)"
    );

    let mut new = old.clone();
    new["metadata"]["labels"][keys::CRR_NODE_NAME_LABEL] = json!("n2");
    let resp = validate_update(old.clone(), new);
    let msg = resp["status"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("metadata.labels[crr.apps.kruise.io/node-name]: Forbidden: label is immutable (was \"n1\", now \"n2\")"),
        "{msg}"
    );

    let mut old_alpha = old.clone();
    old_alpha["metadata"]["annotations"] =
        json!({keys::CRR_UNREADY_ACQUIRED_FINALIZER: "2026-01-01T00:00:00Z"});
    let mut new = old_alpha.clone();
    new["metadata"]["annotations"] = json!({});
    let resp = validate_update(old_alpha, new);
    assert!(
        resp["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("annotation is immutable once set"),
        "{resp}"
    );
}

#[test]
fn unadmitted_requests_may_be_admitted_by_update() {
    // What the controller does when the webhook was off.
    let old = serde_json::to_value(crr(&["a"])).expect("json");
    let new = admitted_json();
    assert_eq!(validate_update(old.clone(), new)["allowed"], true);
    // ... but the spec's own rules still hold.
    let mut bad = old.clone();
    bad["spec"]["containers"] = json!([]);
    let resp = validate_update(old, bad);
    assert_eq!(resp["allowed"], false);
    assert!(
        resp["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("containers list can not be empty")
    );
}

#[test]
fn validate_create_checks_the_spec() {
    let body = |spec: Value| {
        review_body(
            "CREATE",
            ("apps.kruise.io", "v1alpha1", "ContainerRecreateRequest"),
            "containerrecreaterequests",
            Some(crr_json(spec)),
            None,
        )
    };
    let ok = response(&crate::review::admit(
        &body(json!({"podName": "p", "containers": [{"name": "a"}]})),
        validate,
    ));
    assert_eq!(ok["allowed"], true);
    let bad = response(&crate::review::admit(
        &body(json!({"podName": "p", "containers": [{"name": "a"}],
            "strategy": {"unreadyGracePeriodSeconds": -1}})),
        validate,
    ));
    assert_eq!(
        bad["status"]["message"],
        "spec.strategy.unreadyGracePeriodSeconds: Invalid value: -1: must be a non-negative integer"
    );
}
