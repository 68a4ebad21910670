//! `kubectl kruise install / check / uninstall` and the Helm chart on a real cluster (issue 17,
//! acceptance 2–4). It needs a cluster with nothing Kruise on it and the images in the registry
//! (`hack/build-images.sh`), so it is ignored by default; the `plugin` stage of `hack/test.sh`
//! runs it after its own uninstall, and by hand: `hack/test.sh plugin`.
//! It leaves the cluster as it found it (uninstalled).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kruise_e2e::cli::Kruise;
use kruise_e2e::{client, registry, repo_root};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};

const LONG: Duration = Duration::from_secs(600);

fn tag() -> String {
    std::env::var("KRUISE_E2E_IMAGE_TAG").unwrap_or_else(|_| "dev".to_string())
}

fn image_repo() -> String {
    format!("{}/kruise-rs", registry())
}

/// `$KUBECTL`, else the local cluster's kubectl, else the one on PATH.
fn kubectl() -> PathBuf {
    if let Some(k) = std::env::var_os("KUBECTL") {
        return PathBuf::from(k);
    }
    let local = repo_root().join(".cluster/bin/kubectl");
    if local.is_file() {
        local
    } else {
        PathBuf::from("kubectl")
    }
}

/// The CRDs `deploy/crds` holds (files are named GROUP_PLURAL.yaml).
fn our_crds() -> Vec<String> {
    let dir = repo_root().join("deploy/crds");
    let mut out: Vec<String> = std::fs::read_dir(&dir)
        .expect("deploy/crds")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| {
            let (group, plural) = f.strip_suffix(".yaml")?.split_once('_')?;
            Some(format!("{plural}.{group}"))
        })
        .collect();
    out.sort();
    out
}

/// Nothing of Kruise left: none of our CRDs, no webhook configuration, no namespace.
async fn assert_nothing_left(client: &Client) {
    let ours = our_crds();
    assert!(!ours.is_empty());
    let crds: Vec<String> = Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("list CRDs")
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| ours.contains(n))
        .collect();
    assert!(crds.is_empty(), "CRDs left: {crds:?}");
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("get");
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("get");
    assert!(m.is_none() && v.is_none(), "webhook configurations left");
    for ns in [keys::KRUISE_NAMESPACE, keys::KRUISE_DAEMON_CONFIG_NAMESPACE] {
        let left = Api::<Namespace>::all(client.clone())
            .get_opt(ns)
            .await
            .expect("get");
        assert!(left.is_none(), "namespace {ns} left");
    }
}

async fn check(kk: &Kruise) -> kruise_e2e::cli::Run {
    kk.run_for(&["check"], Duration::from_secs(120))
        .await
        .expect("check runs")
}

#[tokio::test]
#[ignore = "needs a cluster without Kruise and the images in the registry (the plugin stage of hack/test.sh runs it)"]
async fn install_check_uninstall_and_helm() {
    let client = client().await.expect("cluster");
    let kk = Kruise::new("default").expect("kubectl-kruise and kubeconfig");
    let (repo, tag) = (image_repo(), tag());

    // Acceptance 2: install --wait, then every check passes.
    let run = kk
        .run_for(
            &[
                "install",
                "--image-repo",
                &repo,
                "--version",
                &tag,
                "--wait",
            ],
            LONG,
        )
        .await
        .expect("install");
    assert_eq!(run.code, Some(0), "{run:?}");
    let lease_wait = std::time::Instant::now();
    let mut ok = check(&kk).await;
    // The Lease is taken a moment after the Pods are Ready.
    while ok.code != Some(0) && lease_wait.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        ok = check(&kk).await;
    }
    assert_eq!(ok.code, Some(0), "check after install:\n{}", ok.stdout);
    assert!(!ok.stdout.contains('✖'), "{}", ok.stdout);
    assert!(ok.stdout.contains("✔ manager: Kruise-rs"), "{}", ok.stdout);
    let json = kk
        .run(&["check", "-o", "json"])
        .await
        .expect("check -o json");
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(v["ok"], true, "{}", json.stdout);

    // Without the daemon DaemonSet, check fails naming it and the fix.
    Api::<DaemonSet>::namespaced(client.clone(), keys::KRUISE_NAMESPACE)
        .delete("kruise-daemon", &DeleteParams::foreground())
        .await
        .expect("delete the daemon DaemonSet");
    let start = std::time::Instant::now();
    let bad = loop {
        let r = check(&kk).await;
        if r.stdout
            .contains("DaemonSet kruise-system/kruise-daemon not found")
            || start.elapsed() > Duration::from_secs(60)
        {
            break r;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(bad.code, Some(1), "{}", bad.stdout);
    assert!(
        bad.stdout
            .contains("✖ daemon: DaemonSet kruise-system/kruise-daemon not found")
            && bad.stdout.contains("fix: kubectl kruise install"),
        "{}",
        bad.stdout
    );

    // Acceptance 4: uninstall leaves nothing.
    let run = kk.run_for(&["uninstall"], LONG).await.expect("uninstall");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_nothing_left(&client).await;

    // Acceptance 3: the Helm chart gives the same running system.
    let helm = Command::new(repo_root().join("hack/build-helm.sh"))
        .output()
        .expect("build-helm");
    assert!(
        helm.status.success(),
        "{}",
        String::from_utf8_lossy(&helm.stderr)
    );
    let helm = String::from_utf8_lossy(&helm.stdout).trim().to_string();
    let chart = repo_root().join("deploy/helm/kruise-rs");
    let kubeconfig = kruise_e2e::cli::kubeconfig().expect("kubeconfig");
    let set = [
        format!("manager.image.repository={repo}/kruise-manager"),
        format!("manager.image.tag={tag}"),
        format!("daemon.image.repository={repo}/kruise-daemon"),
        format!("daemon.image.tag={tag}"),
    ];
    let mut template = Command::new(&helm);
    template.args(["template", "kruise-rs"]).arg(&chart);
    for s in &set {
        template.args(["--set", s]);
    }
    let rendered = template.output().expect("helm template");
    assert!(rendered.status.success());
    let mut install = Command::new(&helm);
    install
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["install", "kruise-rs"])
        .arg(&chart)
        .args(["--wait", "--timeout", "10m"]);
    for s in &set {
        install.args(["--set", s]);
    }
    let out = install.output().expect("helm install");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let start = std::time::Instant::now();
    let mut ok = check(&kk).await;
    while ok.code != Some(0) && start.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(2)).await;
        ok = check(&kk).await;
    }
    assert_eq!(
        ok.code,
        Some(0),
        "check on the Helm install:\n{}",
        ok.stdout
    );
    // What the chart renders, the API server accepts (after the install, so its namespaces exist;
    // forced, as Helm owns the fields).
    let mut apply = Command::new(kubectl())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
            "-f",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl apply");
    use std::io::Write as _;
    apply
        .stdin
        .take()
        .expect("stdin")
        .write_all(&rendered.stdout)
        .expect("write");
    let out = apply.wait_with_output().expect("kubectl apply");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The chart's release goes; the webhook configurations the manager made are removed by
    // uninstall, which also covers what Helm does not own.
    let out = Command::new(&helm)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["uninstall", "kruise-rs", "--wait"])
        .output()
        .expect("helm uninstall");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = kk.run_for(&["uninstall"], LONG).await.expect("uninstall");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_nothing_left(&client).await;
}
