use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{PersistentPodState, PpsWorkloadWhiteList};
use kruise_api::keys;
use kube::core::admission::Operation;
use serde_json::{Value, json};

use super::PpsLookup;
use super::validation::validate;
use crate::pod::persistent_pod_state::{inject, injection_for};
use crate::pod::{PodContext, mutate_with};
use crate::review::{Outcome, Request};

#[derive(Default)]
struct States {
    items: Vec<PersistentPodState>,
    reads: AtomicUsize,
    whitelist: PpsWorkloadWhiteList,
    whitelist_reads: AtomicUsize,
}

impl PpsLookup for States {
    async fn persistent_pod_states(&self, _ns: &str) -> Result<Vec<PersistentPodState>, String> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.items.clone())
    }

    async fn pps_whitelist(&self) -> Result<PpsWorkloadWhiteList, String> {
        self.whitelist_reads.fetch_add(1, Ordering::SeqCst);
        Ok(self.whitelist.clone())
    }
}

/// `PPS_Watch_Custom_Workload_WhiteList` listing `game.kruise.io` GameServerSet.
fn game_whitelist() -> PpsWorkloadWhiteList {
    let data = std::collections::BTreeMap::from([(
        keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY.to_owned(),
        r#"{"workloads": [{"Group": "game.kruise.io", "Version": "v1alpha1", "Kind": "GameServerSet"}]}"#
            .to_owned(),
    )]);
    PpsWorkloadWhiteList::from_configuration(&data).expect("whitelist")
}

fn request(op: Operation, object: Value, old: Option<Value>) -> Request {
    Request {
        uid: "u".into(),
        operation: op,
        group: keys::APPS_GROUP.into(),
        version: "v1alpha1".into(),
        kind: keys::PPS_KIND.into(),
        resource: "persistentpodstates".into(),
        sub_resource: None,
        namespace: Some("ns".into()),
        name: "pps".into(),
        object: Some(object),
        old_object: old,
        options: None,
        dry_run: false,
        username: "tester".to_owned(),
    }
}

fn pps(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1",
        "kind": "PersistentPodState",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
    })
}

fn good_spec() -> Value {
    json!({
        "targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "web"},
        "requiredPersistentTopology": {"nodeTopologyKeys": ["kubernetes.io/hostname"]},
        "preferredPersistentTopology": [
            {"weight": 50, "preference": {"nodeTopologyKeys": ["topology.kubernetes.io/zone"]}}
        ],
    })
}

fn typed(v: Value) -> PersistentPodState {
    serde_json::from_value(v).expect("a PersistentPodState")
}

async fn refusal_with(object: Value, others: Vec<PersistentPodState>) -> String {
    let states = States {
        items: others,
        ..Default::default()
    };
    match validate(request(Operation::Create, object, None), &states).await {
        Outcome::Deny { code, message, .. } => {
            assert_eq!(code, 400, "upstream answers 400: {message}");
            message
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn refusal(spec: Value) -> String {
    refusal_with(pps("pps", spec), Vec::new()).await
}

#[tokio::test]
async fn a_valid_state_passes() {
    let out = validate(
        request(Operation::Create, pps("pps", good_spec()), None),
        &States::default(),
    )
    .await;
    assert_eq!(out, Outcome::Allow);
}

#[tokio::test]
async fn each_bad_field_is_refused_by_its_path() {
    let mut s = good_spec();
    s["targetRef"] = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    assert!(refusal(s).await.contains("spec.targetRef: Invalid value"));

    let mut s = good_spec();
    s["targetRef"]["name"] = json!("");
    assert!(refusal(s).await.contains("empty TargetReference"));

    let s = json!({"targetRef": good_spec()["targetRef"]});
    let m = refusal(s).await;
    assert!(m.contains("cannot be empty at the same time"), "{m}");

    let mut s = good_spec();
    s["preferredPersistentTopology"][0]["weight"] = json!(0);
    let m = refusal(s).await;
    assert!(
        m.contains("spec.preferredPersistentTopology[0].weight: Invalid value: 0"),
        "{m}"
    );

    let mut s = good_spec();
    s["requiredPersistentTopology"]["nodeTopologyKeys"] = json!([]);
    let m = refusal(s).await;
    assert!(
        m.contains("spec.requiredPersistentTopology.nodeTopologyKeys: Required value"),
        "{m}"
    );

    let mut s = good_spec();
    s["requiredPersistentTopology"]["nodeTopologyKeys"] = json!(["bad key"]);
    let m = refusal(s).await;
    assert!(
        m.contains("spec.requiredPersistentTopology.nodeTopologyKeys[0]: Invalid value"),
        "{m}"
    );

    let mut s = good_spec();
    s["persistentPodAnnotations"] = json!([{"key": ""}]);
    assert!(
        refusal(s)
            .await
            .contains("spec.persistentPodAnnotations[0].key")
    );

    let mut s = good_spec();
    s["persistentPodStateRetentionPolicy"] = json!("Never");
    let m = refusal(s).await;
    assert!(
        m.contains("spec.persistentPodStateRetentionPolicy: Unsupported value: \"Never\""),
        "{m}"
    );
}

#[tokio::test]
async fn target_ref_is_immutable() {
    let mut changed = good_spec();
    changed["targetRef"]["name"] = json!("other");
    let out = validate(
        request(
            Operation::Update,
            pps("pps", changed),
            Some(pps("pps", good_spec())),
        ),
        &States::default(),
    )
    .await;
    match out {
        Outcome::Deny { message, .. } => {
            assert!(message.contains("spec.targetRef: Forbidden"), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn two_states_for_one_workload_conflict() {
    // Same group, kind and name; another version of the group is the same workload.
    let mut other = good_spec();
    other["targetRef"]["apiVersion"] = json!("apps.kruise.io/v1alpha1");
    let m = refusal_with(pps("pps", good_spec()), vec![typed(pps("first", other))]).await;
    assert!(
        m.contains("in conflict with other PersistentPodState first"),
        "{m}"
    );
    // Itself (an update) is no conflict.
    let out = validate(
        request(Operation::Create, pps("pps", good_spec()), None),
        &States {
            items: vec![typed(pps("pps", good_spec()))],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(out, Outcome::Allow);
}

fn recorded_state() -> PersistentPodState {
    let mut v = pps("pps", good_spec());
    v["status"] = json!({
        "observedGeneration": 1,
        "podStates": {"web-0": {
            "nodeName": "node-a",
            "nodeTopologyLabels": {
                "kubernetes.io/hostname": "node-a",
                "topology.kubernetes.io/zone": "zone-1",
            },
        }},
    });
    typed(v)
}

fn sts_pod(name: &str, api_version: &str, kind: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "ownerReferences": [
            {"apiVersion": api_version, "kind": kind, "name": "web", "uid": "u",
             "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "x"}],
                 "nodeSelector": {"disk": "ssd"}},
    }))
    .expect("pod")
}

#[tokio::test]
async fn a_recreated_pod_gets_its_recorded_topology() {
    let states = States {
        items: vec![recorded_state()],
        ..Default::default()
    };
    let mut pod = sts_pod("web-0", "apps.kruise.io/v1beta1", "StatefulSet");
    let inj = injection_for(&pod, "ns", &states).await;
    assert!(inject(&mut pod, inj.as_ref()));
    let v = serde_json::to_value(&pod).expect("json");
    assert_eq!(
        v["metadata"]["annotations"][keys::PPS_INJECTED_ANNOTATION],
        "pps"
    );
    assert_eq!(
        v["spec"]["nodeSelector"],
        json!({"disk": "ssd", "kubernetes.io/hostname": "node-a"}),
        "the Pod's own selector is kept"
    );
    assert_eq!(
        v["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
        json!([{"weight": 50, "preference": {"matchExpressions": [
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-1"]}]}}])
    );
}

#[tokio::test]
async fn pods_it_does_not_concern_pay_at_most_a_lookup() {
    let states = States {
        items: vec![recorded_state()],
        ..Default::default()
    };
    // Not a StatefulSet's and no PersistentPodState targets it: one cache lookup, and the
    // whitelist is not read.
    let pod = sts_pod("web-0", "apps.kruise.io/v1alpha1", "CloneSet");
    assert_eq!(injection_for(&pod, "ns", &states).await, None);
    assert_eq!(states.reads.load(Ordering::SeqCst), 1);
    assert_eq!(states.whitelist_reads.load(Ordering::SeqCst), 0);
    // A StatefulSet Pod without a recorded state, or of another StatefulSet: nothing.
    let pod = sts_pod("web-1", "apps.kruise.io/v1beta1", "StatefulSet");
    assert_eq!(injection_for(&pod, "ns", &states).await, None);
    let pod = sts_pod("web-0", "apps/v1", "StatefulSet");
    assert_eq!(
        injection_for(&pod, "ns", &states).await,
        None,
        "apps/v1 is another workload than apps.kruise.io"
    );
}

#[test]
fn the_slot_runs_last_through_the_handler_chain() {
    let pod = sts_pod("web-0", "apps.kruise.io/v1beta1", "StatefulSet");
    let ctx = PodContext {
        persistent: Some(crate::pod::persistent_pod_state::Injection {
            persistent_pod_state: "pps".into(),
            placement: kruise_api::apps::v1alpha1::node_affinity(
                &recorded_state().spec,
                &recorded_state().status.unwrap_or_default().pod_states["web-0"],
            ),
        }),
        ..Default::default()
    };
    let req = Request {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        resource: "pods".into(),
        name: "web-0".into(),
        ..request(
            Operation::Create,
            serde_json::to_value(&pod).expect("json"),
            None,
        )
    };
    let Outcome::Patch(patch) = mutate_with(&req, &ctx) else {
        panic!("expected a patch");
    };
    let text = serde_json::to_string(&patch).expect("json");
    assert!(
        text.contains("/spec/nodeSelector/kubernetes.io~1hostname"),
        "{text}"
    );
    assert!(text.contains(keys::PPS_INJECTED_ANNOTATION), "{text}");
}

fn game_spec() -> Value {
    let mut s = good_spec();
    s["targetRef"] = json!({"apiVersion": "game.kruise.io/v1alpha1", "kind": "GameServerSet",
        "name": "web"});
    s
}

#[tokio::test]
async fn a_custom_workload_is_admitted_only_when_whitelisted() {
    let m = refusal(game_spec()).await;
    assert!(
        m.contains("spec.targetRef") && m.contains("PPS_Watch_Custom_Workload_WhiteList"),
        "{m}"
    );
    let states = States {
        whitelist: game_whitelist(),
        ..Default::default()
    };
    let out = validate(
        request(Operation::Create, pps("pps", game_spec()), None),
        &states,
    )
    .await;
    assert_eq!(out, Outcome::Allow);
    // A StatefulSet target never reads the ConfigMap.
    let sts = States::default();
    validate(
        request(Operation::Create, pps("pps", good_spec()), None),
        &sts,
    )
    .await;
    assert_eq!(sts.whitelist_reads.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_whitelisted_custom_workload_pod_gets_its_recorded_topology() {
    let mut recorded = serde_json::to_value(recorded_state()).expect("json");
    recorded["spec"] = game_spec();
    let mut states = States {
        items: vec![typed(recorded)],
        ..Default::default()
    };
    let pod = sts_pod("web-0", "game.kruise.io/v1alpha1", "GameServerSet");
    assert_eq!(
        injection_for(&pod, "ns", &states).await,
        None,
        "not whitelisted"
    );
    states.whitelist = game_whitelist();
    let inj = injection_for(&pod, "ns", &states).await.expect("injected");
    assert_eq!(inj.persistent_pod_state, "pps");
    assert_eq!(
        inj.placement.node_selector.get("kubernetes.io/hostname"),
        Some(&"node-a".to_owned())
    );
}
