//! The kwok scale cluster (`hack/scale-cluster.sh`) as the multi-node tests use it: a client for
//! it, a kruise-manager of this tree run as a host process for the length of a test, and fake
//! Nodes a test creates (kwok plays their kubelet) and deletes again.
//!
//! The scale cluster has no controller-manager: no ServiceAccounts, no garbage collector and no
//! namespace controller. So the tests reuse one namespace (a deleted one would stay Terminating)
//! and delete what they created themselves: the workload first, then its Pods, then their Nodes.
//! It is shared: run these tests under `flock /tmp/kruise-scale.lock`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config, ResourceExt};
use serde_json::{Value, json};

use crate::bench::process::{HealthError, ProcessGuard};
use crate::{E2E_LABEL, Error, Result, wait_for};

/// Ports of the manager these tests start: neither dev mode's (9876, 8080, 8000) nor the scale
/// benchmark's (19876, 18080, 18000).
const WEBHOOK_PORT: u16 = 29876;
const METRICS_ADDR: &str = "127.0.0.1:28080";
const HEALTH_ADDR: &str = "127.0.0.1:28000";

/// The annotation kwok's `--manage-nodes-with-annotation-selector` picks its Nodes by.
const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// Where the scale cluster keeps its state (kubeconfig, logs, PID files).
pub fn state_dir() -> PathBuf {
    crate::repo_root().join(".cluster/scale")
}

/// `KRUISE_E2E_SCALE_KUBECONFIG`, else the scale cluster's own kubeconfig. `KUBECONFIG` is not
/// read: under `make test` it names the local cluster.
pub fn kubeconfig() -> PathBuf {
    std::env::var_os("KRUISE_E2E_SCALE_KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| state_dir().join("kubeconfig"))
}

/// A client for the scale cluster; a clear failure when it is not up.
pub async fn client() -> Result<Client> {
    let path = kubeconfig();
    let no_cluster = |e: String| {
        Error::NoCluster(format!(
            "the kwok scale cluster ({}): {e}; bring it up with `hack/scale-cluster.sh up`",
            path.display()
        ))
    };
    let kc = Kubeconfig::read_from(&path).map_err(|e| no_cluster(e.to_string()))?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| no_cluster(e.to_string()))?;
    let client = Client::try_from(config).map_err(|e| no_cluster(e.to_string()))?;
    client
        .apiserver_version()
        .await
        .map_err(|e| no_cluster(e.to_string()))?;
    Ok(client)
}

/// The namespace `name`, created when missing (and never deleted: see the module doc).
pub async fn namespace(client: &Client, name: &str) -> Result<()> {
    let api = Api::<Namespace>::all(client.clone());
    if api.get_opt(name).await?.is_none() {
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {E2E_LABEL: name}}
        }))?;
        api.create(&PostParams::default(), &ns).await?;
    }
    Ok(())
}

/// The manager binary these tests start: `KRUISE_E2E_MANAGER`, else the debug build in the
/// target directory (what `cargo build --bins` makes).
pub fn manager_bin() -> PathBuf {
    std::env::var_os("KRUISE_E2E_MANAGER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            crate::bench::args::target_dir()
                .join("debug")
                .join("kruise-manager")
        })
}

/// A kruise-manager of this tree serving the scale cluster, with its webhook on this host (the
/// scale cluster's API server runs here too). Stopped by PID when dropped; its PID file lets
/// `hack/scale-cluster.sh down` stop it should the test be killed.
pub struct Manager(ProcessGuard);

impl Manager {
    pub async fn start(name: &str) -> Result<Self> {
        let bin = manager_bin();
        if !bin.exists() {
            return Err(Error::Mode(format!(
                "{} is missing: build it with `cargo build -p kruise-manager --bins` or set KRUISE_E2E_MANAGER",
                bin.display()
            )));
        }
        let logs = state_dir().join("logs");
        let pids = state_dir().join("pids");
        std::fs::create_dir_all(&logs)?;
        std::fs::create_dir_all(&pids)?;
        let log_path = logs.join(format!("kruise-manager-{name}.log"));
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = std::process::Command::new(&bin);
        cmd.arg("--kubeconfig")
            .arg(kubeconfig())
            .args(["--webhook-host", "127.0.0.1"])
            .args(["--webhook-port", &WEBHOOK_PORT.to_string()])
            .args(["--metrics-addr", METRICS_ADDR, "--health-addr", HEALTH_ADDR])
            .args(["--leader-elect", "false"])
            .env("POD_NAMESPACE", "kruise-system")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let mut guard = ProcessGuard::spawn(&mut cmd, Duration::from_secs(10))?;
        guard.write_pid_file(pids.join("kruise-manager.pid"))?;
        let ready = guard
            .wait_healthy(
                HEALTH_ADDR,
                "/readyz",
                Duration::from_secs(120),
                Duration::from_millis(250),
            )
            .await;
        match ready {
            Ok(()) => Ok(Self(guard)),
            Err(HealthError::Exited(status)) => Err(Error::Mode(format!(
                "kruise-manager exited ({status}) before it was ready; see {}",
                log_path.display()
            ))),
            Err(e) => Err(Error::Mode(format!(
                "kruise-manager: {e}; see {}",
                log_path.display()
            ))),
        }
    }

    /// SIGTERM, then up to 10 s before it is killed.
    pub async fn stop(self) {
        self.0.stop(Duration::from_secs(10)).await;
    }
}

/// A fake Node for kwok to run.
#[derive(Clone, Debug, Default)]
pub struct FakeNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Taints as JSON (`{"key", "value", "effect"}`).
    pub taints: Vec<Value>,
}

impl FakeNode {
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }

    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints
            .push(json!({"key": key, "value": value, "effect": effect}));
        self
    }

    fn manifest(&self) -> Result<Node> {
        let mut labels = self.labels.clone();
        labels.insert("kubernetes.io/hostname".into(), self.name.clone());
        labels.insert("type".into(), "kwok-e2e".into());
        Ok(serde_json::from_value(json!({
            "metadata": {
                "name": self.name,
                "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                "labels": labels,
            },
            "spec": {"taints": self.taints},
        }))?)
    }
}

fn node_ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Creates the Nodes (replacing leftovers of a killed run) and waits until kwok reports them
/// Ready.
pub async fn create_nodes(client: &Client, nodes: &[FakeNode]) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    for n in nodes {
        if api.get_opt(&n.name).await?.is_some() {
            delete_nodes(client, std::slice::from_ref(&n.name)).await?;
        }
        api.create(&PostParams::default(), &n.manifest()?).await?;
    }
    for n in nodes {
        wait_for(
            &format!("kwok to make Node {} Ready", n.name),
            Duration::from_secs(60),
            || async { Ok(api.get_opt(&n.name).await?.filter(node_ready).map(|_| ())) },
        )
        .await?;
    }
    Ok(())
}

/// A test run on fake Nodes of its own: a unique id (`{prefix}-{6 hex digits}`) and `count`
/// Nodes named `{id}-00`, `{id}-01`, ..., each labelled `label: id`, so a workload whose
/// nodeSelector names that label runs on this run's Nodes only.
pub fn run_nodes(prefix: &str, label: &str, count: usize) -> (String, Vec<FakeNode>) {
    let suffix: u32 = rand::Rng::random_range(&mut rand::rng(), 0..0xff_ffff);
    let run = format!("{prefix}-{suffix:06x}");
    let nodes = (0..count)
        .map(|i| FakeNode::new(format!("{run}-{i:02}")).label(label, &run))
        .collect();
    (run, nodes)
}

/// Deletes the workload `name` and waits until it is gone (else it recreates its Pods), then
/// deletes its Pods (`app=name`). The Pods are deleted whether or not the workload went; each
/// step's result is returned for the caller to check after the rest of its clean-up.
pub async fn delete_workload_and_pods(
    client: &Client,
    workloads: &Api<DynamicObject>,
    namespace: &str,
    name: &str,
    wait: Duration,
) -> (Result<()>, Result<()>) {
    let _ = workloads.delete(name, &DeleteParams::default()).await;
    let gone = wait_for(&format!("{name} deleted"), wait, || async {
        Ok(workloads.get_opt(name).await?.is_none().then_some(()))
    })
    .await;
    let pods = delete_pods(
        &Api::<Pod>::namespaced(client.clone(), namespace),
        &format!("app={name}"),
    )
    .await;
    (gone, pods)
}

/// Deletes the Nodes and waits until they are gone.
pub async fn delete_nodes(client: &Client, names: &[String]) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    for name in names {
        let _ = api.delete(name, &DeleteParams::default()).await;
    }
    for name in names {
        wait_for(
            &format!("Node {name} deleted"),
            Duration::from_secs(60),
            || async { Ok(api.get_opt(name).await?.is_none().then_some(())) },
        )
        .await?;
    }
    Ok(())
}

/// Deletes the Pods of `selector` (no garbage collector does) and waits until they are gone.
pub async fn delete_pods(pods: &Api<Pod>, selector: &str) -> Result<()> {
    wait_for(
        &format!("Pods {selector} deleted"),
        Duration::from_secs(60),
        || async {
            let left = pods
                .list_metadata(&ListParams::default().labels(selector))
                .await?;
            for p in &left.items {
                // Already going: kwok removes it; a failed delete is retried next round.
                if p.metadata.deletion_timestamp.is_none() {
                    let _ = pods.delete(&p.name_any(), &DeleteParams::default()).await;
                }
            }
            Ok(left.items.is_empty().then_some(()))
        },
    )
    .await
}

/// Makes sure the CRD `name` (e.g. `workloadspreads.apps.kruise.io`) is installed with this
/// tree's versions and established: the scale cluster may have been brought up before the kind
/// (or a version of it) existed. One installed with the same versions is left alone, as a
/// kruise-manager serving this cluster points its conversion at its own address, which an
/// apply of ours (a Service reference) would clash with.
pub async fn ensure_crd(client: &Client, name: &str) -> Result<()> {
    let crd = kruise_api::crds::all()
        .map_err(|e| Error::Mode(format!("CRDs: {e}")))?
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .ok_or_else(|| Error::Mode(format!("no CRD {name} in this tree")))?;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let versions = |c: &CustomResourceDefinition| -> Vec<String> {
        c.spec.versions.iter().map(|v| v.name.clone()).collect()
    };
    let current = api.get_opt(name).await?;
    if current.as_ref().map(versions) != Some(versions(&crd)) {
        api.patch(
            name,
            &PatchParams::apply("kruise-e2e").force(),
            &Patch::Apply(&crd),
        )
        .await?;
    }
    wait_for(
        &format!("CRD {name} established"),
        Duration::from_secs(60),
        || async {
            let c = api.get(name).await?;
            let established = c
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(established.then_some(()))
        },
    )
    .await
}
