//! PodProbeMarker on the real kubelet and containerd, installed from `deploy/`: the daemon runs
//! the marker's exec, tcp and http probes and the manager marks the Pod (labels, annotations,
//! conditions); an exec probe made to fail (a file removed through exec) flips the Pod to the
//! Failed markers within period × threshold, the Pod never restarted; a probe for a missing
//! container gives an Event; a deleted Pod and a deleted marker leave the NodePodProbe (the
//! marker held by upstream's cleanup finalizer until then); bad input is refused naming the
//! field; an HTTPS probe marks a Pod without verifying the serving certificate.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, Pod};
use kruise_api::apps::v1alpha1::podprobemarker::REASON_CONTAINER_NOT_FOUND;
use kruise_api::keys;
use kruise_e2e::podprobemarker::{self, listed_probes, node_pod_probe, testapp_pod};
use kruise_e2e::{TestNamespace, client, pod_condition, wait_for};
use kube::ResourceExt;
use kube::api::{Api, AttachParams, DeleteParams, ListParams, PostParams};
use serde_json::json;

/// Marks appear within a few periods of 1 s; generous for a loaded 2-core node.
const MARK: Duration = Duration::from_secs(60);
const HEALTHY: &str = "e2e.kruise.io/healthy";

fn label<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.labels().get(key).map(String::as_str)
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(-1)
}

fn probes() -> serde_json::Value {
    let cond = |name: &str, probe: serde_json::Value| {
        json!({"name": name, "containerName": "main", "probe": probe,
            "podConditionType": format!("e2e.kruise.io/{name}")})
    };
    let fast = |handler: serde_json::Value| {
        let mut p = json!({"periodSeconds": 1, "failureThreshold": 1});
        for (k, v) in handler.as_object().into_iter().flatten() {
            p[k] = v.clone();
        }
        p
    };
    json!([
        {"name": "healthy", "containerName": "main",
            "probe": {"exec": {"command": ["test", "-f", "/tmp/ok"]}, "periodSeconds": 1,
                "failureThreshold": 2},
            "markerPolicy": [
                {"state": "Succeeded", "labels": {"healthy": "true"}},
                {"state": "Failed", "labels": {"healthy": "false"},
                    "annotations": {"controller.kubernetes.io/pod-deletion-cost": "-10"}}],
            "podConditionType": HEALTHY},
        cond("tcp-open", fast(json!({"tcpSocket": {"port": 8080}}))),
        cond("tcp-closed", fast(json!({"tcpSocket": {"port": 8081}}))),
        cond("http-open", fast(json!({"httpGet": {"port": 8080, "path": "/"}}))),
        cond("http-closed", fast(json!({"httpGet": {"port": 8081}}))),
        {"name": "ghost", "containerName": "nope", "probe": {"exec": {"command": ["true"]}},
            "podConditionType": "e2e.kruise.io/ghost"},
    ])
}

#[tokio::test]
async fn probes_mark_the_pod_flip_on_failure_and_leave_with_the_pod_and_marker() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ppm").await.expect("ns");
    let pods: Api<Pod> = ns.api();
    let p1 = testapp_pod(&pods, "p1", "ppm").await.expect("p1");
    let p2 = testapp_pod(&pods, "p2", "ppm").await.expect("p2");
    let api = podprobemarker::api(&client, &ns.name);
    let m = podprobemarker::marker("m", "ppm", probes()).expect("marker");
    let created = api
        .create(&PostParams::default(), &m)
        .await
        .expect("create");
    assert_eq!(
        created.data["spec"]["probes"][0]["probe"]["successThreshold"], 1,
        "defaulted by the webhook"
    );

    let marked = wait_for("p1 marked by every probe", MARK, || async {
        let p = pods.get("p1").await?;
        let want = [
            (HEALTHY, "True"),
            ("e2e.kruise.io/tcp-open", "True"),
            ("e2e.kruise.io/tcp-closed", "False"),
            ("e2e.kruise.io/http-open", "True"),
            ("e2e.kruise.io/http-closed", "False"),
        ];
        let ok = label(&p, "healthy") == Some("true")
            && want.iter().all(|(t, s)| pod_condition(&p, t) == Some(*s));
        Ok(ok.then_some(p))
    })
    .await
    .expect("marked");
    assert_eq!(marked.uid(), p1.uid());
    assert_eq!(
        pod_condition(&marked, "e2e.kruise.io/ghost"),
        None,
        "no container, no probe"
    );
    // Upstream's finalizer, added by the controller (upstream's three specs check it first).
    wait_for("the marker's cleanup finalizer", MARK, || async {
        let m = api.get("m").await?;
        Ok(m.finalizers()
            .iter()
            .any(|f| f == keys::PODPROBEMARKER_FINALIZER)
            .then_some(()))
    })
    .await
    .expect("finalizer");

    // The node's NodePodProbe lists the Pod with its IP and `<marker>#<probe>` names.
    let node = marked
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("node");
    let npp = node_pod_probe(&client, &node)
        .await
        .expect("get")
        .expect("NodePodProbe");
    let uid = marked.uid().expect("uid");
    let entry = npp["spec"]["podProbes"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["uid"] == uid.as_str()))
        .expect("p1 listed");
    let ip = marked.status.as_ref().and_then(|s| s.pod_ip.clone());
    assert_eq!(entry["IP"].as_str(), ip.as_deref());
    assert_eq!(
        listed_probes(&npp, &uid),
        [
            "m#healthy",
            "m#tcp-open",
            "m#tcp-closed",
            "m#http-open",
            "m#http-closed"
        ]
    );

    // Fail the exec probe: the Failed markers replace the Succeeded ones within
    // period (1 s) × failureThreshold (2), plus the write path's latency.
    let mut rm = pods
        .exec(
            "p1",
            ["rm", "/tmp/ok"],
            &AttachParams::default().stderr(false),
        )
        .await
        .expect("exec");
    let status = rm.take_status().expect("exec status");
    let status = status.await.expect("exec ended");
    assert_eq!(status.status.as_deref(), Some("Success"), "rm: {status:?}");
    rm.join().await.expect("rm");
    let start = Instant::now();
    let failed = wait_for("p1 marked Failed", MARK, || async {
        let p = pods.get("p1").await?;
        let ok =
            label(&p, "healthy") == Some("false") && pod_condition(&p, HEALTHY) == Some("False");
        Ok(ok.then_some(p))
    })
    .await
    .expect("flipped");
    assert!(
        start.elapsed() < Duration::from_secs(15),
        "flipped after {:?}",
        start.elapsed()
    );
    assert_eq!(
        failed
            .annotations()
            .get("controller.kubernetes.io/pod-deletion-cost")
            .map(String::as_str),
        Some("-10")
    );
    assert_eq!(failed.uid(), p1.uid(), "the Pod was not recreated");
    assert_eq!(
        restarts(&failed),
        restarts(&p1),
        "the probe never restarts a container"
    );

    // The missing container is reported on the Pod.
    let events: Api<Event> = ns.api();
    wait_for("ProbeContainerNotFound Event", MARK, || async {
        let lp = ListParams::default().fields("involvedObject.name=p1");
        let found = events
            .list(&lp)
            .await?
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some(REASON_CONTAINER_NOT_FOUND));
        Ok(found.then_some(()))
    })
    .await
    .expect("event");

    // A deleted Pod leaves the NodePodProbe; a deleted marker takes its probes along.
    pods.delete("p1", &DeleteParams::default())
        .await
        .expect("delete p1");
    let p2_uid = p2.uid().expect("uid");
    let p2_node = p2
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("node");
    wait_for("p1 gone from the NodePodProbe", MARK, || async {
        let npp = node_pod_probe(&client, &node).await?.unwrap_or_default();
        Ok(listed_probes(&npp, &uid).is_empty().then_some(()))
    })
    .await
    .expect("pod gone");
    let npp = node_pod_probe(&client, &p2_node)
        .await
        .expect("get")
        .expect("npp");
    assert!(!listed_probes(&npp, &p2_uid).is_empty(), "p2 still probed");
    api.delete("m", &DeleteParams::default())
        .await
        .expect("delete m");
    wait_for("p2's probes gone with the marker", MARK, || async {
        let npp = node_pod_probe(&client, &p2_node).await?.unwrap_or_default();
        Ok(listed_probes(&npp, &p2_uid).is_empty().then_some(()))
    })
    .await
    .expect("marker gone");
    // The probes off, the finalizer goes and the marker with it.
    wait_for("the marker deleted", MARK, || async {
        Ok(api.get_opt("m").await?.is_none().then_some(()))
    })
    .await
    .expect("marker deleted");
    ns.delete().await.expect("cleanup");
}

#[tokio::test]
async fn bad_markers_are_refused_naming_the_field() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ppm-bad")
        .await
        .expect("ns");
    let api = podprobemarker::api(&client, &ns.name);
    let good = || {
        json!({"name": "ok", "containerName": "main",
            "probe": {"exec": {"command": ["true"]}}, "podConditionType": "e2e.kruise.io/ok"})
    };
    let with = |k: &str, v: serde_json::Value| {
        let mut p = good();
        p[k] = v;
        json!([p])
    };
    let cases = [
        (json!([good(), good()]), "spec.probes[1].name"),
        (with("name", json!("a#b")), "spec.probes[0].name"),
        (with("name", json!("Ready")), "spec.probes[0].name"),
        (
            with("podConditionType", json!(null)),
            "spec.probes[0].podConditionType",
        ),
        (
            with("probe", json!({"periodSeconds": 1})),
            "spec.probes[0].probe",
        ),
    ];
    for (probes, field) in cases {
        let m = podprobemarker::marker("bad", "x", probes).expect("marker");
        let err = api
            .create(&PostParams::default(), &m)
            .await
            .expect_err("refused");
        assert!(err.to_string().contains(field), "{field}: {err}");
    }
    // The selector is immutable.
    let m = podprobemarker::marker("sel", "x", json!([good()])).expect("marker");
    api.create(&PostParams::default(), &m)
        .await
        .expect("create");
    let patch = json!({"spec": {"selector": {"matchLabels": {"app": "y"}}}});
    let err = api
        .patch(
            "sel",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect_err("immutable");
    assert!(err.to_string().contains("spec.selector"), "{err}");
    ns.delete().await.expect("cleanup");
}

/// An httpGet probe with `scheme: HTTPS` (upstream admits it and probes with the kubelet's
/// prober: TLS, the serving certificate not verified). The HTTPS server is a container the
/// cluster already runs: the manager's webhook (`/healthz` on :9876, a certificate for the
/// webhook Service's name, not the Pod IP dialled), named by the probe's `host`. The same port
/// probed as plain HTTP fails, so the True condition comes from a TLS exchange.
#[tokio::test]
async fn an_https_probe_marks_the_pod_without_verifying_the_certificate() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ppm-tls")
        .await
        .expect("ns");
    let managers: Api<Pod> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let lp = ListParams::default().labels(kruise_e2e::mode::MANAGER_POD_SELECTOR);
    let ip = managers
        .list(&lp)
        .await
        .expect("manager Pods")
        .items
        .into_iter()
        .filter(kruise_e2e::pod_ready)
        .find_map(|p| p.status.and_then(|s| s.pod_ip))
        .expect("a Ready manager Pod with an IP");
    let pods: Api<Pod> = ns.api();
    testapp_pod(&pods, "p", "tls").await.expect("pod");
    let get = |scheme: &str| {
        json!({"httpGet": {"host": ip, "port": 9876, "path": keys::WEBHOOK_HEALTHZ_PATH,
            "scheme": scheme}, "periodSeconds": 1, "failureThreshold": 1})
    };
    let probes = json!([
        {"name": "tls", "containerName": "main", "probe": get("HTTPS"),
            "markerPolicy": [{"state": "Succeeded", "labels": {"tls": "ok"}}],
            "podConditionType": "e2e.kruise.io/tls"},
        {"name": "plain", "containerName": "main", "probe": get("HTTP"),
            "podConditionType": "e2e.kruise.io/plain"},
    ]);
    let api = podprobemarker::api(&client, &ns.name);
    let m = podprobemarker::marker("m", "tls", probes).expect("marker");
    api.create(&PostParams::default(), &m)
        .await
        .expect("an HTTPS probe is admitted");
    wait_for("the HTTPS probe True, plain HTTP False", MARK, || async {
        let p = pods.get("p").await?;
        let ok = pod_condition(&p, "e2e.kruise.io/tls") == Some("True")
            && pod_condition(&p, "e2e.kruise.io/plain") == Some("False")
            && label(&p, "tls") == Some("ok");
        Ok(ok.then_some(()))
    })
    .await
    .expect("marked by the HTTPS probe");
    ns.delete().await.expect("cleanup");
}

/// The label, condition status and condition transition time a probe left on a Pod.
fn mark_of(p: &Pod) -> (Option<String>, Option<String>, Option<String>) {
    let cond = p
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == HEALTHY));
    (
        label(p, "healthy").map(str::to_owned),
        cond.map(|c| c.status.clone()),
        cond.and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.to_string()),
    )
}

async fn exec_ok(pods: &Api<Pod>, pod: &str, cmd: &[&str]) {
    let mut run = pods
        .exec(pod, cmd.to_vec(), &AttachParams::default().stderr(false))
        .await
        .expect("exec");
    let status = run.take_status().expect("exec status");
    let status = status.await.expect("exec ended");
    assert_eq!(
        status.status.as_deref(),
        Some("Success"),
        "{cmd:?}: {status:?}"
    );
    run.join().await.expect("exec joined");
}

/// The daemon killed (SIGKILL, its Pod replaced) while it probes, the probe's file removed while
/// it is down: the new daemon resumes from the NodePodProbe and the Pod goes Succeeded → Failed
/// exactly once — the transition neither lost nor doubled (a re-reported Succeeded keeps its
/// transition time, no Unknown or missing condition in between) — and the Pod never restarts.
#[tokio::test]
async fn serial_daemon_killed_mid_probe_resumes_without_lost_or_doubled_transitions() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ppm-kill")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    let p1 = testapp_pod(&pods, "p1", "ppm-kill").await.expect("p1");
    let probe = json!([{"name": "healthy", "containerName": "main",
        "probe": {"exec": {"command": ["test", "-f", "/tmp/ok"]}, "periodSeconds": 1,
            "failureThreshold": 2},
        "markerPolicy": [{"state": "Succeeded", "labels": {"healthy": "true"}},
            {"state": "Failed", "labels": {"healthy": "false"}}],
        "podConditionType": HEALTHY}]);
    let api = podprobemarker::api(&client, &ns.name);
    api.create(
        &PostParams::default(),
        &podprobemarker::marker("m", "ppm-kill", probe).expect("marker"),
    )
    .await
    .expect("create");
    let first = wait_for("p1 marked Succeeded", MARK, || async {
        let p = pods.get("p1").await?;
        let m = mark_of(&p);
        Ok((m.0.as_deref() == Some("true") && m.1.as_deref() == Some("True")).then_some(m))
    })
    .await
    .expect("marked");

    // Every distinct mark the Pod shows from here on, in order.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(vec![first.clone()]));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let recorder = {
        let (pods, seen, stop) = (pods.clone(), seen.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(p) = pods.get("p1").await {
                    let m = mark_of(&p);
                    let mut seen = seen.lock().expect("lock");
                    if seen.last() != Some(&m) {
                        seen.push(m);
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    kruise_e2e::mode::crash_daemon(&client, async || {
        exec_ok(&pods, "p1", &["rm", "/tmp/ok"]).await;
    })
    .await
    .expect("the daemon is killed and comes back");
    let failed = wait_for("p1 marked Failed by the new daemon", MARK, || async {
        let p = pods.get("p1").await?;
        let m = mark_of(&p);
        Ok((m.0.as_deref() == Some("false") && m.1.as_deref() == Some("False")).then_some(p))
    })
    .await
    .expect("flipped");
    // Settled: a few more periods bring no further change.
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    recorder.await.expect("recorder");
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 2, "exactly one transition: {seen:?}");
    assert_eq!(seen[1], mark_of(&failed), "{seen:?}");
    assert_ne!(
        seen[1].2, first.2,
        "the condition's transition time moved once"
    );
    assert_eq!(failed.uid(), p1.uid(), "the Pod was not recreated");
    assert_eq!(restarts(&failed), restarts(&p1), "no container restarted");

    // The NodePodProbe holds one state for the probe, Failed.
    let node = failed
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("node");
    let npp = node_pod_probe(&client, &node)
        .await
        .expect("get")
        .expect("NodePodProbe");
    let uid = failed.uid().expect("uid");
    let states: Vec<&serde_json::Value> = npp["status"]["podProbeStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["uid"] == uid.as_str())
        .flat_map(|s| s["probeStates"].as_array().into_iter().flatten())
        .filter(|s| s["name"] == "m#healthy")
        .collect();
    assert_eq!(states.len(), 1, "{npp}");
    assert_eq!(states[0]["state"], "Failed", "{npp}");
    ns.delete().await.expect("cleanup");
}

/// A marker steering a CloneSet's in-place update (the use upstream documents): the probe labels
/// the Pod holding `/tmp/primary` `role=primary`, the others `role=secondary`, and a weight
/// priority on `role=primary` updates that Pod first — with a partition letting one Pod through,
/// the primary is the one updated (in place: same UID, one restart), although it is the Pod the
/// default order would take last (the one Ready longest).
#[tokio::test]
async fn a_marker_label_steers_the_cloneset_update_order() {
    use kruise_e2e::cloneset;
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-ppm-order")
        .await
        .expect("ns");
    let pods: Api<Pod> = ns.api();
    let sets = cloneset::api(&client, &ns.name);
    let name = "game";
    let strategy = json!({"type": "RollingUpdate",
        "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}});
    sets.create(
        &PostParams::default(),
        &cloneset::new(name, 1, "v1", strategy).expect("CloneSet"),
    )
    .await
    .expect("create");
    cloneset::wait_rolled_out(&sets, name, 1, MARK)
        .await
        .expect("one Pod");
    let oldest = cloneset::pods(&pods, name).await.expect("pods")[0].clone();
    // Later Pods become Ready later: the oldest one is last in the default update order.
    tokio::time::sleep(Duration::from_secs(2)).await;
    cloneset::patch_spec(&sets, name, json!({"replicas": 3}))
        .await
        .expect("scale");
    cloneset::wait_rolled_out(&sets, name, 3, MARK)
        .await
        .expect("three Pods");
    exec_ok(&pods, &oldest.name_any(), &["touch", "/tmp/primary"]).await;
    let probe = json!([{"name": "role", "containerName": "app",
        "probe": {"exec": {"command": ["test", "-f", "/tmp/primary"]}, "periodSeconds": 1},
        "markerPolicy": [{"state": "Succeeded", "labels": {"role": "primary"}},
            {"state": "Failed", "labels": {"role": "secondary"}}]}]);
    podprobemarker::api(&client, &ns.name)
        .create(
            &PostParams::default(),
            &podprobemarker::marker("role", name, probe).expect("marker"),
        )
        .await
        .expect("create marker");
    let before = wait_for("the Pods marked by role", MARK, || async {
        let ps = cloneset::pods(&pods, name).await?;
        let roles: Vec<Option<&str>> = ps.iter().map(|p| label(p, "role")).collect();
        let primaries = roles.iter().filter(|r| **r == Some("primary")).count();
        let secondaries = roles.iter().filter(|r| **r == Some("secondary")).count();
        Ok((primaries == 1 && secondaries == 2).then_some(ps))
    })
    .await
    .expect("marked");
    let primary = before
        .iter()
        .find(|p| label(p, "role") == Some("primary"))
        .expect("primary");
    assert_eq!(
        primary.uid(),
        oldest.uid(),
        "the probe marked the Pod with the file"
    );

    cloneset::json_patch(
        &sets,
        name,
        json!([
            {"op": "add", "path": "/spec/updateStrategy/rollingUpdate/partition", "value": 2},
            {"op": "add", "path": "/spec/updateStrategy/rollingUpdate/priorityStrategy",
                "value": {"weightPriority": [{"weight": 100,
                    "matchSelector": {"matchLabels": {"role": "primary"}}}]}},
            {"op": "replace", "path": "/spec/template/spec/containers/0/image",
                "value": kruise_e2e::image("testapp", "v2")},
        ]),
    )
    .await
    .expect("update");
    let cs = cloneset::wait_status(&sets, name, "one Pod updated and ready", MARK, |cs| {
        cloneset::status_i64(cs, "updatedReadyReplicas") == 1
            && cloneset::status_i64(cs, "readyReplicas") == 3
    })
    .await
    .expect("partitioned rollout");
    let update_rev = cloneset::status_str(&cs, "updateRevision").to_owned();
    let after = cloneset::pods(&pods, name).await.expect("pods");
    let updated: Vec<&Pod> = after
        .iter()
        .filter(|p| cloneset::pod_revision(p) == update_rev)
        .collect();
    assert_eq!(updated.len(), 1, "the partition lets one Pod through");
    assert_eq!(
        updated[0].uid(),
        oldest.uid(),
        "the primary went first, in place"
    );
    assert_eq!(restarts(updated[0]), restarts(primary) + 1, "one restart");
    for p in after.iter().filter(|p| p.uid() != oldest.uid()) {
        let was = before
            .iter()
            .find(|b| b.uid() == p.uid())
            .expect("same Pods");
        assert_eq!(restarts(p), restarts(was), "{} untouched", p.name_any());
    }
    ns.delete().await.expect("cleanup");
}
