//! Scenario 5 with a restart: the grace period of an in-place update lives in the Pod's
//! inplace-update-grace annotation, not in the manager's memory, so killing the manager inside
//! the window loses nothing. Dev mode only (the manager runs as a host process started by
//! hack/dev-up.sh); a test binary of its own, because it takes the webhook away for a moment.

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::cloneset::{self, set_image, wait_rolled_out};
use kruise_e2e::{TestNamespace, client, container_status, image, repo_root, wait_for};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;

fn kill_manager() {
    let pid_file = repo_root().join(".cluster/pids/kruise-manager.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap_or_else(|e| {
        panic!("{pid_file:?}: {e} (is the manager running in dev mode? hack/dev-up.sh)")
    });
    let status = Command::new("kill")
        .args(["-KILL", pid.trim()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -KILL {}", pid.trim());
}

fn start_manager() {
    let status = Command::new(repo_root().join("hack/dev-up.sh"))
        .current_dir(repo_root())
        .env("KRUISE_SKIP_BUILD", "1")
        .status()
        .expect("run hack/dev-up.sh");
    assert!(status.success(), "hack/dev-up.sh restarts the manager");
}

#[tokio::test]
async fn grace_period_survives_a_manager_kill() {
    let client = client().await.expect("cluster");
    let ns = TestNamespace::create(&client, "e2e-cs-restart")
        .await
        .expect("ns");
    let api = cloneset::api(&client, &ns.name);
    let pods: Api<Pod> = ns.api();
    let strategy = json!({"type": "RollingUpdate", "rollingUpdate": {
        "podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%",
        "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}
    }});
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 1, "v1", strategy).expect("cs"),
    )
    .await
    .expect("create");
    wait_rolled_out(&api, "web", 1, Duration::from_secs(180))
        .await
        .expect("initial rollout");
    let before = cloneset::pods(&pods, "web").await.expect("pods")[0].clone();
    let name = before.name_any();

    let started = Instant::now();
    set_image(&api, "web", "v2").await.expect("set image");
    wait_for("the grace annotation", Duration::from_secs(30), || async {
        let p = pods.get(&name).await?;
        Ok(p.annotations()
            .contains_key(keys::INPLACE_UPDATE_GRACE_ANNOTATION)
            .then_some(()))
    })
    .await
    .expect("grace annotation");
    kill_manager();
    let spec_image = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.containers[0].image.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        spec_image(&pods.get(&name).await.expect("pod")),
        image("testapp", "v1"),
        "not patched before the grace period ends"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    start_manager();

    let patched = wait_for(
        "the image patch after the restart",
        Duration::from_secs(120),
        || async {
            let p = pods.get(&name).await?;
            Ok((spec_image(&p) == image("testapp", "v2")).then_some(started.elapsed()))
        },
    )
    .await
    .expect("the restarted manager applies the pending update");
    assert!(
        patched >= Duration::from_secs(9),
        "patched after {patched:?}, inside the 10 s grace period"
    );
    wait_rolled_out(&api, "web", 1, Duration::from_secs(180))
        .await
        .expect("rollout completes");
    let after = pods.get(&name).await.expect("pod");
    assert_eq!(after.uid(), before.uid(), "updated in place");
    assert_eq!(
        container_status(&after, "app").map(|c| c.restart_count),
        Some(1)
    );
    assert!(
        !after
            .annotations()
            .contains_key(keys::INPLACE_UPDATE_GRACE_ANNOTATION)
    );
    ns.delete().await.expect("delete ns");
}
