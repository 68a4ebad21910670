//! PersistentPodState end to end, against the install from `deploy/`: an Advanced StatefulSet
//! whose annotations ask for one gets it (owned by the StatefulSet); each Ready Pod's node and
//! node labels are recorded; a deleted Pod comes back carrying the recorded topology (required
//! → `spec.nodeSelector`, preferred → preferred node affinity) and lands on the recorded node;
//! `kubectl kruise rollout watch` names the recorded node in the Pod's detail; a scale-down
//! drops the scaled-away state; removing the annotation deletes the object. Bad
//! input is refused naming the field.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::keys;
use kruise_e2e::cli::{Kruise, Tmux};
use kruise_e2e::customkind::CustomKind;
use kruise_e2e::persistentpodstate::{self as pps, create_raw, refusal};
use kruise_e2e::statefulset as asts;
use kruise_e2e::{TestNamespace, client, pod_ready, wait_for, wait_pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const SETTLE: Duration = Duration::from_secs(60);
const HOSTNAME: &str = "kubernetes.io/hostname";
const OS: &str = "kubernetes.io/os";

#[tokio::test]
async fn a_recreated_pod_returns_to_its_recorded_node() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pps").await.expect("ns");
    let sets = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("service");
    let mut sts = asts::new(
        "web",
        2,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel"}),
    )
    .expect("sts");
    sts.metadata.annotations = Some(
        [
            (keys::PPS_AUTO_GENERATE_ANNOTATION, "true"),
            (keys::PPS_REQUIRED_TOPOLOGY_ANNOTATION, HOSTNAME),
            (keys::PPS_PREFERRED_TOPOLOGY_ANNOTATION, OS),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    let sts = sets
        .create(&PostParams::default(), &sts)
        .await
        .expect("create sts");

    // Generated from the annotations, controlled by the StatefulSet.
    let states = pps::api(&client, &ns.name);
    let generated = wait_for("the generated PersistentPodState", SETTLE, || async {
        Ok(states.get_opt("web").await?)
    })
    .await
    .expect("generated");
    let owner = &generated.owner_references()[0];
    assert_eq!(owner.uid, sts.uid().unwrap_or_default());
    assert_eq!(owner.controller, Some(true));
    assert_eq!(generated.spec.target_reference.kind, "StatefulSet");
    assert_eq!(
        generated
            .spec
            .required_persistent_topology
            .as_ref()
            .map(|t| t.node_topology_keys.clone()),
        Some(vec![HOSTNAME.to_owned()])
    );
    assert_eq!(generated.spec.preferred_persistent_topology[0].weight, 100);

    // Both Pods recorded once Ready, with their node's labels.
    let recorded = wait_for("both Pods recorded", SETTLE, || async {
        let p = states.get("web").await?;
        let s = p.status.unwrap_or_default();
        Ok((s.pod_states.len() == 2).then_some(s.pod_states))
    })
    .await
    .expect("recorded");
    let old = pods.get("web-0").await.expect("web-0");
    let node_name = old
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default();
    let node = Api::<Node>::all(client.clone())
        .get(&node_name)
        .await
        .expect("node");
    let state = &recorded["web-0"];
    assert_eq!(state.node_name, node_name);
    assert_eq!(
        state.node_topology_labels.get(HOSTNAME),
        node.labels().get(HOSTNAME)
    );
    let os = node.labels().get(OS).cloned().unwrap_or_default();
    assert_eq!(state.node_topology_labels.get(OS), Some(&os));

    // Deleted, it comes back with the recorded topology injected, on the recorded node.
    pods.delete("web-0", &Default::default())
        .await
        .expect("delete web-0");
    let old_uid = old.uid().unwrap_or_default();
    let new = wait_pod(&pods, "web-0", "recreated and Ready", SETTLE, |p| {
        p.uid().as_deref() != Some(old_uid.as_str()) && pod_ready(p)
    })
    .await
    .expect("recreated");
    assert_eq!(
        new.annotations().get(keys::PPS_INJECTED_ANNOTATION),
        Some(&"web".to_owned())
    );
    let spec = new.spec.clone().unwrap_or_default();
    assert_eq!(
        spec.node_selector.unwrap_or_default().get(HOSTNAME),
        node.labels().get(HOSTNAME),
        "required topology injected as nodeSelector"
    );
    let preferred = serde_json::to_value(
        spec.affinity
            .and_then(|a| a.node_affinity)
            .and_then(|n| n.preferred_during_scheduling_ignored_during_execution),
    )
    .expect("json");
    assert_eq!(
        preferred,
        json!([{"weight": 100, "preference": {"matchExpressions": [
            {"key": OS, "operator": "In", "values": [os]}]}}]),
        "preferred topology injected as preferred node affinity"
    );
    assert_eq!(spec.node_name.as_deref(), Some(node_name.as_str()));
    live_view_shows_the_persisted_node(&ns.name, &node_name).await;

    // Scaled to 1: web-1's state goes with it.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale");
    wait_for("web-1's state dropped", SETTLE, || async {
        let s = states.get("web").await?.status.unwrap_or_default();
        Ok((s.pod_states.keys().collect::<Vec<_>>() == ["web-0"]).then_some(()))
    })
    .await
    .expect("dropped");

    // The annotation removed: the generated object goes.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {keys::PPS_AUTO_GENERATE_ANNOTATION: null}}}),
        ),
    )
    .await
    .expect("unannotate");
    wait_for(
        "the generated PersistentPodState deleted",
        SETTLE,
        || async { Ok(states.get_opt("web").await?.is_none().then_some(())) },
    )
    .await
    .expect("deleted");
    ns.delete().await.expect("delete ns");
}

/// Upstream's "statefulset node topology", its last part: the generated object is the user's to
/// edit. Its `persistentPodStateRetentionPolicy` set to WhenDeleted survives the StatefulSet's
/// own changes (a scale-down from 3 to 1 keeps the 3 states); only a change of the generating
/// annotations rewrites the spec (back to WhenScaled, and the scaled-away states go).
#[tokio::test]
async fn a_user_edit_of_the_generated_spec_stays() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pps-edit")
        .await
        .expect("ns");
    let sets = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("service");
    let mut sts = asts::new(
        "web",
        3,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel"}),
    )
    .expect("sts");
    sts.metadata.annotations = Some(
        [
            (keys::PPS_AUTO_GENERATE_ANNOTATION, "true"),
            (keys::PPS_REQUIRED_TOPOLOGY_ANNOTATION, HOSTNAME),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    sets.create(&PostParams::default(), &sts)
        .await
        .expect("create sts");
    let states = pps::api(&client, &ns.name);
    wait_for("3 Pods recorded", SETTLE, || async {
        let p = states.get_opt("web").await?;
        let n = p.and_then(|p| p.status).map_or(0, |s| s.pod_states.len());
        Ok((n == 3).then_some(()))
    })
    .await
    .expect("recorded");

    states
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"persistentPodStateRetentionPolicy":
                keys::PPS_RETENTION_WHEN_DELETED}})),
        )
        .await
        .expect("edit the generated spec");
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 1}})),
    )
    .await
    .expect("scale down");
    wait_for("1 Pod left", SETTLE, || async {
        let left = asts::pods(&pods, "web").await?;
        let sts = sets.get("web").await?;
        let reported = sts.data["status"]["replicas"].as_i64() == Some(1);
        Ok((left.len() == 1 && reported).then_some(()))
    })
    .await
    .expect("scaled down");
    // The StatefulSet's status and the Pods' deletions have been seen by now; give the
    // controllers a few more seconds to (wrongly) act on them.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kept = states.get("web").await.expect("pps");
    assert_eq!(
        kept.spec.persistent_pod_state_retention_policy.as_deref(),
        Some(keys::PPS_RETENTION_WHEN_DELETED),
        "the user's retention policy was overwritten"
    );
    let recorded = kept.status.unwrap_or_default().pod_states;
    assert_eq!(
        recorded.len(),
        3,
        "WhenDeleted keeps the scaled-away states: {:?}",
        recorded.keys().collect::<Vec<_>>()
    );

    // A generating annotation changed: the spec follows the annotations again.
    sets.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {keys::PPS_PREFERRED_TOPOLOGY_ANNOTATION: OS}}}),
        ),
    )
    .await
    .expect("annotate");
    wait_for(
        "regenerated, scaled-away states dropped",
        SETTLE,
        || async {
            let p = states.get("web").await?;
            let regenerated = !p.spec.preferred_persistent_topology.is_empty()
                && p.spec.persistent_pod_state_retention_policy.as_deref()
                    != Some(keys::PPS_RETENTION_WHEN_DELETED);
            let s = p.status.unwrap_or_default();
            Ok((regenerated && s.pod_states.keys().collect::<Vec<_>>() == ["web-0"]).then_some(()))
        },
    )
    .await
    .expect("regenerated");
    ns.delete().await.expect("delete ns");
}

/// `kubectl kruise rollout watch asts/web` in a real terminal: the selected Pod's detail names
/// the node its PersistentPodState recorded.
async fn live_view_shows_the_persisted_node(ns: &str, node: &str) {
    const PROMPT: &str = "e2e$ ";
    let kk = Kruise::new(ns).expect("kubectl-kruise binary and kubeconfig");
    let tmux = Tmux::start(
        120,
        40,
        PROMPT,
        &[
            ("KK", kk.bin.display().to_string()),
            ("KC", kk.kubeconfig.display().to_string()),
        ],
    )
    .expect("tmux session");
    let screen = |what: &'static str, seen: Box<dyn Fn(&str) -> bool + Send>| {
        let tmux = &tmux;
        async move {
            wait_for(what, Duration::from_secs(30), || async {
                let s = tmux.capture()?;
                Ok(seen(&s).then_some(s))
            })
            .await
            .expect(what)
        }
    };
    screen(
        "the shell prompt",
        Box::new(|s| s.contains(PROMPT.trim_end())),
    )
    .await;
    tmux.type_text(&format!(
        "\"$KK\" --kubeconfig \"$KC\" -n {ns} rollout watch asts/web; echo \"EXIT=$?\""
    ))
    .expect("type");
    tmux.key("Enter").expect("enter");
    let expected = format!("persisted node: {node}");
    screen(
        "the persisted node in the Pod detail",
        Box::new(move |s| s.contains(&expected)),
    )
    .await;
    tmux.key("q").expect("q");
    screen("exit 0 after q", Box::new(|s| s.contains("EXIT=0"))).await;
}

#[tokio::test]
async fn bad_input_is_refused_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pps-bad")
        .await
        .expect("ns");
    let target =
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "db"});
    let required = json!({"nodeTopologyKeys": [HOSTNAME]});
    let cases = [
        (
            json!({"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "db"},
                   "requiredPersistentTopology": required}),
            "spec.targetRef: Invalid value",
        ),
        (
            json!({"targetRef": target}),
            "spec.requiredPersistentTopology, spec.preferredPersistentTopology: Required value",
        ),
        (
            json!({"targetRef": target, "preferredPersistentTopology": [
                {"weight": 0, "preference": {"nodeTopologyKeys": [HOSTNAME]}}]}),
            "spec.preferredPersistentTopology[0].weight: Invalid value: 0",
        ),
        (
            json!({"targetRef": target, "requiredPersistentTopology": required,
                   "persistentPodStateRetentionPolicy": "Never"}),
            "spec.persistentPodStateRetentionPolicy: Unsupported value: \"Never\"",
        ),
    ];
    for (spec, expected) in cases {
        let message = refusal(create_raw(&client, &ns.name, "bad", spec.clone()).await)
            .unwrap_or_else(|| panic!("{spec} accepted"));
        assert!(message.contains(expected), "{spec}: {message}");
    }
    // A valid one is admitted; a second for the same workload and a changed target are not.
    create_raw(
        &client,
        &ns.name,
        "db",
        json!({"targetRef": target, "requiredPersistentTopology": required}),
    )
    .await
    .expect("a valid PersistentPodState");
    let message = refusal(
        create_raw(
            &client,
            &ns.name,
            "db-again",
            json!({"targetRef": target, "requiredPersistentTopology": required}),
        )
        .await,
    )
    .expect("refused");
    assert!(
        message.contains("in conflict with other PersistentPodState db"),
        "{message}"
    );
    let err = pps::api(&client, &ns.name)
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"targetRef": {"name": "other"}}})),
        )
        .await
        .expect_err("targetRef changed");
    assert!(
        err.to_string().contains("spec.targetRef: Forbidden"),
        "{err}"
    );
    ns.delete().await.expect("delete ns");
}

/// A custom workload listed in `PPS_Watch_Custom_Workload_WhiteList` (upstream's key of the
/// manager's `kruise-configuration`) gets PersistentPodState behaviour: a `GameServerSet` (a CRD
/// of this run) is refused as a target until listed, then admitted; its Ready Pod's node is
/// recorded (the manager reads the kind under RBAC the test grants, as a user would), and the
/// Pod recreated under the same name is steered back there by the Pod webhook. Serial: the key
/// is cluster-wide, and the parallel WorkloadSpread test rewrites the same ConfigMap.
#[tokio::test]
async fn serial_a_whitelisted_custom_workload_keeps_its_pods_state() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-pps-custom")
        .await
        .expect("ns");
    let kind = CustomKind::create(&client, "pps", &["get"])
        .await
        .expect("the GameServerSet kind, and the manager's grant on it");
    let group = kind.group.clone();
    let manager_ns = kruise_e2e::mode::manager_namespace(&client)
        .await
        .expect("manager namespace");

    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), &manager_ns);
    let cm_before = cms
        .get_opt(keys::KRUISE_CONFIGURATION_CONFIGMAP)
        .await
        .expect("read kruise-configuration")
        .map(|c| {
            c.data
                .and_then(|d| d.get(keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY).cloned())
        });
    let outcome = tokio::spawn(custom_body(
        client.clone(),
        ns.name.clone(),
        group.clone(),
        cm_before.is_some(),
    ))
    .await;
    let restored = match cm_before {
        None => cms
            .delete(keys::KRUISE_CONFIGURATION_CONFIGMAP, &Default::default())
            .await
            .map(|_| ()),
        Some(v) => cms
            .patch(
                keys::KRUISE_CONFIGURATION_CONFIGMAP,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY: v}})),
            )
            .await
            .map(|_| ()),
    };
    kind.remove(&client).await;
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
    restored.expect("restore kruise-configuration");
    ns.delete().await.expect("cleanup");

    async fn custom_body(client: kube::Client, ns: String, group: String, cm_exists: bool) {
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind};

        let api_version = format!("{group}/v1");
        let spec = json!({
            "targetRef": {"apiVersion": api_version, "kind": "GameServerSet", "name": "gs"},
            "requiredPersistentTopology": {"nodeTopologyKeys": [HOSTNAME]},
        });
        let refused = refusal(create_raw(&client, &ns, "pps", spec.clone()).await)
            .expect("an unlisted kind is refused");
        assert!(
            refused.contains("spec.targetRef")
                && refused.contains(keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY),
            "{refused}"
        );
        let value =
            json!({"workloads": [{"Group": group, "Version": "v1", "Kind": "GameServerSet"}]})
                .to_string();
        let manager_ns = kruise_e2e::mode::manager_namespace(&client)
            .await
            .expect("manager namespace");
        let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(client.clone(), &manager_ns);
        if cm_exists {
            cms.patch(
                keys::KRUISE_CONFIGURATION_CONFIGMAP,
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY: value}})),
            )
            .await
            .expect("whitelist the kind");
        } else {
            let cm = serde_json::from_value(json!({
                "metadata": {"name": keys::KRUISE_CONFIGURATION_CONFIGMAP},
                "data": {keys::PPS_CUSTOM_WORKLOAD_WHITELIST_KEY: value}}))
            .expect("configmap");
            cms.create(&PostParams::default(), &cm)
                .await
                .expect("create kruise-configuration");
        }
        create_raw(&client, &ns, "pps", spec)
            .await
            .expect("a listed kind is admitted");

        // The workload (its CRD may take a moment to be served).
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "GameServerSet"));
        let sets: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
        let gs: DynamicObject = serde_json::from_value(json!({
            "apiVersion": api_version, "kind": "GameServerSet",
            "metadata": {"name": "gs"}, "spec": {"replicas": 1}}))
        .expect("gs");
        let gs = wait_for("the GameServerSet created", SETTLE, || async {
            Ok(sets.create(&PostParams::default(), &gs).await.ok())
        })
        .await
        .expect("GameServerSet");
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "gs-0", "ownerReferences": [{"apiVersion": api_version,
                "kind": "GameServerSet", "name": "gs", "uid": gs.uid().expect("uid"),
                "controller": true}]},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "main",
                "image": kruise_e2e::image("testapp", "v1")}]},
        }))
        .expect("pod");
        pods.create(&PostParams::default(), &pod)
            .await
            .expect("create pod");
        let ready = wait_pod(&pods, "gs-0", "Ready", SETTLE, pod_ready)
            .await
            .expect("gs-0 Ready");
        let node = ready.spec.and_then(|s| s.node_name).expect("scheduled");

        let states = pps::api(&client, &ns);
        wait_for("gs-0's node recorded", SETTLE, || async {
            let s = states.get("pps").await?;
            let recorded = s
                .status
                .and_then(|st| st.pod_states.get("gs-0").cloned())
                .map(|p| p.node_name);
            Ok((recorded.as_deref() == Some(node.as_str())).then_some(()))
        })
        .await
        .expect("recorded");

        pods.delete("gs-0", &Default::default())
            .await
            .expect("delete gs-0");
        wait_for("gs-0 gone", SETTLE, || async {
            Ok(pods.get_opt("gs-0").await?.is_none().then_some(()))
        })
        .await
        .expect("gone");
        let again = pods
            .create(&PostParams::default(), &pod)
            .await
            .expect("recreate gs-0");
        assert_eq!(
            again.annotations().get(keys::PPS_INJECTED_ANNOTATION),
            Some(&"pps".to_owned()),
            "steered by the PersistentPodState"
        );
        assert_eq!(
            again
                .spec
                .and_then(|s| s.node_selector)
                .and_then(|n| n.get(HOSTNAME).cloned()),
            Some(node),
            "back to its recorded node"
        );
    }
}
