//! `kubectl kruise dev` (issue 17, acceptance 1): the manager embedded in the plugin, in a tmux
//! session. With nothing Kruise on the cluster it installs the CRDs and serves the webhook; a
//! CloneSet created meanwhile gets its readiness gate and is updated in place; Ctrl-C leaves no
//! webhook configuration and Pods can be created afterwards.
//!
//! When a manager already serves the webhooks (the dev-mode one of `hack/dev-up.sh`, or the
//! in-cluster one of `make test`), `dev` must refuse and name it. Each case is a test of its own
//! that fails when its precondition does not hold, so neither passes without checking what its
//! name says: the embedded manager runs in hack/test.sh's plugin stage (Kruise uninstalled, no
//! dev-mode manager; the e2e-plugin profile), the refusal in the suite beside the installed
//! manager (the e2e-suite profile).

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::cli::{Kruise, Tmux};
use kruise_e2e::cloneset::{self, set_image, wait_rolled_out};
use kruise_e2e::mode;
use kruise_e2e::{TestNamespace, client, image, pod_ready, wait_pod};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;

const PROMPT: &str = "e2e$ ";
const ROLLOUT: Duration = Duration::from_secs(180);

async fn poll_screen(
    tmux: &Tmux,
    what: &str,
    timeout: Duration,
    seen: impl Fn(&str) -> bool,
) -> String {
    let start = Instant::now();
    loop {
        let screen = tmux.capture().expect("capture-pane");
        if seen(&screen) {
            return screen;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}; screen:\n{screen}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The shell printed `EXIT=<code>` (the typed command line holds `EXIT=$?`, not a digit).
fn exited(screen: &str) -> bool {
    screen.lines().any(|l| {
        l.trim()
            .strip_prefix("EXIT=")
            .is_some_and(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_digit()))
    })
}

/// Something serves the webhooks already: `dev` exits 1 naming it, and changes nothing.
async fn refuses(kk: &Kruise, who: &str) {
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client().await.expect("cluster"));
    let before = mutating
        .get(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("the running manager's webhook configuration");
    let run = kk
        .run_for(&["dev"], Duration::from_secs(60))
        .await
        .expect("dev runs");
    assert_eq!(run.code, Some(1), "dev must refuse: {run:?}");
    assert!(
        run.stderr.contains("refuses to start") && run.stderr.contains(who),
        "the refusal names {who}: {}",
        run.stderr
    );
    let after = mutating
        .get(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("webhook configuration still there");
    assert_eq!(
        before.metadata.resource_version, after.metadata.resource_version,
        "a refused dev must not touch the webhook configuration"
    );
}

/// What serves Kruise's webhooks now, as `dev` names it in its refusal: the installed
/// Deployment or a dev-mode manager (`hack/dev-up.sh`); `None` when nothing does.
async fn running_manager(client: &kube::Client) -> Option<&'static str> {
    let installed = Api::<Deployment>::namespaced(client.clone(), keys::KRUISE_NAMESPACE)
        .get_opt("kruise-controller-manager")
        .await
        .expect("read Deployments");
    if installed.is_some() {
        Some("Deployment kruise-system/kruise-controller-manager")
    } else if mode::dev_pid("kruise-manager").is_some() {
        Some("another dev-mode manager")
    } else {
        None
    }
}

/// Beside a running manager (the suite's install), `dev` refuses, names it and changes nothing.
#[tokio::test]
async fn dev_refuses_beside_a_running_manager() {
    kruise_e2e::cli::binary().expect("kubectl-kruise binary");
    let client = client().await.expect("cluster");
    let who = running_manager(&client).await.expect(
        "no Kruise manager serves this cluster: this test needs one installed (make install) or \
         in dev mode (hack/dev-up.sh)",
    );
    let probe = TestNamespace::create(&client, "e2e-dev-refused")
        .await
        .expect("namespace");
    let kk = Kruise::new(&probe.name).expect("kubectl-kruise and kubeconfig");
    refuses(&kk, who).await;
    probe.delete().await.expect("delete namespace");
}

#[tokio::test]
async fn dev_embeds_the_manager_and_cleans_up_on_ctrl_c() {
    kruise_e2e::cli::binary().expect("kubectl-kruise binary");
    let client = client().await.expect("cluster");
    // The embedded manager only runs where nothing else serves the webhooks; finding one is a
    // failure, not a pass: hack/test.sh's plugin stage uninstalls Kruise and stops dev mode
    // before this test.
    if let Some(who) = running_manager(&client).await {
        panic!(
            "{who} serves this cluster: `kubectl kruise dev` would refuse, and its embedded \
             manager would go untested; run this test on a cluster without Kruise \
             (hack/test.sh plugin)"
        );
    }
    let kk = Kruise::new("default").expect("kubectl-kruise and kubeconfig");

    let tmux = Tmux::start(
        160,
        30,
        PROMPT,
        &[
            ("KK", kk.bin.display().to_string()),
            ("KC", kk.kubeconfig.display().to_string()),
        ],
    )
    .expect("tmux session");
    poll_screen(&tmux, "the shell prompt", Duration::from_secs(10), |s| {
        s.contains(PROMPT.trim_end())
    })
    .await;
    tmux.type_text(&format!(
        "\"$KK\" --kubeconfig \"$KC\" dev --webhook-host {}; echo \"EXIT=$?\"",
        kruise_e2e::host_address()
    ))
    .expect("type");
    tmux.key("Enter").expect("enter");
    let screen = poll_screen(
        &tmux,
        "the embedded manager running",
        Duration::from_secs(180),
        |s| s.contains("running ·") || exited(s),
    )
    .await;
    assert!(!exited(&screen), "dev stopped early:\n{screen}");
    assert!(screen.contains("CRDs installed or updated"), "{screen}");
    println!("dev started:\n{screen}");

    // From "another shell": a CloneSet, updated in place.
    let ns = TestNamespace::create(&client, "e2e-dev")
        .await
        .expect("namespace");
    let api = cloneset::api(&client, &ns.name);
    let pods_api = ns.api::<Pod>();
    let strategy = json!({"type": "RollingUpdate",
        "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": 1}});
    api.create(
        &PostParams::default(),
        &cloneset::new("web", 2, "v1", strategy).expect("CloneSet"),
    )
    .await
    .expect("create CloneSet");
    wait_rolled_out(&api, "web", 2, ROLLOUT)
        .await
        .expect("initial rollout");
    let before = cloneset::pods(&pods_api, "web").await.expect("pods");
    assert_eq!(before.len(), 2);
    for p in &before {
        let gates: Vec<&str> = p
            .spec
            .as_ref()
            .and_then(|s| s.readiness_gates.as_ref())
            .map(|g| g.iter().map(|g| g.condition_type.as_str()).collect())
            .unwrap_or_default();
        assert!(
            gates.contains(&keys::KRUISE_POD_READY),
            "Pod {} got the {} readiness gate from the embedded webhook: {gates:?}",
            p.name_any(),
            keys::KRUISE_POD_READY
        );
    }
    set_image(&api, "web", "v2").await.expect("set image");
    let start = Instant::now();
    let after = loop {
        let pods = cloneset::pods(&pods_api, "web").await.expect("pods");
        let updated = pods.iter().all(|p| {
            let c = p
                .spec
                .as_ref()
                .map(|s| s.containers[0].image.clone())
                .unwrap_or_default();
            c == Some(image("testapp", "v2"))
                && pod_ready(p)
                && p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| cs[0].image.ends_with(":v2"))
        });
        if pods.len() == 2 && updated {
            break pods;
        }
        assert!(
            start.elapsed() < ROLLOUT,
            "in-place update did not finish: {pods:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for p in &before {
        let same = after
            .iter()
            .find(|a| a.uid() == p.uid())
            .unwrap_or_else(|| panic!("Pod {} was recreated, not updated in place", p.name_any()));
        let restarts = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|cs| cs[0].restart_count)
                .unwrap_or(0)
        };
        assert_eq!(
            restarts(same),
            restarts(p) + 1,
            "container restarted once in place"
        );
    }
    let screen = poll_screen(
        &tmux,
        "the summary counting the CloneSet",
        Duration::from_secs(30),
        |s| s.contains("CloneSets 1 (0 rolling)"),
    )
    .await;
    println!("after the rollout:\n{screen}");

    // Ctrl-C: the webhook configurations go, and Pods can be created.
    tmux.key("C-c").expect("ctrl-c");
    let screen = poll_screen(&tmux, "dev to stop", Duration::from_secs(60), exited).await;
    assert!(screen.lines().any(|l| l.trim() == "EXIT=0"), "{screen}");
    assert!(screen.contains("removed"), "{screen}");
    assert!(
        screen.contains("CRDs still convert between versions"),
        "dev names the CRDs whose conversion URL it leaves behind:\n{screen}"
    );
    let m: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let v: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    assert!(
        m.get_opt(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        v.get_opt(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME)
            .await
            .expect("get")
            .is_none()
    );
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "after-dev"},
        "spec": {"containers": [{"name": "app", "image": image("testapp", "v1")}]}
    }))
    .expect("pod");
    pods_api
        .create(&PostParams::default(), &pod)
        .await
        .expect("Pods are admitted after dev stopped");
    wait_pod(
        &pods_api,
        "after-dev",
        "running",
        Duration::from_secs(60),
        pod_ready,
    )
    .await
    .expect("the Pod runs");
    ns.delete().await.expect("delete namespace");
}
