//! Advanced StatefulSet end to end: a real kube-apiserver, kubelet and containerd, with
//! kruise-manager (and its webhook) and kruise-daemon running. Each test has its own namespace.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_e2e::statefulset::{self as asts, ordinal};
use kruise_e2e::{TestNamespace, client, container_status, image, mode, wait_for};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

const ROLLOUT: Duration = Duration::from_secs(240);

/// The manager-kill test takes the manager (and in dev mode its webhook) away for a moment:
/// it holds this for writing, every other test for reading, so none of them sees that gap.
static MANAGER: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

fn uids(pods: &[Pod]) -> BTreeMap<String, String> {
    pods.iter()
        .map(|p| (p.name_any(), p.uid().unwrap_or_default()))
        .collect()
}

fn restarts(p: &Pod) -> i32 {
    container_status(p, "app").map_or(-1, |c| c.restart_count)
}

fn app_image(p: &Pod) -> String {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

async fn patch(api: &Api<kube::api::DynamicObject>, name: &str, body: serde_json::Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .expect("patch StatefulSet");
}

/// A JSON patch (a merge patch would replace the whole containers list).
async fn json_patch(api: &Api<kube::api::DynamicObject>, name: &str, ops: serde_json::Value) {
    let p: json_patch::Patch = serde_json::from_value(ops).expect("json patch");
    api.patch(name, &PatchParams::default(), &Patch::Json::<()>(p))
        .await
        .expect("patch StatefulSet");
}

async fn set_image(api: &Api<kube::api::DynamicObject>, name: &str, tag: &str) {
    json_patch(
        api,
        name,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image",
                "value": image("testapp", tag)}]),
    )
    .await;
}

/// Acceptance 1: OrderedReady creates web-0, web-1, web-2 each after the one before is Ready,
/// each with its own bound PVC (`data-web-N`) mounted, and the identity labels; DNS is
/// checked by `headless_service_resolves_pod_names`.
#[tokio::test]
async fn ordered_ready_with_volumes() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-order")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new("web", 3, "v1", true, json!({})).expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("rolled out");

    let list = asts::pods(&pods, "web").await.expect("pods");
    let names: Vec<String> = list.iter().map(|p| p.name_any()).collect();
    assert_eq!(names, ["web-0", "web-1", "web-2"]);
    // Ordered: each pod was created only after its predecessor was Ready.
    for pair in list.windows(2) {
        let ready_at = pair[0]
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .and_then(|c| c.last_transition_time.clone())
            .expect("ready time");
        let created = pair[1]
            .metadata
            .creation_timestamp
            .clone()
            .expect("created");
        assert!(
            created.0 >= ready_at.0,
            "{} created at {} before {} was ready at {}",
            pair[1].name_any(),
            created.0,
            pair[0].name_any(),
            ready_at.0
        );
    }
    let pvcs: Api<PersistentVolumeClaim> = ns.api();
    for p in &list {
        let ord = ordinal("web", &p.name_any());
        let claim = pvcs.get(&format!("data-web-{ord}")).await.expect("pvc");
        assert_eq!(
            claim.status.and_then(|s| s.phase).as_deref(),
            Some("Bound"),
            "data-web-{ord}"
        );
        let labels = p.labels();
        assert_eq!(labels["statefulset.kubernetes.io/pod-name"], p.name_any());
        assert_eq!(labels["apps.kubernetes.io/pod-index"], ord.to_string());
    }
    ns.delete().await.expect("cleanup");
}

/// Acceptance 1, DNS half: the headless Service resolves `web-0.web` from another pod (needs
/// the cluster's DNS server and the kubelet pointing pods at it).
#[tokio::test]
async fn headless_service_resolves_pod_names() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-dns")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new("web", 1, "v1", false, json!({})).expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 1, ROLLOUT)
        .await
        .expect("rolled out");
    let pod = pods.get("web-0").await.expect("web-0");
    let spec = pod.spec.clone().expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("web"));
    let ip = pod.status.and_then(|s| s.pod_ip).expect("web-0 has an IP");
    // busybox's nslookup asks the DNS server for the name as given (no search path for a name
    // with a dot), so it gets the full name; the short `web-0.web` goes through the C resolver
    // and the Pod's search path, which busybox's ping prints as `PING web-0.web (IP)`.
    let fqdn = format!("web-0.web.{}.svc.cluster.local", ns.name);
    let script = format!(
        "nslookup {fqdn} | grep -qF 'Address: {ip}' && ping -c1 -W1 web-0.web 2>&1 | head -1 | grep -qF '({ip})'"
    );
    let probe: Pod = serde_json::from_value(json!({
        "metadata": {"name": "dns-probe"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "probe", "image": image("testapp", "v1"),
            "command": ["sh", "-c", script]
        }]}
    }))
    .expect("probe");
    pods.create(&PostParams::default(), &probe)
        .await
        .expect("probe pod");
    let phase = wait_for("dns probe finished", Duration::from_secs(90), || async {
        let p = pods.get("dns-probe").await?;
        let phase = p.status.and_then(|s| s.phase).unwrap_or_default();
        Ok((phase == "Succeeded" || phase == "Failed").then_some(phase))
    })
    .await
    .expect("probe");
    assert_eq!(
        phase, "Succeeded",
        "web-0.web resolves to web-0's IP ({ip}) from another pod"
    );
    ns.delete().await.expect("cleanup");
}

/// Acceptance 2: an image change with InPlaceIfPossible and partition 1 updates ordinals 2 then 1
/// in place (same UID, same PVC, the file written before still there, one restart) and leaves
/// ordinal 0; partition 0 finishes it.
#[tokio::test]
async fn in_place_update_from_the_highest_ordinal_down_to_the_partition() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-inplace")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new(
        "web",
        3,
        "v1",
        true,
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "partition": 1}}}),
    )
    .expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("rolled out");
    let before = uids(&asts::pods(&pods, "web").await.expect("pods"));

    set_image(&api, "web", "v2").await;
    // Watch the order: the first pod seen at v2 must be web-2, then web-1.
    let mut order: Vec<String> = Vec::new();
    let start = Instant::now();
    while order.len() < 2 && start.elapsed() < ROLLOUT {
        for p in asts::pods(&pods, "web").await.expect("pods") {
            if app_image(&p) == image("testapp", "v2") && !order.contains(&p.name_any()) {
                order.push(p.name_any());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(order, ["web-2", "web-1"], "update order");
    let st = asts::wait_status(&api, "web", "2 updated and ready", ROLLOUT, |st| {
        st["updatedReplicas"] == 2 && st["updatedReadyReplicas"] == 2 && st["readyReplicas"] == 3
    })
    .await
    .expect("partitioned");
    assert_ne!(
        st.data["status"]["currentRevision"],
        st.data["status"]["updateRevision"]
    );
    let list = asts::pods(&pods, "web").await.expect("pods");
    assert_eq!(
        uids(&list),
        before,
        "same pods (UIDs) after in-place update"
    );
    for p in &list {
        let want = if p.name_any() == "web-0" {
            (0, "v1")
        } else {
            (1, "v2")
        };
        assert_eq!(restarts(p), want.0, "{} restarts", p.name_any());
        assert_eq!(
            app_image(p),
            image("testapp", want.1),
            "{} image",
            p.name_any()
        );
        let claim = p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .and_then(|v| v.iter().find(|v| v.name == "data"))
            .and_then(|v| v.persistent_volume_claim.as_ref())
            .map(|c| c.claim_name.clone());
        assert_eq!(claim, Some(format!("data-{}", p.name_any())));
    }

    patch(
        &api,
        "web",
        json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}}),
    )
    .await;
    asts::wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("promoted");
    let list = asts::pods(&pods, "web").await.expect("pods");
    assert_eq!(uids(&list), before, "same pods after the full rollout");
    assert!(
        list.iter().all(|p| restarts(p) == 1),
        "every container restarted exactly once"
    );
    ns.delete().await.expect("cleanup");
}

/// Acceptance 3: Parallel with maxUnavailable 2 has two pods mid-update at once, never three.
#[tokio::test]
async fn parallel_max_unavailable_two_updates_two_at_a_time() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-parallel")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new(
        "web",
        4,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel",
               "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                   "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 2}}}),
    )
    .expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 4, ROLLOUT)
        .await
        .expect("rolled out");

    set_image(&api, "web", "v2").await;
    let mut most = 0;
    let start = Instant::now();
    loop {
        let list = asts::pods(&pods, "web").await.expect("pods");
        // Mid-update: moved to the new image but not Ready again yet.
        let busy = list
            .iter()
            .filter(|p| app_image(p) == image("testapp", "v2") && !kruise_e2e::pod_ready(p))
            .count();
        most = most.max(busy);
        let done = list.len() == 4
            && list
                .iter()
                .all(|p| app_image(p) == image("testapp", "v2") && kruise_e2e::pod_ready(p));
        if done || start.elapsed() > ROLLOUT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(most, 2, "pods mid-update at once");
    asts::wait_rolled_out(&api, "web", 4, ROLLOUT)
        .await
        .expect("finished");
    ns.delete().await.expect("cleanup");
}

/// Acceptance 4: a change that cannot go in place recreates the pod under the same name with the
/// same PVC.
#[tokio::test]
async fn non_in_place_change_recreates_with_the_same_name_and_claim() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-recreate")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new(
        "web",
        2,
        "v1",
        true,
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}),
    )
    .expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rolled out");
    let before = uids(&asts::pods(&pods, "web").await.expect("pods"));
    let pvcs: Api<PersistentVolumeClaim> = ns.api();
    let claim_uids: Vec<String> = ["data-web-0", "data-web-1"]
        .iter()
        .map(|n| async { pvcs.get(n).await.map(|c| c.uid().unwrap_or_default()) })
        .collect::<futures::stream::FuturesOrdered<_>>()
        .collect_vec()
        .await;

    json_patch(
        &api,
        "web",
        json!([{"op": "add", "path": "/spec/template/spec/containers/0/env",
                "value": [{"name": "MODE", "value": "b"}]}]),
    )
    .await;
    asts::wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("recreated");
    let after = uids(&asts::pods(&pods, "web").await.expect("pods"));
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    for (name, uid) in &after {
        assert_ne!(Some(uid), before.get(name), "{name} was recreated");
    }
    let claims_after: Vec<String> = ["data-web-0", "data-web-1"]
        .iter()
        .map(|n| async { pvcs.get(n).await.map(|c| c.uid().unwrap_or_default()) })
        .collect::<futures::stream::FuturesOrdered<_>>()
        .collect_vec()
        .await;
    assert_eq!(claims_after, claim_uids, "same PVCs across recreation");
    ns.delete().await.expect("cleanup");
}

trait CollectVec<T> {
    async fn collect_vec(self) -> Vec<T>;
}

impl<S, T, E> CollectVec<T> for S
where
    S: futures::Stream<Item = Result<T, E>> + Unpin,
    E: std::fmt::Debug,
{
    async fn collect_vec(self) -> Vec<T> {
        use futures::StreamExt;
        self.map(|r| r.expect("get PVC")).collect().await
    }
}

/// Acceptance 5: reserveOrdinals [1] with 3 replicas gives ordinals 0, 2, 3; reserving 1 on a
/// running set deletes web-1 and creates web-3.
#[tokio::test]
async fn reserve_ordinals_skip_an_ordinal() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-reserve")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new(
        "web",
        3,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel", "reserveOrdinals": [1]}),
    )
    .expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("rolled out");
    let names: Vec<String> = asts::pods(&pods, "web")
        .await
        .expect("pods")
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(names, ["web-0", "web-2", "web-3"]);

    patch(&api, "web", json!({"spec": {"reserveOrdinals": [1, 2]}})).await;
    let names = wait_for("web-2 replaced by web-4", ROLLOUT, || async {
        let names: Vec<String> = asts::pods(&pods, "web")
            .await?
            .iter()
            .map(|p| p.name_any())
            .collect();
        Ok((names == ["web-0", "web-3", "web-4"]).then_some(names))
    })
    .await
    .expect("reserved 2");
    assert_eq!(names, ["web-0", "web-3", "web-4"]);
    ns.delete().await.expect("cleanup");
}

/// Upstream `handleSpecifiedDeletedPods`: a Pod labelled `apps.kruise.io/specified-delete` is
/// deleted and recreated under its name even below the partition, the others left alone.
#[tokio::test]
async fn specified_delete_recreates_that_ordinal_whatever_the_partition() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-specdel")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new(
        "web",
        2,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel", "updateStrategy": {"type": "RollingUpdate",
            "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": 2}}}),
    )
    .expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rolled out");
    let before = uids(&asts::pods(&pods, "web").await.expect("pods"));

    pods.patch(
        "web-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {
            kruise_api::keys::SPECIFIED_DELETE_LABEL: "true"}}})),
    )
    .await
    .expect("label web-0");
    let after = wait_for("web-0 recreated and ready", ROLLOUT, || async {
        let list = asts::pods(&pods, "web").await?;
        let now = uids(&list);
        let ready = list
            .iter()
            .all(|p| container_status(p, "app").is_some_and(|c| c.ready));
        Ok((now.len() == 2 && now.get("web-0") != before.get("web-0") && ready).then_some(list))
    })
    .await
    .expect("recreated");
    assert_eq!(
        uids(&after).get("web-1"),
        before.get("web-1"),
        "web-1 untouched"
    );
    let web0 = after
        .iter()
        .find(|p| p.name_any() == "web-0")
        .expect("web-0");
    assert!(
        !web0
            .labels()
            .contains_key(kruise_api::keys::SPECIFIED_DELETE_LABEL),
        "the new web-0 is not marked"
    );
    asts::wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("ready again");
    ns.delete().await.expect("cleanup");
}

/// The controller UID of a Pod, if any.
fn controller_uid(p: &Pod) -> Option<String> {
    p.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// Upstream `getPodsForStatefulSet` (ClaimPods): an orphan `NAME-ORDINAL` Pod that matches is
/// adopted back, an owned Pod whose labels stop matching is released, and scaling to 0 then
/// deletes what the set owns and leaves the released Pod.
#[tokio::test]
async fn orphans_are_adopted_and_pods_that_stop_matching_released() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-claim")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new(
        "web",
        2,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel"}),
    )
    .expect("sts");
    let created = api
        .create(&PostParams::default(), &sts)
        .await
        .expect("create");
    let set_uid = created.uid().expect("set uid");
    asts::wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rolled out");
    let before = uids(&asts::pods(&pods, "web").await.expect("pods"));

    // Orphan web-1: the set takes it back, the same Pod.
    pods.patch(
        "web-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"ownerReferences": null}})),
    )
    .await
    .expect("orphan web-1");
    let web1 = wait_for("web-1 adopted", ROLLOUT, || async {
        let p = pods.get("web-1").await?;
        Ok((controller_uid(&p).as_deref() == Some(set_uid.as_str())).then_some(p))
    })
    .await
    .expect("adopted");
    assert_eq!(web1.uid(), before.get("web-1").cloned(), "the same Pod");

    // web-0 stops matching the selector: released, not deleted.
    pods.patch(
        "web-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "released"}}})),
    )
    .await
    .expect("relabel web-0");
    let web0 = wait_for("web-0 released", ROLLOUT, || async {
        let p = pods.get("web-0").await?;
        Ok(controller_uid(&p).is_none().then_some(p))
    })
    .await
    .expect("released");
    assert_eq!(web0.uid(), before.get("web-0").cloned(), "the same Pod");

    // Scaled to 0, the set deletes what it owns (web-1) and leaves the released web-0.
    patch(&api, "web", json!({"spec": {"replicas": 0}})).await;
    wait_for("web-1 deleted", ROLLOUT, || async {
        Ok(pods.get_opt("web-1").await?.is_none().then_some(()))
    })
    .await
    .expect("scaled to 0");
    let web0 = pods.get("web-0").await.expect("web-0 still there");
    assert_eq!(web0.uid(), before.get("web-0").cloned());
    ns.delete().await.expect("cleanup");
}

/// Acceptance 6: whenScaled Delete removes the PVC of a scaled-down ordinal; Retain keeps it.
#[tokio::test]
async fn retention_policy_when_scaled() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-retain")
        .await
        .expect("ns");
    let api = asts::api(&client, &ns.name);
    let pvcs: Api<PersistentVolumeClaim> = ns.api();
    for (name, policy) in [("del", "Delete"), ("keep", "Retain")] {
        asts::create_headless_service(&client, &ns.name, name)
            .await
            .expect("svc");
        let sts = asts::new(
            name,
            2,
            "v1",
            true,
            json!({"podManagementPolicy": "Parallel",
                   "persistentVolumeClaimRetentionPolicy": {"whenScaled": policy}}),
        )
        .expect("sts");
        api.create(&PostParams::default(), &sts)
            .await
            .expect("create");
    }
    for name in ["del", "keep"] {
        asts::wait_rolled_out(&api, name, 2, ROLLOUT)
            .await
            .expect("rolled out");
        patch(&api, name, json!({"spec": {"replicas": 1}})).await;
    }
    wait_for("data-del-1 deleted", ROLLOUT, || async {
        let gone = match pvcs.get_opt("data-del-1").await? {
            None => true,
            Some(c) => c.metadata.deletion_timestamp.is_some(),
        };
        Ok(gone.then_some(()))
    })
    .await
    .expect("Delete policy");
    asts::wait_rolled_out(&api, "keep", 1, ROLLOUT)
        .await
        .expect("scaled down");
    // The pod of keep-1 is gone; give the controller a few reconciles to (wrongly) act.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let kept = pvcs.get_opt("data-keep-1").await.expect("get");
    assert!(
        kept.is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        "Retain keeps data-keep-1"
    );
    assert!(
        pvcs.get_opt("data-del-0").await.expect("get").is_some(),
        "data-del-0 stays"
    );
    let list = pvcs.list(&ListParams::default()).await.expect("list");
    assert!(list.items.iter().any(|c| c.name_any() == "data-keep-0"));
    ns.delete().await.expect("cleanup");
}

/// Acceptance 7: invalid objects are refused, and the refusal names the field.
#[tokio::test]
async fn invalid_statefulsets_are_refused_naming_the_field() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-invalid")
        .await
        .expect("ns");
    let api = asts::api(&client, &ns.name);
    let rows: [(&str, serde_json::Value, &str); 7] = [
        (
            "/spec/selector",
            json!({"matchLabels": {"app": "other"}}),
            "spec.template.metadata.labels",
        ),
        (
            "/spec/podManagementPolicy",
            json!("Random"),
            "spec.podManagementPolicy",
        ),
        ("/spec/replicas", json!(-1), "spec.replicas"),
        (
            "/spec/reserveOrdinals",
            json!(["5-2"]),
            "spec.reserveOrdinals[0]",
        ),
        (
            "/spec/updateStrategy",
            json!({"rollingUpdate": {"partition": -1}}),
            "spec.updateStrategy.rollingUpdate.partition",
        ),
        (
            "/spec/updateStrategy",
            json!({"rollingUpdate": {"maxUnavailable": "150%"}}),
            "spec.updateStrategy.rollingUpdate.maxUnavailable",
        ),
        (
            "/spec/updateStrategy",
            json!({"rollingUpdate": {"podUpdatePolicy": "Sometimes"}}),
            "spec.updateStrategy.rollingUpdate.podUpdatePolicy",
        ),
    ];
    for (ptr, value, field) in rows {
        let mut sts =
            serde_json::to_value(asts::new("bad", 1, "v1", false, json!({})).expect("sts"))
                .expect("json");
        match sts.pointer_mut(ptr) {
            Some(v) => *v = value.clone(),
            None => {
                let key = ptr.rsplit('/').next().unwrap_or_default();
                sts["spec"][key] = value.clone();
            }
        }
        let obj: kube::api::DynamicObject = serde_json::from_value(sts).expect("object");
        let err = api
            .create(&PostParams::default(), &obj)
            .await
            .expect_err(&format!("{ptr}={value} must be refused"));
        assert!(err.to_string().contains(field), "{ptr}={value}: {err}");
    }
    // Immutable: serviceName; InPlaceOnly: only images may change.
    let sts = asts::new(
        "good",
        0,
        "v1",
        false,
        json!({"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}),
    )
    .expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("valid set");
    let err = api
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"serviceName": "other"}})),
        )
        .await
        .expect_err("serviceName is immutable");
    assert!(err.to_string().contains("spec.serviceName"), "{err}");
    let err = api
        .patch(
            "good",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "add",
                    "path": "/spec/template/spec/containers/0/env",
                    "value": [{"name": "X", "value": "1"}]}]))
                .expect("patch"),
            ),
        )
        .await
        .expect_err("InPlaceOnly refuses an env change");
    assert!(err.to_string().contains("spec.template.spec"), "{err}");
    ns.delete().await.expect("cleanup");
}

/// Acceptance 9: the manager is killed (dev mode: SIGKILL of the host process, then a restart;
/// in cluster: the leader Pod deleted with grace 0, a standby takes over) in the middle of an
/// in-place rollout slowed by minReadySeconds. The rollout finishes on the same Pods and every
/// container restarted exactly once: nothing was updated twice, nothing recreated.
#[tokio::test]
async fn serial_manager_killed_mid_rollout_finishes_it_restarting_each_container_once() {
    let _manager = MANAGER.write().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-kill")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = asts::new(
        "web",
        3,
        "v1",
        false,
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible", "minReadySeconds": 6}}}),
    )
    .expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("rolled out");
    let before = uids(&asts::pods(&pods, "web").await.expect("pods"));

    set_image(&api, "web", "v2").await;
    let started = asts::wait_status(&api, "web", "the first ordinal updated", ROLLOUT, |st| {
        st["updatedReplicas"].as_i64() >= Some(1) && st["currentRevision"] != st["updateRevision"]
    })
    .await
    .expect("rollout started");
    let update_revision = started.data["status"]["updateRevision"].clone();
    let mut left = Vec::new();
    mode::kill_manager(&client, async || {
        // With the manager gone (dev mode) or not yet replaced (in cluster), the rollout must
        // still be mid-way, else this test proves nothing about a restart.
        left = asts::pods(&pods, "web")
            .await
            .expect("pods")
            .iter()
            .filter(|p| app_image(p) != image("testapp", "v2"))
            .map(|p| p.name_any())
            .collect();
    })
    .await
    .expect("kill the manager");
    assert!(
        !left.is_empty(),
        "the kill landed mid-rollout (some ordinal still at v1)"
    );

    let done = asts::wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("the restarted manager finishes the rollout");
    assert_eq!(done.data["status"]["updatedReplicas"], 3);
    assert_eq!(done.data["status"]["updateRevision"], update_revision);
    assert_eq!(
        done.data["status"]["currentRevision"],
        done.data["status"]["updateRevision"]
    );
    let list = asts::pods(&pods, "web").await.expect("pods");
    assert_eq!(uids(&list), before, "same Pods (UIDs): updated in place");
    for p in &list {
        assert_eq!(app_image(p), image("testapp", "v2"), "{}", p.name_any());
        assert_eq!(restarts(p), 1, "{} restarted exactly once", p.name_any());
    }
    ns.delete().await.expect("cleanup");
}

/// The defaulting webhook: a minimal set (no replicas, strategy, policies) reads back with
/// upstream's defaults, in both served versions.
#[tokio::test]
async fn a_minimal_statefulset_reads_back_defaulted() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-default")
        .await
        .expect("ns");
    for (version, name) in [
        (kruise_api::keys::VERSION_V1BETA1, "beta"),
        (kruise_api::keys::VERSION_V1ALPHA1, "alpha"),
    ] {
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(client.clone(), &ns.name, &asts::resource(version));
        let obj: kube::api::DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/{version}", kruise_api::keys::APPS_GROUP),
            "kind": "StatefulSet",
            "metadata": {"name": name},
            "spec": {
                "serviceName": name,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": image("testapp", "v1")}]}}
            }
        }))
        .expect("object");
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create");
        let got = api.get(name).await.expect("get");
        let spec = &got.data["spec"];
        assert_eq!(spec["replicas"], 1, "{version} replicas");
        assert_eq!(spec["podManagementPolicy"], "OrderedReady", "{version}");
        assert_eq!(spec["revisionHistoryLimit"], 10, "{version}");
        assert_eq!(spec["updateStrategy"]["type"], "RollingUpdate", "{version}");
        let ru = &spec["updateStrategy"]["rollingUpdate"];
        assert_eq!(ru["partition"], 0, "{version}");
        assert_eq!(ru["maxUnavailable"], 1, "{version}");
        assert_eq!(ru["podUpdatePolicy"], "ReCreate", "{version}");
        assert_eq!(
            spec["template"]["spec"]["restartPolicy"], "Always",
            "{version} template defaults"
        );
        if version == kruise_api::keys::VERSION_V1BETA1 {
            assert_eq!(
                spec["persistentVolumeClaimRetentionPolicy"],
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
            );
        }
    }
    ns.delete().await.expect("cleanup");
}

const HOLD_DELETE: &str = "example.io/hold-delete";
const HOLD_UPDATE: &str = "example.io/hold-update";

/// A set whose template carries `label: "true"`, the label handler of the lifecycle `hook`
/// (`preDelete` or `inPlaceUpdate`).
fn hooked_set(
    hook: &str,
    label: &str,
    replicas: i32,
    spec: serde_json::Value,
) -> kube::api::DynamicObject {
    let mut extra = spec;
    extra["lifecycle"] = json!({hook: {"labelsHandler": {label: "true"}}});
    let mut sts = asts::new("web", replicas, "v1", false, extra).expect("sts");
    sts.data["spec"]["template"]["metadata"]["labels"][label] = json!("true");
    sts
}

fn lifecycle_state(p: &Pod) -> String {
    p.labels()
        .get(kruise_api::keys::LIFECYCLE_STATE_LABEL)
        .cloned()
        .unwrap_or_default()
}

async fn wait_lifecycle(pods: &Api<Pod>, name: &str, state: &str) -> Pod {
    wait_for(&format!("{name} in lifecycle {state}"), ROLLOUT, || async {
        let p = pods.get(name).await?;
        Ok((lifecycle_state(&p) == state).then_some(p))
    })
    .await
    .expect("lifecycle state")
}

/// Removes the hook's label from one Pod, as the user (or their operator) releases it.
async fn release(pods: &Api<Pod>, name: &str, label: &str) {
    pods.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {label: null}}})),
    )
    .await
    .expect("remove the hook label");
}

/// lifecycle.preDelete: scaling 2 → 1 moves web-1 to PreparingDelete and keeps it (same UID,
/// not terminating) while its hook label is on it; removing the label lets the deletion go.
#[tokio::test]
async fn pre_delete_hook_holds_a_scale_down_until_the_label_is_removed() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-predelete")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = hooked_set(
        "preDelete",
        HOLD_DELETE,
        2,
        json!({"podManagementPolicy": "Parallel"}),
    );
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rolled out");
    let uid = pods.get("web-1").await.expect("web-1").uid();

    patch(&api, "web", json!({"spec": {"replicas": 1}})).await;
    wait_lifecycle(&pods, "web-1", "PreparingDelete").await;
    // Give the controller several reconciles to (wrongly) delete it.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let held = pods.get("web-1").await.expect("web-1 still there");
    assert_eq!(held.uid(), uid, "same Pod");
    assert!(
        held.metadata.deletion_timestamp.is_none(),
        "the preDelete hook holds web-1"
    );
    assert_eq!(lifecycle_state(&held), "PreparingDelete");

    release(&pods, "web-1", HOLD_DELETE).await;
    wait_for("web-1 deleted", ROLLOUT, || async {
        let gone = match pods.get_opt("web-1").await? {
            None => true,
            Some(p) => p.metadata.deletion_timestamp.is_some() || p.uid() != uid,
        };
        Ok(gone.then_some(()))
    })
    .await
    .expect("released web-1 is deleted");
    asts::wait_rolled_out(&api, "web", 1, ROLLOUT)
        .await
        .expect("scaled down");
    ns.delete().await.expect("cleanup");
}

/// lifecycle.inPlaceUpdate: an image change moves the highest ordinal to PreparingUpdate and
/// leaves it (and every lower one) at the old image while its hook label is on; released, it
/// is updated in place (same UID, one restart) and the next ordinal is held in turn.
#[tokio::test]
async fn in_place_update_hook_holds_an_ordinal_until_released() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-preupdate")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let sts = hooked_set(
        "inPlaceUpdate",
        HOLD_UPDATE,
        2,
        json!({"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
            "podUpdatePolicy": "InPlaceIfPossible"}}}),
    );
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rolled out");
    let before = uids(&asts::pods(&pods, "web").await.expect("pods"));

    set_image(&api, "web", "v2").await;
    wait_lifecycle(&pods, "web-1", "PreparingUpdate").await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    for p in asts::pods(&pods, "web").await.expect("pods") {
        assert_eq!(
            app_image(&p),
            image("testapp", "v1"),
            "{} held by the hook",
            p.name_any()
        );
        assert_eq!(restarts(&p), 0, "{}", p.name_any());
    }

    release(&pods, "web-1", HOLD_UPDATE).await;
    let updated = wait_for("web-1 updated in place", ROLLOUT, || async {
        let p = pods.get("web-1").await?;
        Ok((app_image(&p) == image("testapp", "v2") && restarts(&p) == 1).then_some(p))
    })
    .await
    .expect("released web-1 updates");
    assert_eq!(updated.uid().as_ref(), before.get("web-1"), "in place");
    let web0 = wait_lifecycle(&pods, "web-0", "PreparingUpdate").await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let web0_now = pods.get("web-0").await.expect("web-0");
    assert_eq!(app_image(&web0_now), image("testapp", "v1"), "web-0 held");
    assert_eq!(web0_now.uid(), web0.uid());

    release(&pods, "web-0", HOLD_UPDATE).await;
    asts::wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("rollout finishes");
    // The status counts web-0 updated from the patch on; its container restarts a moment later.
    let list = wait_for("web-0 restarted on v2", ROLLOUT, || async {
        let list = asts::pods(&pods, "web").await?;
        Ok(list
            .iter()
            .all(|p| app_image(p) == image("testapp", "v2") && restarts(p) >= 1)
            .then_some(list))
    })
    .await
    .expect("every Pod restarted on v2");
    assert_eq!(uids(&list), before, "same Pods");
    for p in &list {
        assert_eq!(restarts(p), 1, "{} restarted once", p.name_any());
        assert_eq!(app_image(p), image("testapp", "v2"));
    }
    ns.delete().await.expect("cleanup");
}

/// unorderedUpdate.priorityStrategy (Parallel): with weights on labels the user put on the
/// Pods, the update goes web-0 (weight 100), web-1 (50), then web-2, not highest ordinal first.
#[tokio::test]
async fn weight_priority_decides_the_update_order() {
    let _manager = MANAGER.read().await;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-asts-priority")
        .await
        .expect("ns");
    asts::create_headless_service(&client, &ns.name, "web")
        .await
        .expect("svc");
    let api = asts::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let weight =
        |tier: &str, w: i32| json!({"weight": w, "matchSelector": {"matchLabels": {"tier": tier}}});
    let sts = asts::new(
        "web",
        3,
        "v1",
        false,
        json!({"podManagementPolicy": "Parallel",
               "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
                   "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1,
                   "unorderedUpdate": {"priorityStrategy": {"weightPriority": [
                       weight("high", 100), weight("mid", 50)]}}}}}),
    )
    .expect("sts");
    api.create(&PostParams::default(), &sts)
        .await
        .expect("create");
    asts::wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("rolled out");
    for (pod, tier) in [("web-0", "high"), ("web-1", "mid")] {
        pods.patch(
            pod,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"tier": tier}}})),
        )
        .await
        .expect("label pod");
    }
    let before = uids(&asts::pods(&pods, "web").await.expect("pods"));

    set_image(&api, "web", "v2").await;
    let mut order: Vec<String> = Vec::new();
    let start = Instant::now();
    while order.len() < 3 && start.elapsed() < ROLLOUT {
        for p in asts::pods(&pods, "web").await.expect("pods") {
            if app_image(&p) == image("testapp", "v2") && !order.contains(&p.name_any()) {
                order.push(p.name_any());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(order, ["web-0", "web-1", "web-2"], "update order by weight");
    asts::wait_rolled_out(&api, "web", 3, ROLLOUT)
        .await
        .expect("finished");
    let list = asts::pods(&pods, "web").await.expect("pods");
    assert_eq!(uids(&list), before, "in place");
    assert!(list.iter().all(|p| restarts(p) == 1));
    ns.delete().await.expect("cleanup");
}
