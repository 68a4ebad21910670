//! Harness of the end-to-end suite: a client for the cluster under test, a namespace per test,
//! the local registry's test images, and waits that report what they last saw when they time out.
//!
//! The suite runs against `$KUBECONFIG` when it is set, else against the local cluster's
//! `.cluster/kubeconfig` (see `hack/cluster.sh`). It never skips: a missing cluster is a failure.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use rand::Rng;

/// Label put on every namespace the suite creates, so leftovers are easy to find and remove.
pub const E2E_LABEL: &str = "kruise-rs.e2e/test";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no cluster to test against: {0} (run `make cluster-up` or set KUBECONFIG)")]
    NoCluster(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("invalid test object: {0}")]
    Json(#[from] serde_json::Error),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("test mode: {0}")]
    Mode(String),
    #[error("timed out after {timeout:?} waiting for {what}; last seen: {last}")]
    Timeout {
        what: String,
        timeout: Duration,
        last: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The repository's root (the e2e crate lives one level below it).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// The registry the test images live in; the local cluster serves one on 127.0.0.1:5000.
pub fn registry() -> String {
    std::env::var("KRUISE_E2E_REGISTRY").unwrap_or_else(|_| "127.0.0.1:5000".to_string())
}

/// The address at which the API server reaches a server the test runs on this host (a webhook
/// of its own): 127.0.0.1 for the local cluster, whose API server runs here;
/// `KRUISE_E2E_HOST_ADDRESS` for a cluster in containers (kind/up.sh: the nodes' gateway).
pub fn host_address() -> String {
    std::env::var("KRUISE_E2E_HOST_ADDRESS").unwrap_or_else(|_| "127.0.0.1".to_string())
}

/// A test image of the local registry, e.g. `image("testapp", "v1")`.
/// testapp: HTTP on :8080, tags v1, v2, v3 (distinct image IDs) and v1-retag (same ID as v1).
/// sidecar: an idler, tags v1 and v2.
pub fn image(name: &str, tag: &str) -> String {
    format!("{}/kruise-rs/{name}:{tag}", registry())
}

/// A client for the cluster under test. In cluster mode it first checks that no dev-mode
/// process runs beside the installed Kruise-rs (see [`mode::check_isolation`]).
pub async fn client() -> Result<Client> {
    Client::try_from(config().await?).map_err(|e| Error::NoCluster(e.to_string()))
}

/// A client that returns 429 and 5xx answers as they come: the default one retries them (with
/// backoff, as a drain would), which hides a refusal a test means to see.
pub async fn client_without_retry() -> Result<Client> {
    let mut config = config().await?;
    config.default_retry = false;
    Client::try_from(config).map_err(|e| Error::NoCluster(e.to_string()))
}

async fn config() -> Result<Config> {
    mode::check_isolation()?;
    let config = if std::env::var_os("KUBECONFIG").is_some() {
        Config::infer()
            .await
            .map_err(|e| Error::NoCluster(e.to_string()))?
    } else {
        let path = repo_root().join(".cluster/kubeconfig");
        let kubeconfig =
            Kubeconfig::read_from(&path).map_err(|e| Error::NoCluster(format!("{path:?}: {e}")))?;
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::NoCluster(e.to_string()))?
    };
    Ok(config)
}

/// A namespace of one test, named `<prefix>-<random>`.
pub struct TestNamespace {
    pub name: String,
    client: Client,
}

impl TestNamespace {
    pub async fn create(client: &Client, prefix: &str) -> Result<Self> {
        let suffix: u32 = rand::rng().random_range(0..0xff_ffff);
        let name = format!("{prefix}-{suffix:06x}");
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {E2E_LABEL: prefix}}
        }))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        // Pods need the namespace's default ServiceAccount, which a controller creates a moment later.
        let sa: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client.clone(), &name);
        wait_for(
            "the default ServiceAccount",
            Duration::from_secs(30),
            || async { Ok(sa.get_opt("default").await?.map(|_| ())) },
        )
        .await?;
        Ok(Self {
            name,
            client: client.clone(),
        })
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Deletes the namespace; a failed test leaves its namespace behind for inspection.
    pub async fn delete(self) -> Result<()> {
        Api::<Namespace>::all(self.client)
            .delete(&self.name, &DeleteParams::background())
            .await?;
        Ok(())
    }
}

/// Runs `work` to completion from a `Drop` of a failing test: the test's runtime cannot be
/// blocked on from inside it, so on a runtime of its own, on a thread of its own.
pub fn on_own_runtime<T, F, Fut>(work: F) -> std::thread::Result<Result<T>>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = Result<T>>,
    T: Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(work())
    })
    .join()
}

/// A Node with no kubelet behind it (a virtual-kubelet stand-in), deleted when dropped even by a
/// failing test: a NotReady node left behind would fail every later health check of the cluster.
pub struct ScratchNode {
    pub name: String,
}

impl ScratchNode {
    pub async fn create(client: &Client, node: &Node) -> Result<Self> {
        let created = Api::<Node>::all(client.clone())
            .create(&PostParams::default(), node)
            .await?;
        Ok(Self {
            name: created.metadata.name.unwrap_or_default(),
        })
    }
}

impl Drop for ScratchNode {
    fn drop(&mut self) {
        let name = self.name.clone();
        // The test's client serves from the test's runtime: a client of its own.
        let deleted = on_own_runtime(move || async move {
            match Api::<Node>::all(client().await?)
                .delete(&name, &DeleteParams::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                Err(e) => Err(Error::Kube(e)),
            }
        });
        match deleted {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("deleting the scratch node {}: {e}", self.name),
            Err(_) => eprintln!("deleting the scratch node {} panicked", self.name),
        }
    }
}

/// Polls `check` every 250 ms until it yields `Some`, or fails after `timeout` with `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let start = Instant::now();
    let mut last = String::from("nothing yet");
    loop {
        match check().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            // A transient API error is worth retrying; the last one is reported on timeout.
            Err(e) => last = e.to_string(),
        }
        if start.elapsed() >= timeout {
            return Err(Error::Timeout {
                what: what.to_string(),
                timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until `check` accepts the pod, reporting the pod's status on timeout.
pub async fn wait_pod(
    api: &Api<Pod>,
    name: &str,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Pod) -> bool,
) -> Result<Pod> {
    let start = Instant::now();
    loop {
        let pod = api.get_opt(name).await?;
        if let Some(p) = &pod
            && check(p)
        {
            return Ok(p.clone());
        }
        if start.elapsed() >= timeout {
            let last = pod
                .and_then(|p| p.status)
                .map(|s| serde_json::to_string(&s).unwrap_or_default())
                .unwrap_or_else(|| "pod not found".to_string());
            return Err(Error::Timeout {
                what: format!("pod {name}: {what}"),
                timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A required node-selector term matching the cluster's first node by its
/// `kubernetes.io/hostname` label (the local cluster has one node).
pub async fn hostname_term(client: &Client) -> serde_json::Value {
    use k8s_openapi::api::core::v1::Node;
    let node = kube::Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .next()
        .expect("a node");
    let key = "kubernetes.io/hostname";
    let hostname = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .cloned()
        .unwrap_or_default();
    serde_json::json!({"matchExpressions": [{"key": key, "operator": "In", "values": [hostname]}]})
}

/// Whether the node's Ready condition is True.
pub fn node_ready(node: &k8s_openapi::api::core::v1::Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether the pod's Ready condition is True.
pub fn pod_ready(pod: &Pod) -> bool {
    kruise_api::pod::is_ready(pod)
}

/// The Pod's in-place update state (`apps.kruise.io/inplace-update-state`); panics when the
/// Pod has none or it is not JSON (tests assert it is there).
pub fn inplace_state(pod: &Pod) -> kruise_api::appspub::InPlaceUpdateState {
    use kube::ResourceExt;
    let raw = pod
        .annotations()
        .get(kruise_api::keys::INPLACE_UPDATE_STATE_ANNOTATION)
        .unwrap_or_else(|| panic!("{}: no in-place update state", pod.name_any()));
    serde_json::from_str(raw).expect("in-place update state JSON")
}

/// The containers of each batch the in-place update state records, in order.
pub fn inplace_batches(state: &kruise_api::appspub::InPlaceUpdateState) -> Vec<Vec<String>> {
    state
        .container_batches_record
        .iter()
        .map(|b| b.containers.clone())
        .collect()
}

/// The status of one of the pod's conditions.
pub fn pod_condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a str> {
    kruise_api::pod::condition(pod, type_).map(|c| c.status.as_str())
}

/// The status of the named container.
pub fn container_status<'a>(
    pod: &'a Pod,
    container: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == container)
}

pub mod advancedcronjob;
pub mod bench;
pub mod broadcastjob;
pub mod chaos;
pub mod cli;
pub mod cloneset;
pub mod crds;
pub mod cri;
pub mod customkind;
pub mod daemonset;
pub mod ephemeraljob;
pub mod kwok;
pub mod manager;
pub mod mode;
pub mod persistentpodstate;
pub mod plugin;
pub mod podprobemarker;
pub mod recorder;
pub mod resourcedistribution;
pub mod sidecarset;
pub mod sidecarterminator;
pub mod statefulset;
pub mod uniteddeployment;
pub mod workloadspread;
