//! SidecarTerminator on the real kubelet, installed from `deploy/` (gate on as shipped): a Job
//! whose sidecar never exits by itself completes once its main container exits, the sidecar
//! killed (not restarted) through upstream's ContainerRecreateRequest; with
//! `KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE` the Job's result follows the main container
//! whatever the sidecar's exit code; without it a sidecar killed with a non-zero code fails the
//! Pod, as upstream (`test/e2e/apps/v1alpha1/sidecarterminator.go`).

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::sidecarterminator::{
    IGNORE_EXIT_CODE, TERMINATE, idler, job, phase, pod, pod_events, restarts, stubborn,
    terminated, wait_finished,
};
use kruise_e2e::{TestNamespace, client, pod_condition};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

/// A Pod of a cached image runs, its sidecar is killed (2 s grace) and the Job controller
/// notices, on a loaded 2-core node.
const FINISH: Duration = Duration::from_secs(90);

fn crrs(client: &Client, ns: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            keys::APPS_GROUP,
            keys::VERSION_V1BETA1,
            "ContainerRecreateRequest",
        ),
        "containerrecreaterequests",
    );
    Api::namespaced_with(client.clone(), ns, &ar)
}

/// The Pod's request exists under upstream's name, owned by the Pod, asking to kill the sidecar
/// without a restart policy of its own (forceRecreate, failurePolicy Ignore).
async fn assert_request(client: &Client, ns: &str, p: &Pod) {
    let uid = p.uid().expect("uid");
    let name = format!("{}{uid}", keys::SIDECAR_TERMINATION_CRR_PREFIX);
    let crr = crrs(client, ns).get(&name).await.expect("the Pod's CRR");
    let owners = crr.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(
        (owners[0].kind.as_str(), owners[0].uid.as_str()),
        ("Pod", uid.as_str())
    );
    assert_eq!(owners[0].controller, Some(true));
    assert_eq!(crr.data["spec"]["podName"], p.name_any());
    assert_eq!(crr.data["spec"]["containers"][0]["name"], "sidecar");
    assert_eq!(
        crr.data["spec"]["containers"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        (
            &crr.data["spec"]["strategy"]["forceRecreate"],
            &crr.data["spec"]["strategy"]["failurePolicy"]
        ),
        (&json!(true), &json!("Ignore"))
    );
    assert_eq!(
        crr.labels().get(keys::CRR_POD_UID_LABEL),
        Some(&uid),
        "admitted by the CRR webhook"
    );
}

async fn create(api: &Api<Job>, j: &Job) {
    api.create(&PostParams::default(), j)
        .await
        .expect("create Job");
}

#[tokio::test]
async fn a_job_completes_once_its_main_container_exits() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-st-complete")
        .await
        .expect("ns");
    let jobs: Api<Job> = ns.api();
    let pods: Api<Pod> = ns.api();
    // The idler never exits by itself; SIGTERM ends it with 0.
    for (name, policy) in [("never", "Never"), ("onfailure", "OnFailure")] {
        create(
            &jobs,
            &job(name, policy, "sleep 3", idler(&[TERMINATE])).expect("job"),
        )
        .await;
    }
    for name in ["never", "onfailure"] {
        let (cond, j) = wait_finished(&jobs, name, FINISH).await.expect("finished");
        assert_eq!(cond, "Complete", "{name}: {:?}", j.status);
        let st = j.status.clone().unwrap_or_default();
        assert_eq!(
            (st.succeeded, st.failed.unwrap_or(0)),
            (Some(1), 0),
            "{name}"
        );
        let p = pod(&pods, name).await.expect("pod");
        assert_eq!(phase(&p), "Succeeded", "{name}");
        assert_eq!(terminated(&p, "main").exit_code, 0, "{name}");
        assert_eq!(
            terminated(&p, "sidecar").exit_code,
            0,
            "{name}: stopped by SIGTERM"
        );
        assert_eq!(restarts(&p, "sidecar"), 0, "{name}: killed, not restarted");
        assert_eq!(
            pod_condition(&p, keys::SIDECAR_TERMINATED_CONDITION),
            None,
            "{name}"
        );
        assert_request(&client, &ns.name, &p).await;
        let notes = pod_events(
            &client,
            &ns.name,
            &p.name_any(),
            keys::REASON_SIDECAR_TERMINATOR,
        )
        .await
        .expect("events");
        assert!(
            notes
                .iter()
                .any(|n| n.contains("[sidecar]") && n.contains("crr")),
            "{name}: {notes:?}"
        );
    }
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn ignoring_the_exit_code_the_job_follows_the_main_container() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-st-ignore")
        .await
        .expect("ns");
    let jobs: Api<Job> = ns.api();
    let pods: Api<Pod> = ns.api();
    // This sidecar ignores SIGTERM: only a SIGKILL ends it, with a non-zero code.
    let sidecar = || stubborn(&[TERMINATE, IGNORE_EXIT_CODE]);
    create(
        &jobs,
        &job("ok", "Never", "sleep 3", sidecar()).expect("job"),
    )
    .await;
    create(
        &jobs,
        &job("bad", "Never", "sleep 3; exit 3", sidecar()).expect("job"),
    )
    .await;
    for (name, want_cond, want_phase, main_code) in [
        ("ok", "Complete", "Succeeded", 0),
        ("bad", "Failed", "Failed", 3),
    ] {
        let (cond, j) = wait_finished(&jobs, name, FINISH).await.expect("finished");
        assert_eq!(cond, want_cond, "{name}: {:?}", j.status);
        let st = j.status.clone().unwrap_or_default();
        let counts = (st.succeeded.unwrap_or(0), st.failed.unwrap_or(0));
        assert_eq!(
            counts,
            if main_code == 0 { (1, 0) } else { (0, 1) },
            "{name}"
        );
        let p = pod(&pods, name).await.expect("pod");
        // The kubelet may write back a status it computed before the phase was set (phase
        // Running for a moment, as on upstream); the controller sets it again while the sidecar
        // runs. Wait for where the Pod ends: the phase set and the sidecar's end reported.
        let p = kruise_e2e::wait_pod(&pods, &p.name_any(), want_phase, FINISH, |p| {
            phase(p) == want_phase
                && kruise_e2e::container_status(p, "sidecar")
                    .and_then(|s| s.state.as_ref()?.terminated.as_ref())
                    .is_some()
        })
        .await
        .expect("final state");
        assert_eq!(
            pod_condition(&p, keys::SIDECAR_TERMINATED_CONDITION),
            Some("True"),
            "{name}"
        );
        assert_eq!(terminated(&p, "main").exit_code, main_code, "{name}");
        assert_ne!(terminated(&p, "sidecar").exit_code, 0, "{name}: killed");
        // With every container ended, nothing moves the phase any more.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let later = pods.get(&p.name_any()).await.expect("pod");
        assert_eq!(phase(&later), want_phase, "{name}: the phase stays");
        assert_eq!(restarts(&p, "sidecar"), 0, "{name}: not restarted");
        assert_request(&client, &ns.name, &p).await;
    }
    ns.delete().await.expect("delete ns");
}

#[tokio::test]
async fn without_ignoring_the_exit_code_a_killed_sidecar_fails_the_job_as_upstream() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-st-exitcode")
        .await
        .expect("ns");
    let jobs: Api<Job> = ns.api();
    let pods: Api<Pod> = ns.api();
    create(
        &jobs,
        &job("j", "Never", "sleep 3", stubborn(&[TERMINATE])).expect("job"),
    )
    .await;
    let (cond, j) = wait_finished(&jobs, "j", FINISH).await.expect("finished");
    assert_eq!(cond, "Failed", "{:?}", j.status);
    let p = pod(&pods, "j").await.expect("pod");
    assert_eq!(phase(&p), "Failed");
    assert_eq!(
        terminated(&p, "main").exit_code,
        0,
        "the main container succeeded"
    );
    assert_eq!(
        terminated(&p, "sidecar").exit_code,
        137,
        "SIGKILL after the grace period"
    );
    assert_eq!(restarts(&p, "sidecar"), 0);
    assert_eq!(pod_condition(&p, keys::SIDECAR_TERMINATED_CONDITION), None);
    assert_request(&client, &ns.name, &p).await;
    ns.delete().await.expect("delete ns");
}
