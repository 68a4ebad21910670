//! Scenario 5 with a restart: the grace period of an in-place update lives in the Pod's
//! inplace-update-grace annotation, not in the manager's memory, so killing the manager inside
//! the window loses nothing. The leading manager is killed the way the mode allows
//! ([`mode::kill_manager`]: in cluster its Pod is deleted with grace 0 and the standby takes
//! over); a serial test, because it takes the manager away for a moment.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::cloneset::{self, set_image, wait_rolled_out};
use kruise_e2e::{TestNamespace, client, container_status, image, mode, wait_for};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;

#[tokio::test]
async fn serial_grace_period_survives_a_manager_kill() {
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
    let spec_image = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.containers[0].image.clone())
            .unwrap_or_default()
    };
    mode::kill_manager(&client, async || {
        assert_eq!(
            spec_image(&pods.get(&name).await.expect("pod")),
            image("testapp", "v1"),
            "not patched before the grace period ends"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    })
    .await
    .expect("kill the leading manager");

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
