//! Controller-at-scale benchmark on the scale cluster (hack/scale-cluster.sh: a control plane
//! and kwok's fake nodes). For each size N: a CloneSet of N Pods (InPlaceIfPossible,
//! maxUnavailable 100%) gets a new image, and we time how long kruise-manager takes to issue every
//! in-place patch (a pod watch sees every Pod's spec on the new image) and to finish the rollout
//! (status.updatedReadyReplicas == N). The floor: a minimal client sending the same two patches
//! per Pod (the InPlaceUpdateReady=False status patch, then the guarded JSON patch of labels,
//! the in-place state annotation and the image) to N bare Pods, through the same client rate
//! limiter with the same QPS and burst. Manager and floor runs are interleaved; medians.
//!
//! The system under test is Kruise-rs (kruise-manager), OpenKruise (the Go original's manager,
//! built by hack/build-openkruise.sh), or both (`--systems kruise-rs,openkruise`). Both share
//! CRD and webhook configuration names, so they take turns: before a turn of the other system,
//! `hack/scale-cluster.sh use SYSTEM` installs that system's CRDs and webhook configurations.
//! For each size, run r takes the systems in the given order when r is even and reversed when
//! it is odd (A B B A ...), so drift of the machine falls on both alike. The floor runs in the
//! first system's turn, beside its live manager, as it always ran beside kruise-manager.
//!
//! Each turn starts a fresh manager process (so RSS belongs to that size and run) from a
//! release build; its PID file goes to .cluster/scale/pids so `hack/scale-cluster.sh down`
//! stops it even if this program is killed. Neither system's daemon runs: kwok's nodes have no
//! container runtime, and kwok's stages (hack/kwok/stages.yaml) play the kubelet's part.
//!
//! Usage: kruise-scale-bench [--sizes 1000,5000] [--runs 3] [--systems kruise-rs,openkruise]
//!        [--qps Q] [--burst B] [--concurrency C] [--manager BIN] [--openkruise-manager BIN]
//!        [--kubeconfig FILE] [--append FILE]   (`--help` for more)

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kruise_api::keys;
use kruise_e2e::bench::args::{Common, at_least_one, release_bin};
use kruise_e2e::bench::process::{HealthError, ProcessGuard, http_get, metric};
use kruise_e2e::bench::stats::{median, mib, ratio, secs, secs_list};
use kruise_e2e::bench::{self, rfc3339_now};
use kruise_e2e::{Error, Result, cloneset, wait_for};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

const IMAGE_V1: &str = "kwok.local/kruise-rs/app:v1";
const IMAGE_V2: &str = "kwok.local/kruise-rs/app:v2";
/// Ports of the benchmark's manager; the local cluster's dev manager uses 9876/8080/8000.
const WEBHOOK_PORT: u16 = 19876;
const METRICS_ADDR: &str = "127.0.0.1:18080";
const HEALTH_ADDR: &str = "127.0.0.1:18000";
/// Requests the setup (creating and deleting bare Pods) keeps in flight; not measured.
const SETUP_CONCURRENCY: usize = 64;

/// A system under test: whose manager runs the CloneSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
enum System {
    /// Kruise-rs: kruise-manager.
    KruiseRs,
    /// OpenKruise, the Go original: its `manager`.
    Openkruise,
}

impl System {
    fn label(self) -> &'static str {
        match self {
            Self::KruiseRs => "Kruise-rs",
            Self::Openkruise => "OpenKruise",
        }
    }

    /// The argument of `hack/scale-cluster.sh use`.
    fn arg(self) -> &'static str {
        match self {
            Self::KruiseRs => "kruise-rs",
            Self::Openkruise => "openkruise",
        }
    }

    /// The name of its log and PID files under .cluster/scale (what `hack/scale-cluster.sh down`
    /// stops).
    fn process(self) -> &'static str {
        match self {
            Self::KruiseRs => "kruise-manager",
            Self::Openkruise => "openkruise-manager",
        }
    }

    /// The live heap bytes its /metrics exports: ours from the counting allocator, OpenKruise's
    /// from the Go runtime (in-use heap spans; Go exports no peak).
    fn heap_live_metric(self) -> &'static str {
        match self {
            Self::KruiseRs => "kruise_manager_heap_live_bytes",
            Self::Openkruise => "go_memstats_heap_inuse_bytes",
        }
    }

    fn heap_peak_metric(self) -> Option<&'static str> {
        match self {
            Self::KruiseRs => Some("kruise_manager_heap_peak_bytes"),
            Self::Openkruise => None,
        }
    }
}

/// The OpenKruise version the benchmark names (hack/build-openkruise.sh's pin).
fn openkruise_version() -> String {
    std::env::var("OPENKRUISE_VERSION").unwrap_or_else(|_| "v1.9.0".into())
}

/// Where hack/build-openkruise.sh puts OpenKruise's manager: `$KRS_CACHE`, else
/// `$XDG_CACHE_HOME/kruise-rs`, else `~/.cache/kruise-rs`, as hack/versions.sh.
fn openkruise_manager_default() -> PathBuf {
    let cache = std::env::var_os("KRS_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("kruise-rs")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/kruise-rs")))
        .unwrap_or_else(|| PathBuf::from(".cache/kruise-rs"));
    cache
        .join(format!("openkruise-{}", openkruise_version()))
        .join("bin/manager")
}

/// Controller-at-scale benchmark: kruise-manager (and OpenKruise's manager) against a floor
/// client on the scale cluster.
#[derive(Debug, Parser)]
#[command(name = "kruise-scale-bench")]
struct Args {
    /// CloneSet sizes to measure, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000", value_parser = at_least_one)]
    sizes: Vec<usize>,
    /// Systems under test, comma separated, taking turns A B B A for each size.
    #[arg(long, value_delimiter = ',', default_value = "kruise-rs")]
    systems: Vec<System>,
    /// Client-side QPS limit of kruise-manager and the floor (0: none).
    #[arg(long, default_value_t = 0.0)]
    qps: f32,
    /// Client-side burst of kruise-manager and the floor.
    #[arg(long, default_value_t = 0)]
    burst: u32,
    /// OpenKruise's client QPS and burst (`--rest-config-qps`, `--rest-config-burst`; its
    /// defaults are 30 and 50, and it ignores 0): set far above what the API server serves here,
    /// the equivalent of no limit, as kruise-manager runs with `--kube-api-qps 0`.
    #[arg(long, default_value_t = 100_000)]
    openkruise_qps: u32,
    #[arg(long, default_value_t = 100_000)]
    openkruise_burst: u32,
    /// Pods' patches the floor keeps in flight.
    #[arg(long, default_value_t = 32, value_parser = at_least_one)]
    concurrency: usize,
    /// The manager to start (a release build).
    #[arg(long, value_name = "BIN", default_value_os_t = release_bin("kruise-manager"))]
    manager: PathBuf,
    /// OpenKruise's manager (hack/build-openkruise.sh builds it).
    #[arg(long, value_name = "BIN", default_value_os_t = openkruise_manager_default())]
    openkruise_manager: PathBuf,
    /// The scale cluster's kubeconfig.
    #[arg(long, value_name = "FILE", default_value_os_t = scale_state().join("kubeconfig"))]
    kubeconfig: PathBuf,
    /// Seconds to let the manager settle before "steady" is read (after the N Pods are ready)
    /// and before "after" is read (after the rollout completed): what the manager keeps, not
    /// what a burst of work just left in the allocator.
    #[arg(long, default_value_t = 15)]
    settle: u64,
    #[command(flatten)]
    common: Common,
}

/// The environment that changes how the manager allocates or how many requests it keeps in
/// flight (it inherits ours), as the table reports it.
fn allocator_settings() -> String {
    let set: Vec<String> = [
        "KRUISE_MALLOC_TRIM_SECS",
        "MALLOC_ARENA_MAX",
        "KRUISE_KUBE_API_MAX_IN_FLIGHT",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
    .collect();
    if set.is_empty() {
        "the manager's defaults".into()
    } else {
        set.join(" ")
    }
}

/// The cargo profile a binary was built with, read from its directory (`target/release/`,
/// `target/debug/`, after symbolic links): the table says which was measured.
fn build_profile(bin: &std::path::Path) -> &'static str {
    let bin = std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf());
    match bin
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|d| d.to_str())
    {
        Some("release") => "release",
        Some("debug") => "debug",
        _ => "(profile unknown)",
    }
}

/// Where the scale cluster keeps its state (kubeconfig, logs, PID files).
fn scale_state() -> PathBuf {
    kruise_e2e::repo_root().join(".cluster/scale")
}

fn other(msg: impl Into<String>) -> Error {
    Error::Io(std::io::Error::other(msg.into()))
}

/// Generous: creating 5,000 Pods goes through the manager's slow start, the webhook, the
/// scheduler and kwok.
fn timeout_for(n: usize) -> Duration {
    Duration::from_secs(180 + (n as u64) / 4)
}

// ---------------------------------------------------------------------------------------------
// The manager process.

/// The manager under test; its guard kills it at once when dropped and removes its PID file.
struct Manager {
    guard: ProcessGuard,
    system: System,
}

impl Manager {
    fn start(args: &Args, system: System, n: usize, run: usize) -> Result<Self> {
        let state = scale_state();
        let logs = state.join("logs");
        let pids = state.join("pids");
        std::fs::create_dir_all(&logs)?;
        std::fs::create_dir_all(&pids)?;
        let name = system.process();
        let log = std::fs::File::create(logs.join(format!("{name}-{n}-{}.log", run + 1)))?;
        let bin = match system {
            System::KruiseRs => &args.manager,
            System::Openkruise => &args.openkruise_manager,
        };
        let mut cmd = std::process::Command::new(bin);
        match system {
            System::KruiseRs => {
                cmd.arg("--kubeconfig")
                    .arg(&args.kubeconfig)
                    .args(["--webhook-host", "127.0.0.1"])
                    .args(["--webhook-port", &WEBHOOK_PORT.to_string()])
                    .args(["--metrics-addr", METRICS_ADDR, "--health-addr", HEALTH_ADDR])
                    .args(["--leader-elect", "false"])
                    .args(["--kube-api-qps", &args.qps.to_string()])
                    .args(["--kube-api-burst", &args.burst.to_string()])
                    .env(
                        "RUST_LOG",
                        std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
                    );
            }
            System::Openkruise => {
                // Its webhook at a host URL (WEBHOOK_HOST), on the port ours uses; it keeps its
                // certificates in a directory of the scale cluster's state.
                let certs = state.join("openkruise-certs");
                std::fs::create_dir_all(&certs)?;
                cmd.arg(format!("--kubeconfig={}", args.kubeconfig.display()))
                    .arg("--enable-leader-election=false")
                    .arg(format!("--metrics-addr={METRICS_ADDR}"))
                    .arg(format!("--health-probe-addr={HEALTH_ADDR}"))
                    .arg("--enable-pprof=false")
                    .arg(format!("--rest-config-qps={}", args.openkruise_qps))
                    .arg(format!("--rest-config-burst={}", args.openkruise_burst))
                    .env("WEBHOOK_HOST", "127.0.0.1")
                    .env("WEBHOOK_PORT", WEBHOOK_PORT.to_string())
                    .env("WEBHOOK_CERT_DIR", &certs);
            }
        }
        cmd.env("POD_NAMESPACE", "kruise-system")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let mut guard = ProcessGuard::spawn(&mut cmd, Duration::ZERO)
            .map_err(|e| other(format!("starting {}: {e}", bin.display())))?;
        guard.write_pid_file(pids.join(format!("{name}.pid")))?;
        Ok(Self { guard, system })
    }

    fn pid(&self) -> u32 {
        self.guard.pid()
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let name = self.system.process();
        let ready = self
            .guard
            .wait_healthy(
                HEALTH_ADDR,
                "/readyz",
                Duration::from_secs(120),
                Duration::from_millis(250),
            )
            .await;
        match ready {
            Ok(()) => Ok(()),
            Err(HealthError::Exited(status)) => Err(other(format!(
                "{name} exited ({status}) before it was ready; see .cluster/scale/logs/"
            ))),
            Err(HealthError::Timeout(_)) => Err(other(format!("{name} not ready after 120 s"))),
            Err(HealthError::Io(e)) => Err(e.into()),
        }
    }

    /// SIGTERM, then SIGKILL after 15 s.
    async fn stop(self) {
        self.guard.stop(Duration::from_secs(15)).await;
    }
}

/// Installs `system`'s CRDs and webhook configurations on the scale cluster
/// (`hack/scale-cluster.sh use`), with no manager running.
async fn use_system(system: System) -> Result<()> {
    let script = kruise_e2e::repo_root().join("hack/scale-cluster.sh");
    let status = tokio::process::Command::new(&script)
        .args(["use", system.arg()])
        .stdin(std::process::Stdio::null())
        .status()
        .await?;
    if status.success() {
        Ok(())
    } else {
        Err(other(format!(
            "{} use {}: {status}",
            script.display(),
            system.arg()
        )))
    }
}

// ---------------------------------------------------------------------------------------------
// Observing the patches.

/// Watches the Pods of a selector and notes when all `n` of them have the new image in their
/// spec — the moment the last in-place patch reached the API server.
struct ImageWatch {
    synced: Arc<AtomicBool>,
    /// Pod updates seen after the initial list: every write to a Pod (the manager's and
    /// kwok's), which is the work a rollout costs the API server.
    writes: Arc<AtomicUsize>,
    done: Arc<Mutex<Option<Instant>>>,
    task: tokio::task::JoinHandle<()>,
}

fn has_image(p: &Pod, image: &str) -> bool {
    p.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .any(|c| c.image.as_deref() == Some(image))
    })
}

impl ImageWatch {
    async fn start(api: Api<Pod>, selector: &str, image: &str, n: usize) -> Result<Self> {
        use kube::runtime::watcher::{self, Event};
        let synced = Arc::new(AtomicBool::new(false));
        let writes = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(Mutex::new(None));
        let (s, d, image) = (synced.clone(), done.clone(), image.to_string());
        let w = writes.clone();
        let cfg = watcher::Config::default().labels(selector);
        let task = tokio::spawn(async move {
            let mut updated: HashSet<String> = HashSet::new();
            let mut events = watcher::watcher(api, cfg).boxed();
            while let Some(ev) = events.next().await {
                if let Ok(Event::Apply(_)) = ev {
                    w.fetch_add(1, Ordering::Relaxed);
                }
                match ev {
                    Ok(Event::Apply(p) | Event::InitApply(p)) => {
                        if has_image(&p, &image) {
                            updated.insert(p.name_any());
                        } else {
                            updated.remove(&p.name_any());
                        }
                    }
                    Ok(Event::Delete(p)) => {
                        updated.remove(&p.name_any());
                    }
                    Ok(Event::InitDone) => s.store(true, Ordering::SeqCst),
                    Ok(Event::Init) | Err(_) => {}
                }
                if updated.len() >= n
                    && let Ok(mut d) = d.lock()
                {
                    d.get_or_insert_with(Instant::now);
                }
            }
        });
        let w = Self {
            synced,
            writes,
            done,
            task,
        };
        wait_for("the pod watch to sync", Duration::from_secs(60), || async {
            Ok(w.synced.load(Ordering::SeqCst).then_some(()))
        })
        .await?;
        Ok(w)
    }

    async fn wait_done(&self, timeout: Duration) -> Result<Instant> {
        let start = Instant::now();
        loop {
            if let Some(t) = self.done.lock().ok().and_then(|d| *d) {
                return Ok(t);
            }
            if start.elapsed() > timeout {
                return Err(other("not every pod was patched in time"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for ImageWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---------------------------------------------------------------------------------------------
// Namespaces and Pods. The scale cluster has no controller-manager: no ServiceAccounts to wait
// for, and no garbage collector, so Pods are deleted here.

async fn create_ns(client: &Client, name: &str) -> Result<Api<Pod>> {
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {kruise_e2e::E2E_LABEL: "scale-bench"}}
    }))?;
    let api = Api::<Namespace>::all(client.clone());
    if api.get_opt(name).await?.is_none() {
        api.create(&PostParams::default(), &ns).await?;
    }
    Ok(Api::namespaced(client.clone(), name))
}

/// Deletes the Pods one by one (one delete-collection of 5,000 Pods outlives the client's
/// request timeout), retrying on errors, and waits until they are gone.
async fn delete_pods(pods: &Api<Pod>, selector: &str, n: usize) -> Result<()> {
    wait_for(
        &format!("{selector} pods deleted"),
        timeout_for(n),
        || async {
            let left = pods
                .list_metadata(&ListParams::default().labels(selector))
                .await?;
            if left.items.is_empty() {
                return Ok(Some(()));
            }
            let live = left
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| p.name_any());
            // Errors (a Pod already gone, a dropped connection) are retried by the next round.
            stream::iter(live)
                .for_each_concurrent(SETUP_CONCURRENCY, |name| async move {
                    let _ = pods.delete(&name, &DeleteParams::default()).await;
                })
                .await;
            Ok(None)
        },
    )
    .await
}

fn pod_spec(image: &str) -> serde_json::Value {
    json!({
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "app", "image": image}]
    })
}

// ---------------------------------------------------------------------------------------------
// One manager run and one floor run.

struct ManagerSample {
    patched: Duration,
    complete: Duration,
    rss_steady_kib: u64,
    rss_peak_kib: u64,
    /// Live heap bytes (the manager's counting allocator; OpenKruise's Go heap in use) when the
    /// N Pods are ready, and the most the manager ever held, read after the rollout (None: not
    /// exported).
    heap_steady: Option<u64>,
    heap_peak: Option<u64>,
    /// RSS and live heap once the manager settled after the rollout.
    rss_after_kib: u64,
    heap_after: Option<u64>,
    /// Pod writes a watch saw from the image change to rollout complete.
    pod_writes: usize,
    cpu: Duration,
}

/// A byte count the manager exports on /metrics (None when it cannot be read).
fn manager_metric(name: &str) -> Option<u64> {
    http_get(METRICS_ADDR, "/metrics")
        .and_then(|t| metric(&t, name))
        .map(|v| v as u64)
}

/// Waits until the API server admits the CloneSet (a server-side dry run): the manager's
/// webhook serves and its configurations point at it. Readiness alone does not say so for
/// OpenKruise, which patches its configurations after it reports ready.
async fn wait_admitted(
    api: &Api<kube::api::DynamicObject>,
    cs: &kube::api::DynamicObject,
) -> Result<()> {
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    wait_for(
        "the manager's webhook to admit a CloneSet",
        Duration::from_secs(120),
        // A refusal is retried, and the last one is what a timeout reports.
        || async { Ok(api.create(&dry, cs).await.map(|_| Some(()))?) },
    )
    .await
}

async fn manager_run(
    client: &Client,
    system: System,
    pid: u32,
    n: usize,
    run: usize,
    settle: Duration,
) -> Result<ManagerSample> {
    let tag = match system {
        System::KruiseRs => "cs",
        System::Openkruise => "ok",
    };
    let ns = format!("scale-{tag}-{n}-{run}");
    let pods = create_ns(client, &ns).await?;
    let api = cloneset::api(client, &ns);
    let name = "scale";
    let cs: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": keys::APPS_V1BETA1,
        "kind": "CloneSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": n,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec(IMAGE_V1)},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}}
        }
    }))?;
    wait_admitted(&api, &cs).await?;
    api.create(&PostParams::default(), &cs).await?;
    let n64 = n as i64;
    cloneset::wait_status(
        &api,
        name,
        &format!("{n} pods of the CloneSet ready"),
        timeout_for(n),
        |cs| cloneset::status_i64(cs, "readyReplicas") == n64,
    )
    .await?;
    tokio::time::sleep(settle).await;
    let rss_steady_kib = bench::rss_kib(pid).unwrap_or(0);
    let heap_steady = manager_metric(system.heap_live_metric());
    let watch = ImageWatch::start(pods.clone(), &format!("app={name}"), IMAGE_V2, n).await?;
    let rss = bench::RssPeak::start(pid);
    let cpu0 = bench::cpu_time(pid).unwrap_or_default();

    let start = Instant::now();
    cloneset::json_patch(
        &api,
        name,
        json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": IMAGE_V2}]),
    )
    .await?;
    let patched = watch.wait_done(timeout_for(n)).await? - start;
    cloneset::wait_status(
        &api,
        name,
        &format!("{n} pods updated and ready"),
        timeout_for(n),
        |cs| {
            cloneset::status_i64(cs, "updatedReadyReplicas") == n64
                && cloneset::status_i64(cs, "readyReplicas") == n64
        },
    )
    .await?;
    let complete = start.elapsed();
    let cpu = bench::cpu_time(pid)
        .unwrap_or_default()
        .saturating_sub(cpu0);
    let rss_peak_kib = rss.stop();
    let heap_peak = system.heap_peak_metric().and_then(manager_metric);
    let pod_writes = watch.writes.load(Ordering::Relaxed);
    drop(watch);
    tokio::time::sleep(settle).await;
    let sample = ManagerSample {
        patched,
        complete,
        rss_steady_kib,
        rss_peak_kib,
        heap_steady,
        heap_peak,
        rss_after_kib: bench::rss_kib(pid).unwrap_or(0),
        heap_after: manager_metric(system.heap_live_metric()),
        pod_writes,
        cpu,
    };
    eprintln!(
        "N={n} run {} {}: manager patched all in {}s, rollout complete in {}s, cpu {}s, rss {} MiB steady / {} MiB peak / {} MiB after, heap {} steady / {} peak / {} after MiB",
        run + 1,
        system.label(),
        secs(sample.patched),
        secs(sample.complete),
        secs(sample.cpu),
        sample.rss_steady_kib / 1024,
        sample.rss_peak_kib / 1024,
        sample.rss_after_kib / 1024,
        heap_mib(sample.heap_steady),
        heap_mib(sample.heap_peak),
        heap_mib(sample.heap_after)
    );

    // Without a garbage collector the Pods stay: delete the CloneSet first (else it recreates
    // them), then its Pods. A failed delete is retried until the CloneSet is gone.
    wait_for("the CloneSet deleted", timeout_for(n), || async {
        let _ = api.delete(name, &DeleteParams::default()).await;
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await?;
    delete_pods(&pods, &format!("app={name}"), n).await?;
    Ok(sample)
}

/// The two writes the in-place engine makes per Pod, with the same guards: the status patch
/// that sets InPlaceUpdateReady False, then the JSON patch, guarded by the resourceVersion the
/// status patch returned, of the revision label, the in-place state annotation and the image.
/// A conflict re-reads the Pod and tries again, as the engine does.
async fn floor_patch(pods: &Api<Pod>, pod: &Pod) -> Result<()> {
    let name = pod.name_any();
    let mut current = pod.clone();
    for _ in 0..5 {
        let now = rfc3339_now();
        let rv = current.resource_version().unwrap_or_default();
        let status: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/status/conditions/-", "value": {
                "type": keys::INPLACE_UPDATE_READY, "status": "False",
                "reason": keys::REASON_START_INPLACE_UPDATE, "lastTransitionTime": now}}
        ]))?;
        let after = match pods
            .patch_status(&name, &PatchParams::default(), &Patch::Json::<()>(status))
            .await
        {
            Ok(p) => p,
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                current = pods.get(&name).await?;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let state = json!({
            "revision": "floor-v2",
            "updateTimestamp": now,
            "lastContainerStatuses": {"app": {"imageID": format!("kwok://{IMAGE_V1}")}},
            "updateImages": true,
            "containerBatchesRecord": [{"timestamp": now, "containers": ["app"]}]
        })
        .to_string();
        let spec: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": "/metadata/resourceVersion", "value": after.resource_version().unwrap_or_default()},
            {"op": "add", "path": pointer("/metadata/labels", keys::CONTROLLER_REVISION_HASH_LABEL), "value": "floor-v2"},
            {"op": "add", "path": pointer("/metadata/annotations", keys::INPLACE_UPDATE_STATE_ANNOTATION), "value": state},
            {"op": "replace", "path": "/spec/containers/0/image", "value": IMAGE_V2}
        ]))?;
        match pods
            .patch(&name, &PatchParams::default(), &Patch::Json::<()>(spec))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.is_conflict() => {
                current = pods.get(&name).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(other(format!(
        "pod {name}: still conflicting after 5 attempts"
    )))
}

/// `key` under the JSON pointer `parent`, escaped as RFC 6901 wants (`~` and `/`).
fn pointer(parent: &str, key: &str) -> String {
    format!("{parent}/{}", key.replace('~', "~0").replace('/', "~1"))
}

async fn floor_run(
    client: &Client,
    limited: &Client,
    n: usize,
    run: usize,
    concurrency: usize,
) -> Result<Duration> {
    let ns = format!("scale-floor-{n}-{run}");
    let pods = create_ns(client, &ns).await?;
    let selector = "app=floor";
    stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "metadata": {
                        "name": format!("floor-{i}"),
                        "labels": {"app": "floor"},
                        "annotations": {"kruise-rs.bench/floor": "true"}
                    },
                    "spec": pod_spec(IMAGE_V1)
                }))?;
                pods.create(&PostParams::default(), &pod).await?;
                Ok::<_, Error>(())
            }
        })
        .buffer_unordered(SETUP_CONCURRENCY)
        .try_collect::<Vec<_>>()
        .await?;
    let running = wait_for(
        &format!("{n} floor pods running"),
        timeout_for(n),
        || async {
            let list = pods.list(&ListParams::default().labels(selector)).await?;
            let running = list
                .items
                .iter()
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .is_some_and(|ph| ph == "Running")
                })
                .count();
            Ok((running == n).then_some(list.items))
        },
    )
    .await?;
    let watch = ImageWatch::start(pods.clone(), selector, IMAGE_V2, n).await?;
    let limited_pods: Api<Pod> = Api::namespaced(limited.clone(), &ns);

    let start = Instant::now();
    stream::iter(running.iter())
        .map(|p| floor_patch(&limited_pods, p))
        .buffer_unordered(concurrency)
        .try_collect::<Vec<_>>()
        .await?;
    let patched = watch.wait_done(timeout_for(n)).await? - start;
    drop(watch);
    delete_pods(&pods, selector, n).await?;
    Ok(patched)
}

// ---------------------------------------------------------------------------------------------

/// Heap bytes as MiB with one decimal, or n/a when the manager does not export them.
fn heap_mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "n/a".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

/// The larger of two readings, either of which may be missing.
fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// One system's samples at one size.
#[derive(Default)]
struct SystemResult {
    patched: Vec<Duration>,
    complete: Vec<Duration>,
    cpu: Vec<Duration>,
    rss_steady_kib: u64,
    rss_peak_kib: u64,
    heap_steady: Option<u64>,
    heap_peak: Option<u64>,
    rss_after_kib: u64,
    heap_after: Option<u64>,
    pod_writes: Vec<usize>,
}

impl SystemResult {
    fn add(&mut self, m: ManagerSample) {
        self.patched.push(m.patched);
        self.complete.push(m.complete);
        self.cpu.push(m.cpu);
        self.rss_steady_kib = self.rss_steady_kib.max(m.rss_steady_kib);
        self.rss_peak_kib = self.rss_peak_kib.max(m.rss_peak_kib);
        self.heap_steady = max_opt(self.heap_steady, m.heap_steady);
        self.heap_peak = max_opt(self.heap_peak, m.heap_peak);
        self.rss_after_kib = self.rss_after_kib.max(m.rss_after_kib);
        self.heap_after = max_opt(self.heap_after, m.heap_after);
        self.pod_writes.push(m.pod_writes);
    }
}

/// Every system's samples at one size, and the floor's.
struct SizeResult {
    systems: Vec<(System, SystemResult)>,
    floor: Vec<Duration>,
}

/// The turns of run `run`: the systems in order for an even run, reversed for an odd one, so
/// that over the runs each system goes first and last alike (A B, B A, A B, ...).
fn turn_order(systems: &[System], run: usize) -> Vec<System> {
    let mut order = systems.to_vec();
    if run % 2 == 1 {
        order.reverse();
    }
    order
}

/// What the scale cluster has installed: `Some` once known (it comes up with Kruise-rs's CRDs;
/// a run with OpenKruise swaps them in before its first turn whatever was there).
struct Installed(Option<System>);

impl Installed {
    async fn ensure(&mut self, system: System) -> Result<()> {
        if self.0 != Some(system) {
            // Unknown until the swap succeeds: a half-done swap is redone next time.
            self.0 = None;
            use_system(system).await?;
            self.0 = Some(system);
        }
        Ok(())
    }
}

async fn measure_size(
    args: &Args,
    client: &Client,
    limited: &Client,
    installed: &mut Installed,
    n: usize,
) -> Result<SizeResult> {
    let mut systems: Vec<(System, SystemResult)> = args
        .systems
        .iter()
        .map(|s| (*s, SystemResult::default()))
        .collect();
    let mut floor = Vec::new();
    let floor_system = args.systems[0];
    for run in 0..args.common.runs {
        // Alternate which goes first, so a drifting machine does not favour one side; the floor
        // goes first in odd runs and last in even ones, within the first system's turn.
        let floor_first = run % 2 == 1;
        for system in turn_order(&args.systems, run) {
            installed.ensure(system).await?;
            let mut manager = Manager::start(args, system, n, run)?;
            manager.wait_ready().await?;
            let with_floor = system == floor_system;
            if with_floor && floor_first {
                floor.push(floor_run(client, limited, n, run, args.concurrency).await?);
            }
            let m = manager_run(
                client,
                system,
                manager.pid(),
                n,
                run,
                Duration::from_secs(args.settle),
            )
            .await?;
            if with_floor && !floor_first {
                floor.push(floor_run(client, limited, n, run, args.concurrency).await?);
            }
            if with_floor && let Some(f) = floor.last() {
                eprintln!("N={n} run {}: floor patched all in {}s", run + 1, secs(*f));
            }
            manager.stop().await;
            if let Some((_, r)) = systems.iter_mut().find(|(s, _)| *s == system) {
                r.add(m);
            }
        }
    }
    Ok(SizeResult { systems, floor })
}

/// `a / b`, or n/a when `b` is zero (a reading that failed).
fn ratio_u64(a: u64, b: u64) -> String {
    if b == 0 {
        "n/a".into()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

async fn run(args: Args) -> Result<()> {
    let kc = Kubeconfig::read_from(&args.kubeconfig)
        .map_err(|e| Error::NoCluster(format!("{}: {e}", args.kubeconfig.display())))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::NoCluster(e.to_string()))?;
    // Setup and observation are not measured: no limit. The floor's patches go through the
    // manager's own limiter with the manager's QPS and burst.
    let client = Client::try_from(cfg.clone())?;
    let limited = kruise_manager::ratelimit::client(cfg, args.qps, args.burst)?;
    let mut seen = HashSet::new();
    if !args.systems.iter().all(|s| seen.insert(*s)) {
        return Err(other("--systems names a system twice"));
    }
    for system in &args.systems {
        let (bin, hint) = match system {
            System::KruiseRs => (&args.manager, "cargo build --release -p kruise-manager"),
            System::Openkruise => (&args.openkruise_manager, "hack/build-openkruise.sh"),
        };
        if !bin.exists() {
            return Err(other(format!("{} not found: {hint}", bin.display())));
        }
    }

    // With Kruise-rs alone nothing is swapped: the scale cluster comes up with its CRDs.
    let with_openkruise = args.systems.contains(&System::Openkruise);
    let mut installed = Installed((!with_openkruise).then_some(System::KruiseRs));
    let mut results = Vec::new();
    let mut failed = None;
    for &n in &args.sizes {
        match measure_size(&args, &client, &limited, &mut installed, n).await {
            Ok(r) => results.push((n, r)),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    // Leave the scale cluster with Kruise-rs's CRDs, as it came up, whatever happened.
    if with_openkruise && let Err(e) = installed.ensure(System::KruiseRs).await {
        eprintln!("kruise-scale-bench: putting Kruise-rs's CRDs back: {e}");
    }
    if let Some(e) = failed {
        return Err(e);
    }
    args.common.emit(&table(&args, &results))?;
    Ok(())
}

fn table(args: &Args, results: &[(usize, SizeResult)]) -> String {
    let limit = if args.qps > 0.0 {
        format!(
            "client-side limit QPS {} burst {} for kruise-manager and the floor (`--kube-api-qps/--kube-api-burst`, runtime/src/ratelimit.rs)",
            args.qps, args.burst
        )
    } else {
        "no client-side rate limit for kruise-manager and the floor (kube-rs has none; `--kube-api-qps 0`)"
            .to_string()
    };
    let with_openkruise = args.systems.contains(&System::Openkruise);
    let names: Vec<&str> = args.systems.iter().map(|s| s.label()).collect();
    let mut out = String::new();
    out.push_str(&format!(
        "\n## Controller at scale: in-place rollout of N Pods on kwok nodes, {} ({} runs each, interleaved, medians)\n\n",
        names.join(" and "),
        args.common.runs
    ));
    out.push_str(&format!(
        "Machine: {}; scale cluster (Kubernetes {} control plane, kwok {} with 50 fake nodes, no kube-controller-manager), kruise-manager {} build. \
{limit}; the floor keeps {} Pods' patches in flight. Manager allocator settings: {}. \
Steady: {} s after the N Pods are ready; after: {} s after the rollout completed. \
CloneSet {} (InPlaceIfPossible, maxUnavailable 100%), one image change v1 -> v2.",
        bench::machine(),
        std::env::var("K8S_VERSION").unwrap_or_else(|_| "v1.34.4".into()),
        std::env::var("KWOK_VERSION").unwrap_or_else(|_| "v0.8.0".into()),
        build_profile(&args.manager),
        args.concurrency,
        allocator_settings(),
        args.settle,
        args.settle,
        keys::APPS_V1BETA1,
    ));
    if with_openkruise {
        out.push_str(&format!(
            " OpenKruise {}: its manager built from its Go module (hack/build-openkruise.sh), its CRDs and webhook configurations from its module's config/, \
webhook at a host URL (WEBHOOK_HOST), `--rest-config-qps {} --rest-config-burst {}` (its defaults are 30 and 50: set this high, no effective client-side limit). \
Both managers run without their daemons (kwok's nodes have no container runtime; kwok's stages play the kubelet's in-place restart). \
The systems take turns (they share CRD and webhook names; `hack/scale-cluster.sh use` swaps them whole), ordered {} for each size, a fresh manager process per turn; \
the floor runs in {}'s turns.",
            openkruise_version(),
            args.openkruise_qps,
            args.openkruise_burst,
            (0..args.common.runs)
                .map(|r| {
                    turn_order(&args.systems, r)
                        .iter()
                        .map(|s| s.label())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect::<Vec<_>>()
                .join(", "),
            args.systems[0].label()
        ));
    }
    out.push_str("\n\n");
    out.push_str("| N | system | all patches issued s | floor s | ratio to floor | rollout complete s | RSS steady / peak / after MiB | heap steady / peak / after MiB | CPU s (rollout) |\n|---|---|---|---|---|---|---|---|---|\n");
    for (n, r) in results {
        let f = median(&r.floor);
        for (system, s) in &r.systems {
            let p = median(&s.patched);
            out.push_str(&format!(
                "| {n} | {} | {} | {} | {:.2} | {} | {} / {} / {} | {} / {} / {} | {} |\n",
                system.label(),
                secs(p),
                secs(f),
                ratio(p, f),
                secs(median(&s.complete)),
                mib(s.rss_steady_kib),
                mib(s.rss_peak_kib),
                mib(s.rss_after_kib),
                heap_mib(s.heap_steady),
                heap_mib(s.heap_peak),
                heap_mib(s.heap_after),
                secs(median(&s.cpu)),
            ));
        }
        let find = |want: System| r.systems.iter().find(|(s, _)| *s == want).map(|(_, s)| s);
        if let (Some(k), Some(o)) = (find(System::KruiseRs), find(System::Openkruise)) {
            out.push_str(&format!(
                "| {n} | Kruise-rs / OpenKruise | {:.2} | | | {:.2} | {} (steady) | | {:.2} |\n",
                ratio(median(&k.patched), median(&o.patched)),
                ratio(median(&k.complete), median(&o.complete)),
                ratio_u64(k.rss_steady_kib, o.rss_steady_kib),
                ratio(median(&k.cpu), median(&o.cpu)),
            ));
        }
    }
    // Where "rollout complete" goes: the writes it took, at the rate the floor wrote.
    for (n, r) in results {
        let floor = median(&r.floor).as_secs_f64();
        if floor <= 0.0 {
            continue;
        }
        let rate = 2.0 * *n as f64 / floor;
        for (system, s) in &r.systems {
            let mut w = s.pod_writes.clone();
            w.sort_unstable();
            let writes = w.get(w.len() / 2).copied().unwrap_or(0);
            out.push_str(&format!(
                "\nN={n}, {}: a watch saw {writes} Pod writes from the image change to rollout complete ({:.1} per Pod, the manager's and kwok's); at the floor's rate ({rate:.0} writes/s) they take {:.1} s.",
                system.label(),
                writes as f64 / *n as f64,
                writes as f64 / rate
            ));
        }
    }
    out.push_str("\n\nRuns (s): ");
    let runs: Vec<String> = results
        .iter()
        .map(|(n, r)| {
            let per: Vec<String> = r
                .systems
                .iter()
                .map(|(system, s)| {
                    format!(
                        "{} {}, complete {}",
                        system.label(),
                        secs_list(&s.patched),
                        secs_list(&s.complete)
                    )
                })
                .collect();
            format!("N={n}: {}; floor {}", per.join("; "), secs_list(&r.floor))
        })
        .collect();
    out.push_str(&runs.join(". "));
    out.push_str(".\nHeap: Kruise-rs, bytes the manager's counting allocator (controller/src/heap.rs) saw allocated and not freed; RSS minus heap is the allocator's cache and fragmentation, code and stacks.");
    if with_openkruise {
        out.push_str(" OpenKruise, go_memstats_heap_inuse_bytes on its /metrics (the Go runtime's heap spans in use); Go exports no peak.");
    }
    out.push_str(
        "\nTargets: ratio ≤ 1.2; manager RSS ≤ 64 MiB at 1,000 Pods, ≤ 200 MiB at 5,000.\n",
    );
    let sizes: Vec<String> = results.iter().map(|(n, _)| n.to_string()).collect();
    let systems: Vec<&str> = args.systems.iter().map(|s| s.arg()).collect();
    out.push_str(&format!(
        "Run with `kruise-scale-bench --systems {} --sizes {} --runs {}`.\n",
        systems.join(","),
        sizes.join(","),
        args.common.runs
    ));
    out
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("kruise-scale-bench: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::{Args, System, pointer, turn_order};
    use clap::Parser;

    #[test]
    fn turns_alternate_abba() {
        use System::{KruiseRs as K, Openkruise as O};
        let cases: [(&[System], usize, &[System]); 5] = [
            (&[K, O], 0, &[K, O]),
            (&[K, O], 1, &[O, K]),
            (&[K, O], 2, &[K, O]),
            (&[O, K], 1, &[K, O]),
            (&[K], 1, &[K]),
        ];
        for (systems, run, want) in cases {
            assert_eq!(turn_order(systems, run), want, "{systems:?} run {run}");
        }
    }

    #[test]
    fn systems_parse() {
        let parse = |a: &[&str]| {
            Args::try_parse_from(std::iter::once("b").chain(a.iter().copied())).map(|a| a.systems)
        };
        assert_eq!(parse(&[]).ok(), Some(vec![System::KruiseRs]));
        assert_eq!(
            parse(&["--systems", "kruise-rs,openkruise"]).ok(),
            Some(vec![System::KruiseRs, System::Openkruise])
        );
        assert!(parse(&["--systems", "go"]).is_err());
    }

    #[test]
    fn json_pointers_escape_keys() {
        let cases = [
            (
                "/metadata/labels",
                "controller-revision-hash",
                "/metadata/labels/controller-revision-hash",
            ),
            (
                "/metadata/annotations",
                "apps.kruise.io/inplace-update-state",
                "/metadata/annotations/apps.kruise.io~1inplace-update-state",
            ),
            ("/a", "x~y/z", "/a/x~0y~1z"),
        ];
        for (parent, key, want) in cases {
            assert_eq!(pointer(parent, key), want);
        }
    }
}
