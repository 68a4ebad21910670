//! `kubectl kruise install / check / uninstall` and the Helm chart on a real cluster (issue 17,
//! acceptance 2–4). It needs a cluster with nothing Kruise on it and the images in the registry
//! (`hack/build-images.sh`), so it is ignored by default; the `plugin` stage of `hack/test.sh`
//! runs it after its own uninstall, and by hand: `hack/test.sh plugin`.
//! It leaves the cluster as it found it (uninstalled). Issue 59: uninstall refuses while users'
//! Kruise objects exist, `--keep-crds` keeps them and their Pods, `--delete-user-objects` deletes
//! them; the chart keeps its CRDs and its pre-delete hook refuses likewise; nothing leaves a
//! webhook configuration behind.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kruise_e2e::cli::Kruise;
use kruise_e2e::cloneset;
use kruise_e2e::{TestNamespace, client, registry, repo_root};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

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
    install(&kk, &repo, &tag, "install").await;
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

    // Issue 59: the run-time webhook configurations are owned by the manager's ClusterRole, so
    // whatever deletes Kruise-rs (kubectl delete -k deploy/, helm uninstall) takes them along.
    assert_owned_by_the_manager_role(&client).await;

    // Issue 59: uninstall keeps what users made.
    let user = TestNamespace::create(&client, "e2e-keep")
        .await
        .expect("ns");
    let cs_api = cloneset::api(&client, &user.name);
    cs_api
        .create(
            &PostParams::default(),
            &cloneset::new("keepme", 2, "v1", json!({})).expect("cloneset"),
        )
        .await
        .expect("create the CloneSet");
    cloneset::wait_rolled_out(&cs_api, "keepme", 2, Duration::from_secs(180))
        .await
        .expect("two Pods ready");
    let pods: Api<Pod> = user.api();
    let uids = pod_uids(&pods, "keepme").await;
    assert_eq!(uids.len(), 2);

    // Issue 59: `install` over a running install, to new images, keeps every Pod.
    let states = pod_states(&pods, "keepme").await;
    let next = next_images(&tag);
    install(&kk, &repo, &next, "install over the running install").await;
    wait_manager_runs(&client, &next).await;
    assert_eq!(
        pod_states(&pods, "keepme").await,
        states,
        "an upgrade by install keeps the Pods (UIDs, restarts)"
    );

    let refused = kk.run_for(&["uninstall"], LONG).await.expect("uninstall");
    assert_eq!(
        refused.code,
        Some(1),
        "refused while a CloneSet exists: {refused}"
    );
    let listed = refused
        .stderr
        .lines()
        .find(|l| l.contains("keepme"))
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>();
    assert_eq!(
        listed,
        vec!["CloneSet", user.name.as_str(), "keepme", "2"],
        "lists kind, namespace, name and Pods: {refused}"
    );
    assert_eq!(pod_uids(&pods, "keepme").await, uids, "nothing deleted");
    assert_owned_by_the_manager_role(&client).await;

    let kept = kk
        .run_for(&["uninstall", "--keep-crds"], LONG)
        .await
        .expect("uninstall --keep-crds");
    assert_eq!(kept.code, Some(0), "{kept}");
    // Read in the storage version: with no webhook left, v1beta1 (converted by it) is not served.
    let stored = kube::Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        &user.name,
        &cloneset::resource(kruise_api::keys::VERSION_V1ALPHA1),
    );
    assert!(stored.get_opt("keepme").await.expect("get").is_some());
    assert_eq!(
        pod_uids(&pods, "keepme").await,
        uids,
        "the same Pods run on"
    );
    assert_no_webhook_configuration(&client).await;
    assert_pod_creates_at_once(&pods, "after uninstall --keep-crds").await;

    // Reinstalled over the kept CRDs and objects: the same Pods, then deleted on request.
    install(&kk, &repo, &tag, "reinstall").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pod_uids(&pods, "keepme").await,
        uids,
        "reinstall keeps the Pods"
    );
    let run = kk
        .run_for(&["uninstall", "--delete-user-objects"], LONG)
        .await
        .expect("uninstall --delete-user-objects");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_nothing_left(&client).await;
    assert_pod_creates_at_once(&pods, "after uninstall").await;

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
    // The daemon image follows manager.image (issue 59: a private mirror set once).
    let set = [
        format!("manager.image.repository={repo}/kruise-manager"),
        format!("manager.image.tag={tag}"),
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

    // Issue 59: the chart's pre-delete hook refuses while a CloneSet exists, deleting nothing.
    cs_api
        .create(
            &PostParams::default(),
            &cloneset::new(
                "helmkeep",
                1,
                "v1",
                json!({"type": "RollingUpdate",
                       "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}),
            )
            .expect("cloneset"),
        )
        .await
        .expect("create the CloneSet");
    helm_upgrade_keeps_the_pods(&client, &helm, &chart, &repo, &tag, &cs_api, &pods).await;
    let helm_uninstall = || {
        Command::new(&helm)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["uninstall", "kruise-rs", "--wait", "--timeout", "3m"])
            .output()
            .expect("helm uninstall")
    };
    let out = helm_uninstall();
    assert!(
        !out.status.success(),
        "helm uninstall is refused while a CloneSet exists"
    );
    assert!(cs_api.get_opt("helmkeep").await.expect("get").is_some());
    assert_owned_by_the_manager_role(&client).await;
    cs_api
        .delete("helmkeep", &DeleteParams::default())
        .await
        .expect("delete the CloneSet");
    kruise_e2e::wait_for("the CloneSet gone", Duration::from_secs(60), || async {
        Ok(cs_api.get_opt("helmkeep").await?.is_none().then_some(()))
    })
    .await
    .expect("CloneSet deleted");

    // Then the release goes, its CRDs stay (resource-policy keep), and nothing of the webhook.
    let out = helm_uninstall();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_webhook_configuration(&client).await;
    assert!(
        Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt("clonesets.apps.kruise.io")
            .await
            .expect("get")
            .is_some(),
        "helm uninstall keeps the CRDs"
    );
    assert_pod_creates_at_once(&pods, "after helm uninstall").await;
    let run = kk.run_for(&["uninstall"], LONG).await.expect("uninstall");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_nothing_left(&client).await;
    user.delete().await.expect("delete ns");
}

/// Another image of the manager and of the daemon, tagged `<tag>-next`: the layers of `tag`
/// with one more label, so a new image ID without a rebuild. Returns the new tag.
fn next_images(tag: &str) -> String {
    let next = format!("{tag}-next");
    for name in ["kruise-manager", "kruise-daemon"] {
        let out = Command::new("python3")
            .arg(repo_root().join("hack/oci_image.py"))
            .args(["--registry", &registry(), "--name"])
            .arg(format!("kruise-rs/{name}"))
            .args(["--tag", &next, "--from", tag])
            .args(["--label", "dev.kruise-rs.e2e=upgrade"])
            .output()
            .expect("oci_image.py");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    next
}

/// Waits until every manager Pod and every daemon Pod runs an image tagged `tag`, Ready.
async fn wait_manager_runs(client: &Client, tag: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let suffix = format!(":{tag}");
    kruise_e2e::wait_for(
        "Kruise-rs on the new images",
        Duration::from_secs(300),
        || async {
            let list = pods.list(&ListParams::default()).await?.items;
            let live: Vec<&Pod> = list
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| p.metadata.owner_references.is_some())
                .collect();
            let done = !live.is_empty()
                && live.iter().all(|p| {
                    let images_new = p
                        .spec
                        .iter()
                        .flat_map(|s| &s.containers)
                        .all(|c| c.image.as_deref().is_some_and(|i| i.ends_with(&suffix)));
                    images_new && kruise_e2e::pod_ready(p)
                });
            Ok(done.then_some(()))
        },
    )
    .await
    .expect("manager and daemon on the new images");
}

/// `helm upgrade` to new images and values keeps the CloneSet's Pods, and the upgraded manager
/// still updates them in place.
async fn helm_upgrade_keeps_the_pods(
    client: &Client,
    helm: &str,
    chart: &std::path::Path,
    repo: &str,
    tag: &str,
    cs_api: &Api<kube::api::DynamicObject>,
    pods: &Api<Pod>,
) {
    cloneset::wait_rolled_out(cs_api, "helmkeep", 1, Duration::from_secs(180))
        .await
        .expect("helmkeep ready");
    let states = pod_states(pods, "helmkeep").await;
    let next = format!("{tag}-next");
    let kubeconfig = kruise_e2e::cli::kubeconfig().expect("kubeconfig");
    let out = Command::new(helm)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["upgrade", "kruise-rs"])
        .arg(chart)
        .args(["--wait", "--timeout", "10m"])
        .args([
            "--set",
            &format!("manager.image.repository={repo}/kruise-manager"),
        ])
        .args(["--set", &format!("manager.image.tag={next}")])
        .args(["--set", "manager.resources.limits.memory=320Mi"])
        .output()
        .expect("helm upgrade");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_manager_runs(client, &next).await;
    let deploy = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(
        client.clone(),
        keys::KRUISE_NAMESPACE,
    )
    .get(kruise_e2e::manager::MANAGER_DEPLOYMENT)
    .await
    .expect("manager Deployment");
    let limit = deploy
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.resources)
        .and_then(|r| r.limits)
        .and_then(|l| l.get("memory").map(|q| q.0.clone()));
    assert_eq!(
        limit.as_deref(),
        Some("320Mi"),
        "the upgraded value applies"
    );
    assert_eq!(
        pod_states(pods, "helmkeep").await,
        states,
        "helm upgrade keeps the Pods (UIDs, restarts)"
    );
    // The upgraded manager still works: an image change is applied in place.
    cloneset::set_image(cs_api, "helmkeep", "v2")
        .await
        .expect("set image");
    cloneset::wait_rolled_out(cs_api, "helmkeep", 1, Duration::from_secs(180))
        .await
        .expect("helmkeep updated");
    let after = pod_states(pods, "helmkeep").await;
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].0, states[0].0, "updated in place: same Pod");
    assert_eq!(after[0].1, states[0].1 + 1, "its container restarted once");
}

/// Each of the CloneSet's Pods: UID and the sum of its containers' restarts, sorted.
async fn pod_states(pods: &Api<Pod>, cloneset: &str) -> Vec<(String, i32)> {
    let mut out: Vec<(String, i32)> = kruise_e2e::cloneset::pods(pods, cloneset)
        .await
        .expect("list pods")
        .iter()
        .map(|p| {
            let restarts = p
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .map(|c| c.restart_count)
                .sum();
            (p.metadata.uid.clone().unwrap_or_default(), restarts)
        })
        .collect();
    out.sort();
    out
}

/// `kubectl kruise install --wait` of `version` from `repo`; `what` names the step on failure.
async fn install(kk: &Kruise, repo: &str, version: &str, what: &str) {
    let run = kk
        .run_for(
            &[
                "install",
                "--image-repo",
                repo,
                "--version",
                version,
                "--wait",
            ],
            LONG,
        )
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(run.code, Some(0), "{what}: {run:?}");
}

/// The UIDs of the CloneSet's Pods, sorted.
async fn pod_uids(pods: &Api<Pod>, cloneset: &str) -> Vec<String> {
    let mut uids: Vec<String> = kruise_e2e::cloneset::pods(pods, cloneset)
        .await
        .expect("pods")
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    uids.sort();
    uids
}

/// Both webhook configurations name the manager's ClusterRole as their owner.
async fn assert_owned_by_the_manager_role(client: &Client) {
    let role = Api::<ClusterRole>::all(client.clone())
        .get(keys::MANAGER_CLUSTER_ROLE)
        .await
        .expect("the manager's ClusterRole");
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("mutating configuration");
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("validating configuration");
    for owners in [m.metadata.owner_references, v.metadata.owner_references] {
        let owner = owners.unwrap_or_default();
        assert!(
            owner
                .iter()
                .any(|o| o.kind == "ClusterRole" && Some(&o.uid) == role.metadata.uid.as_ref()),
            "owned by ClusterRole {}: {owner:?}",
            keys::MANAGER_CLUSTER_ROLE
        );
    }
}

async fn assert_no_webhook_configuration(client: &Client) {
    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get_opt(keys::MUTATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("get");
    let v = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get_opt(keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("get");
    assert!(m.is_none() && v.is_none(), "webhook configurations left");
    let p = Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .get_opt(keys::POD_WEBHOOK_POLICY_NAME)
        .await
        .expect("get");
    assert!(p.is_none(), "admission policy left");
}

/// A plain Pod is created at once (nothing of Kruise-rs left in its way), then deleted.
async fn assert_pod_creates_at_once(pods: &Api<Pod>, when: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "app", "image": kruise_e2e::image("testapp", "v1")}]}
    }))
    .expect("pod");
    let start = std::time::Instant::now();
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("a plain Pod {when}: {e}"));
    let took = start.elapsed();
    eprintln!("plain Pod created {when} in {took:?}");
    assert!(took < Duration::from_secs(2), "{when}: {took:?}");
    pods.delete(
        "plain",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .expect("delete the plain Pod");
    kruise_e2e::wait_for("the plain Pod gone", Duration::from_secs(60), || async {
        Ok(pods.get_opt("plain").await?.is_none().then_some(()))
    })
    .await
    .expect("plain Pod deleted");
}
