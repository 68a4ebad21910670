//! Issue 59: the Helm chart installed with a values file in OpenKruise chart 1.9.0's names
//! (deploy/helm/openkruise-values.yaml: image pull secrets, node selectors, tolerations, node
//! affinity, daemon resources, extra env, log levels, ServiceAccount annotations, the CRI socket
//! file) runs with them: the manager and the daemon become Ready on the local node, their Pods
//! carry each value, and the daemon talks to the runtime through the socket file it was given.
//! Like plugin_install, it needs a cluster without Kruise and the images in the registry, so it
//! is ignored by default and runs in the plugin stage of hack/test.sh; it uninstalls what it
//! installed (CRDs included).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kruise_api::keys;
use kruise_e2e::cli::Kruise;
use kruise_e2e::{client, registry, repo_root, wait_for};
use kube::Api;
use kube::api::{ListParams, LogParams};
use serde_json::{Value, json};

const LONG: Duration = Duration::from_secs(600);

fn helm() -> PathBuf {
    let out = Command::new(repo_root().join("hack/build-helm.sh"))
        .output()
        .expect("build-helm");
    assert!(out.status.success(), "{}", text(&out.stderr));
    PathBuf::from(text(&out.stdout).trim())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn helm_run(args: &[&str]) -> Output {
    let kubeconfig = kruise_e2e::cli::kubeconfig().expect("kubeconfig");
    Command::new(helm())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(args)
        .output()
        .expect("helm runs")
}

/// A Pod spec as JSON, for comparing what the chart set with what the API server kept.
fn spec(pod: &Pod) -> Value {
    serde_json::to_value(pod.spec.as_ref().expect("spec")).expect("json")
}

fn env(c: &Value, name: &str) -> Option<String> {
    c["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str().map(str::to_owned))
}

#[tokio::test]
#[ignore = "needs a cluster without Kruise and the images in the registry (the plugin stage of hack/test.sh runs it)"]
async fn openkruise_values_install_and_run() {
    let client = client().await.expect("cluster");
    let kk = Kruise::new("default").expect("kubectl-kruise and kubeconfig");
    let tag = std::env::var("KRUISE_E2E_IMAGE_TAG").unwrap_or_else(|_| "dev".to_string());
    let chart = repo_root().join("deploy/helm/kruise-rs");
    let values = repo_root().join("deploy/helm/openkruise-values.yaml");
    let image = format!(
        "manager.image.repository={}/kruise-rs/kruise-manager",
        registry()
    );
    let image_tag = format!("manager.image.tag={tag}");
    // The socket file at the top of its location: the whole directory is mounted at /hostvarrun
    // and the daemon uses /hostvarrun/containerd.sock, a layout the default values cannot give.
    let out = helm_run(&[
        "install",
        "kruise-rs",
        chart.to_str().expect("path"),
        "-f",
        values.to_str().expect("path"),
        "--set",
        &image,
        "--set",
        &image_tag,
        "--set",
        "daemon.socketLocation=/run/containerd",
        "--set",
        "daemon.socketFile=containerd.sock",
        "--wait",
        "--timeout",
        "10m",
    ]);
    assert!(out.status.success(), "helm install: {}", text(&out.stderr));

    let ns = keys::KRUISE_NAMESPACE;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let manager: Vec<Pod> = wait_for("the manager's Pods Ready", LONG, || {
        let pods = pods.clone();
        async move {
            let l = pods
                .list(&ListParams::default().labels("app.kubernetes.io/name=kruise-manager"))
                .await?;
            Ok((!l.items.is_empty() && l.items.iter().all(ready)).then_some(l.items))
        }
    })
    .await
    .expect("manager Ready");
    let daemon: Vec<Pod> = wait_for("the daemon's Pods Ready", LONG, || {
        let pods = pods.clone();
        async move {
            let l = pods
                .list(&ListParams::default().labels("app.kubernetes.io/name=kruise-daemon"))
                .await?;
            Ok((!l.items.is_empty() && l.items.iter().all(ready)).then_some(l.items))
        }
    })
    .await
    .expect("daemon Ready");

    let secrets = json!([{"name": "regcred"}]);
    let linux = json!({"kubernetes.io/os": "linux"});
    for p in &manager {
        let s = spec(p);
        assert_eq!(s["imagePullSecrets"], secrets);
        assert_eq!(s["nodeSelector"], linux);
        assert!(
            s["tolerations"]
                .as_array()
                .expect("tolerations")
                .iter()
                .any(|t| t["key"] == "dedicated" && t["value"] == "kruise"),
            "{}",
            s["tolerations"]
        );
        assert!(
            s["affinity"]["nodeAffinity"].is_object(),
            "{}",
            s["affinity"]
        );
        assert_eq!(
            env(&s["containers"][0], "RUST_LOG").as_deref(),
            Some("info,kruise=debug")
        );
    }
    for p in &daemon {
        let s = spec(p);
        assert_eq!(s["imagePullSecrets"], secrets);
        assert_eq!(s["nodeSelector"], linux);
        assert!(
            s["affinity"]["nodeAffinity"].is_object(),
            "{}",
            s["affinity"]
        );
        let c = &s["containers"][0];
        assert_eq!(c["resources"]["limits"]["memory"], "200Mi");
        assert_eq!(c["resources"]["requests"]["cpu"], "10m");
        assert_eq!(env(c, "HTTPS_PROXY").as_deref(), Some("http://proxy:3128"));
        assert_eq!(env(c, "RUST_LOG").as_deref(), Some("info,kruise=trace"));
        assert!(
            c["args"]
                .as_array()
                .expect("args")
                .iter()
                .any(|a| a == "--socket-file=containerd.sock"),
            "{}",
            c["args"]
        );
        // The daemon names the socket it uses when it starts.
        let name = p.metadata.name.as_deref().expect("name");
        let logs = pods
            .logs(name, &LogParams::default())
            .await
            .expect("daemon logs");
        assert!(
            logs.contains("/hostvarrun/containerd.sock"),
            "the daemon does not use the socket file given:\n{logs}"
        );
    }
    for name in ["kruise-manager", "kruise-daemon"] {
        let sa = Api::<ServiceAccount>::namespaced(client.clone(), ns)
            .get(name)
            .await
            .expect("ServiceAccount");
        let notes = sa.metadata.annotations.unwrap_or_default();
        assert_eq!(
            notes.get("example.com/role").map(String::as_str),
            Some("kruise"),
            "{name}"
        );
    }
    // helm --wait said the workloads are available; their specs say so too.
    let dep = Api::<Deployment>::namespaced(client.clone(), ns)
        .get("kruise-controller-manager")
        .await
        .expect("Deployment");
    assert!(dep.status.and_then(|s| s.ready_replicas).unwrap_or(0) >= 1);
    let ds = Api::<DaemonSet>::namespaced(client.clone(), ns)
        .get("kruise-daemon")
        .await
        .expect("DaemonSet");
    assert!(ds.status.is_some_and(|s| s.number_ready >= 1));

    // The release goes (its pre-delete hook runs with the same pull secrets and placement), then
    // the CRDs it keeps, leaving the cluster as found.
    let out = helm_run(&["uninstall", "kruise-rs", "--wait", "--timeout", "5m"]);
    assert!(
        out.status.success(),
        "helm uninstall: {}",
        text(&out.stderr)
    );
    let run = kk.run_for(&["uninstall"], LONG).await.expect("uninstall");
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(
        Api::<CustomResourceDefinition>::all(client)
            .get_opt("clonesets.apps.kruise.io")
            .await
            .expect("get")
            .is_none(),
        "CRDs left after uninstall"
    );
}
