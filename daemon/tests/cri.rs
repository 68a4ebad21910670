//! Against a real CRI runtime, so all but the socket-path test (which needs none) are ignored by
//! a plain `cargo test`: `hack/test.sh cri` runs them with `--include-ignored` and
//! KRUISE_CRI_ENDPOINT set to the local cluster's containerd and KUBECONFIG to that cluster (the
//! live-container test runs a Pod there). Without the variable they fail, saying what is missing,
//! rather than pass without testing anything.
//! KRUISE_TEST_IMAGE (default 127.0.0.1:5000/kruise-rs/sidecar:v1) must be pullable and
//! idle until SIGTERM; KRUISE_TEST_MISSING_IMAGE must not exist in its registry.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kruise_daemon::criruntime::labels::CONTAINER_NAME_LABEL;
use kruise_daemon::criruntime::{CriClient, SocketSource, State};
use kube::api::{Api, DeleteParams, PostParams};

fn endpoint() -> Option<String> {
    match std::env::var("KRUISE_CRI_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ => panic!(
            "KRUISE_CRI_ENDPOINT is not set: point it at a CRI socket, e.g. unix:///run/containerd/containerd.sock"
        ),
    }
}

fn test_image() -> String {
    std::env::var("KRUISE_TEST_IMAGE")
        .unwrap_or_else(|_| "127.0.0.1:5000/kruise-rs/sidecar:v1".into())
}

async fn connect(ep: &str) -> CriClient {
    let src = SocketSource::from_flags(Some(ep), None, std::path::Path::new("/var/run")).unwrap();
    CriClient::connect(&src).await.expect("connect to CRI")
}

#[tokio::test]
#[ignore = "needs a CRI runtime: run by hack/test.sh cri"]
async fn version_and_images() {
    let Some(ep) = endpoint() else { return };
    let c = connect(&ep).await;
    assert!(!c.runtime_name().is_empty());
    println!("runtime {} {}", c.runtime_name(), c.runtime_version());
    c.list_images().await.expect("ListImages");
    assert!(
        c.image_status("127.0.0.1:5000/kruise-rs/never-pushed:nope")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn missing_socket_error_names_the_path() {
    let src = SocketSource::from_flags(
        Some("unix:///nonexistent/cri.sock"),
        None,
        std::path::Path::new("/x"),
    )
    .unwrap();
    let err = CriClient::connect(&src).await.unwrap_err().to_string();
    assert!(err.contains("/nonexistent/cri.sock"), "{err}");
    let src =
        SocketSource::from_flags(None, None, std::path::Path::new("/nonexistent-run")).unwrap();
    let err = CriClient::connect(&src).await.unwrap_err().to_string();
    assert!(err.contains("/nonexistent-run/containerd.sock"), "{err}");
}

#[tokio::test]
#[ignore = "needs a CRI runtime: run by hack/test.sh cri"]
async fn pull_reports_the_image_id_of_image_status() {
    let Some(ep) = endpoint() else { return };
    let c = connect(&ep).await;
    let image = test_image();
    let r = c
        .pull_image(
            &image,
            None,
            HashMap::new(),
            HashMap::new(),
            Duration::from_secs(120),
        )
        .await
        .expect("PullImage");
    let st = c
        .image_status(&image)
        .await
        .unwrap()
        .expect("image present after pull");
    assert!(st.id.starts_with("sha256:"), "{}", st.id);
    println!("pulled {image}: ref {r}, id {}", st.id);
    assert!(c.list_images().await.unwrap().iter().any(|i| i.id == st.id));
}

#[tokio::test]
#[ignore = "needs a CRI runtime: run by hack/test.sh cri"]
async fn failed_pull_carries_the_registry_error() {
    let Some(ep) = endpoint() else { return };
    let c = connect(&ep).await;
    let missing = std::env::var("KRUISE_TEST_MISSING_IMAGE")
        .unwrap_or_else(|_| "127.0.0.1:5000/kruise-rs/testapp:no-such-tag".into());
    let err = c
        .pull_image(
            &missing,
            None,
            HashMap::new(),
            HashMap::new(),
            Duration::from_secs(60),
        )
        .await
        .unwrap_err();
    println!("registry said: {}", err.message());
    assert!(err.message().contains("not found"), "{}", err.message());
}

// The container comes from a Pod the kubelet runs, as every container the daemon acts on does. A
// sandbox made here directly would be an unknown running Pod to the node's kubelet, which kills
// those in its housekeeping (every 2 s): the test once lost its sandbox between RunPodSandbox and
// StartContainer that way.
#[tokio::test]
#[ignore = "needs a CRI runtime: run by hack/test.sh cri"]
async fn exec_and_stop_a_real_container() {
    let Some(ep) = endpoint() else { return };
    let c = connect(&ep).await;
    let client = kube::Client::try_default()
        .await
        .expect("a kube client from KUBECONFIG (hack/test.sh cri sets it to the local cluster)");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let name = format!("kruise-daemon-it-{}", std::process::id());
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 7,
            "containers": [{
                "name": "idle",
                "image": test_image(),
                "env": [{"name": "FROM_META", "value": "v1"}],
            }],
        },
    }))
    .unwrap();
    let _ = pods
        .delete(&name, &DeleteParams::default().grace_period(0))
        .await;
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create the Pod");
    // The body runs in its own task so that the Pod is deleted even when an assertion fails.
    let body = tokio::spawn(live_container_checks(c, pods.clone(), name.clone()));
    let result = body.await;
    let _ = pods
        .delete(&name, &DeleteParams::default().grace_period(0))
        .await;
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// The Pod's container as the kubelet reports it, once it is in the given state.
async fn wait_container_status(
    pods: &Api<Pod>,
    name: &str,
    what: &str,
    done: impl Fn(&ContainerStatus) -> bool,
) -> (Pod, ContainerStatus) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let pod = pods.get(name).await.expect("get the Pod");
        let cs = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|v| v.iter().find(|c| c.name == "idle"))
            .cloned();
        if let Some(cs) = cs.filter(|cs| done(cs)) {
            return (pod, cs);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "container idle of Pod {name} not {what} within 120 s: {:?}",
            pod.status
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn live_container_checks(c: CriClient, pods: Api<Pod>, name: String) {
    let (pod, cs) = wait_container_status(&pods, &name, "running", |cs| {
        cs.state.as_ref().is_some_and(|s| s.running.is_some())
    })
    .await;
    let uid = pod.metadata.uid.clone().expect("Pod uid");
    let id = cs
        .container_id
        .as_deref()
        .and_then(|id| id.split_once("://"))
        .map(|(_, id)| id.to_string())
        .expect("containerID of a running container");

    // What the daemon reads of the kubelet's container matches what the kubelet reports.
    let pcs = c.pod_containers(&uid).await.expect("pod containers");
    assert_eq!(pcs.len(), 1, "{pcs:?}");
    let info = &pcs[0];
    assert_eq!(info.id, id);
    assert_eq!(info.name, "idle");
    assert_eq!(info.pod_uid, uid);
    assert_eq!(info.pod_name, name);
    assert_eq!(info.pod_namespace, "default");
    assert_ne!(
        info.hash, 0,
        "the kubelet's container hash annotation was not read"
    );
    assert_eq!(info.restart_count, 0);
    assert_eq!(info.grace_seconds, Some(7));
    assert_eq!(info.state, State::Running);
    assert!(!info.pod_sandbox_id.is_empty());
    assert_eq!(
        c.container_status(&id)
            .await
            .expect("ContainerStatus")
            .labels[CONTAINER_NAME_LABEL],
        "idle"
    );

    let out = c
        .exec_sync(&id, vec!["env".into()], Duration::from_secs(5))
        .await
        .expect("ExecSync");
    assert_eq!(out.exit_code, 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("FROM_META=v1"));

    // Stopped through the CRI, the container is exited there and terminated in the Pod's status;
    // restartPolicy Never keeps the kubelet from starting it again.
    c.stop_container(&id, 2).await.expect("StopContainer");
    let st = c.container_status(&id).await.expect("ContainerStatus");
    assert_eq!(State::from(st.state), State::Exited);
    let (_, cs) = wait_container_status(&pods, &name, "terminated", |cs| {
        cs.state.as_ref().is_some_and(|s| s.terminated.is_some())
    })
    .await;
    let terminated = cs.state.and_then(|s| s.terminated).expect("terminated");
    assert_eq!(
        terminated.container_id.as_deref(),
        Some(format!("containerd://{id}").as_str())
    );
    assert_eq!(cs.restart_count, 0);
}
