//! Against a real CRI runtime, so all but the socket-path test (which needs none) are ignored by
//! a plain `cargo test`: `hack/test.sh cri` runs them with `--include-ignored` and
//! KRUISE_CRI_ENDPOINT set to the local cluster's containerd. Without the variable they fail,
//! saying what is missing, rather than pass without testing anything.
//! KRUISE_TEST_IMAGE (default 127.0.0.1:5000/kruise-rs/sidecar:v1) must be pullable and
//! idle until SIGTERM; KRUISE_TEST_MISSING_IMAGE must not exist in its registry.

use std::collections::HashMap;
use std::time::Duration;

use k8s_cri::v1 as cri;
use kruise_daemon::criruntime::labels::{CONTAINER_NAME_LABEL, POD_UID_LABEL};
use kruise_daemon::criruntime::{CriClient, SocketSource, State};

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

#[tokio::test]
#[ignore = "needs a CRI runtime: run by hack/test.sh cri"]
async fn exec_and_stop_a_real_container() {
    let Some(ep) = endpoint() else { return };
    let c = connect(&ep).await;
    let image = test_image();
    c.pull_image(
        &image,
        None,
        HashMap::new(),
        HashMap::new(),
        Duration::from_secs(120),
    )
    .await
    .expect("PullImage");
    let uid = format!("kruise-daemon-it-{}", std::process::id());
    let mut rs = c.runtime_service();
    // Host network: the test must not depend on CNI.
    let sandbox_cfg = cri::PodSandboxConfig {
        metadata: Some(cri::PodSandboxMetadata {
            name: uid.clone(),
            uid: uid.clone(),
            namespace: "kruise-daemon-it".into(),
            attempt: 0,
        }),
        linux: Some(cri::LinuxPodSandboxConfig {
            security_context: Some(cri::LinuxSandboxSecurityContext {
                namespace_options: Some(cri::NamespaceOption {
                    network: cri::NamespaceMode::Node as i32,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let sb = rs
        .run_pod_sandbox(cri::RunPodSandboxRequest {
            config: Some(sandbox_cfg.clone()),
            runtime_handler: String::new(),
        })
        .await
        .expect("RunPodSandbox")
        .into_inner()
        .pod_sandbox_id;
    let ctr = rs
        .create_container(cri::CreateContainerRequest {
            pod_sandbox_id: sb.clone(),
            config: Some(cri::ContainerConfig {
                metadata: Some(cri::ContainerMetadata {
                    name: "idle".into(),
                    attempt: 0,
                }),
                image: Some(cri::ImageSpec {
                    image: image.clone(),
                    ..Default::default()
                }),
                envs: vec![cri::KeyValue {
                    key: "FROM_META".into(),
                    value: "v1".into(),
                }],
                labels: HashMap::from([
                    (POD_UID_LABEL.to_string(), uid.clone()),
                    (CONTAINER_NAME_LABEL.to_string(), "idle".to_string()),
                ]),
                annotations: HashMap::from([(
                    "io.kubernetes.container.hash".to_string(),
                    "abc123".to_string(),
                )]),
                ..Default::default()
            }),
            sandbox_config: Some(sandbox_cfg),
        })
        .await
        .expect("CreateContainer")
        .into_inner()
        .container_id;
    rs.start_container(cri::StartContainerRequest {
        container_id: ctr.clone(),
    })
    .await
    .expect("StartContainer");

    let result = async {
        let out = c
            .exec_sync(&ctr, vec!["env".into()], Duration::from_secs(5))
            .await
            .expect("ExecSync");
        assert_eq!(out.exit_code, 0);
        assert!(String::from_utf8_lossy(&out.stdout).contains("FROM_META=v1"));

        let pcs = c.pod_containers(&uid).await.expect("pod containers");
        assert_eq!(pcs.len(), 1);
        assert_eq!(pcs[0].name, "idle");
        assert_eq!(pcs[0].hash, 0xabc123);
        assert_eq!(pcs[0].state, State::Running);
        assert_eq!(pcs[0].pod_sandbox_id, sb);

        c.stop_container(&ctr, 2).await.expect("StopContainer");
        let st = c.container_status(&ctr).await.expect("ContainerStatus");
        assert_eq!(State::from(st.state), State::Exited);
    }
    .await;

    let _ = rs
        .remove_container(cri::RemoveContainerRequest { container_id: ctr })
        .await;
    let _ = rs
        .stop_pod_sandbox(cri::StopPodSandboxRequest {
            pod_sandbox_id: sb.clone(),
        })
        .await;
    let _ = rs
        .remove_pod_sandbox(cri::RemovePodSandboxRequest { pod_sandbox_id: sb })
        .await;
    result
}
