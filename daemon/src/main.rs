//! kruise-daemon entry point: flags, clients, the HTTP endpoints, the duties, shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use clap::Parser;
use kruise_api::features::{self, FeatureGates, Gate};
use kruise_api::keys;
use kruise_daemon::criruntime::{CriClient, SocketSource};
use kruise_daemon::cristatus::{self, CriStatus, OwnPod, Reporters};
use kruise_daemon::events::Events;
use kruise_daemon::metrics::{self, Metrics};
use kruise_daemon::{containermeta, containerrecreate, imagepuller, podprobe};
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

// Client-side rate limit (client-go's QPS/burst), shared with the manager.
use kruise_runtime::ratelimit;

/// Client-side request rate and burst by default: client-go's defaults, which OpenKruise's
/// daemon keeps (its --rest-config-qps/--rest-config-burst default to 0, "use client-go's").
const DEFAULT_KUBE_API_QPS: f32 = 5.0;
const DEFAULT_KUBE_API_BURST: u32 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Duty {
    Imagepuller,
    Containermeta,
    Containerrecreate,
    Podprobe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Kruise-rs per-node agent: pre-pulls images (NodeImage), reports runtime container metadata
/// and recreates containers on request (ContainerRecreateRequest), over CRI.
#[derive(Debug, Parser)]
#[command(name = "kruise-daemon", version)]
struct Flags {
    /// Name of the node this daemon runs on (normally from the downward API, spec.nodeName).
    #[arg(long, env = "NODE_NAME")]
    node_name: Option<String>,

    /// CRI endpoint, e.g. unix:///run/containerd/containerd.sock. Overrides discovery.
    #[arg(long, env = "CONTAINER_RUNTIME_ENDPOINT")]
    runtime_endpoint: Option<String>,

    /// Host run directory searched for CRI sockets (mounted at /hostvarrun in the DaemonSet).
    #[arg(long, default_value = "/var/run")]
    var_run: PathBuf,

    /// CRI socket file name under --var-run, instead of probing the known names.
    #[arg(long)]
    socket_file: Option<String>,

    /// Name of this daemon's own Pod (downward API, metadata.name): it gets the CRI condition.
    #[arg(long, env = "POD_NAME")]
    pod_name: Option<String>,

    /// Namespace of this daemon's own Pod (downward API, metadata.namespace).
    #[arg(long, env = keys::ENV_POD_NAMESPACE)]
    pod_namespace: Option<String>,

    /// Address of the /healthz, /readyz and /metrics endpoint.
    #[arg(long, default_value = "0.0.0.0:10221")]
    addr: SocketAddr,

    /// Maximum number of image tags pulled at once (0 or less: no limit).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    max_workers_for_pull_image: i64,

    /// Duties to run.
    #[arg(long, value_delimiter = ',', default_values_t = vec![Duty::Imagepuller, Duty::Containermeta, Duty::Containerrecreate, Duty::Podprobe], value_enum)]
    duties: Vec<Duty>,

    /// Kubeconfig file; default: $KUBECONFIG, ~/.kube/config, then in-cluster.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,

    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,

    /// Client-side limit of API requests per second (client-go's --kube-api-qps); 0: no limit.
    #[arg(long, default_value_t = DEFAULT_KUBE_API_QPS)]
    kube_api_qps: f32,

    /// Requests allowed at once above --kube-api-qps (client-go's --kube-api-burst).
    #[arg(long, default_value_t = DEFAULT_KUBE_API_BURST)]
    kube_api_burst: u32,

    /// Feature gates as OpenKruise v1.9 spells them (`Name=true,Other=false`); unset gates keep
    /// upstream's defaults. `DaemonWatchingPod=false` stops the containermeta duty, as upstream.
    #[arg(long, default_value = "", value_parser = FeatureGates::parse)]
    feature_gates: FeatureGates,
}

/// The duties asked for that the gates allow (upstream's daemon runs its containermeta
/// controller only while it watches Pods, its podprobe controller only under
/// `PodProbeMarkerGate`).
fn gated_duties(duties: &[Duty], gates: &FeatureGates) -> Vec<Duty> {
    duties
        .iter()
        .copied()
        .filter(|d| *d != Duty::Containermeta || gates.enabled(Gate::DaemonWatchingPod))
        .filter(|d| *d != Duty::Podprobe || gates.enabled(Gate::PodProbeMarkerGate))
        .collect()
}

#[derive(Clone)]
struct Http {
    registry: Arc<Registry>,
    cri: watch::Receiver<CriStatus>,
}

/// Liveness: the process serves requests. It does not depend on CRI, so a node without a usable
/// runtime does not restart the daemon in a loop; readiness says that instead.
async fn healthz() -> (StatusCode, &'static str) {
    (StatusCode::OK, "ok")
}

/// Readiness: the CRI runtime answered the last check.
async fn readyz(State(s): State<Http>) -> (StatusCode, String) {
    match &*s.cri.borrow() {
        CriStatus::Available { runtime, socket } => {
            (StatusCode::OK, format!("ok: {runtime} at {socket}"))
        }
        CriStatus::Unavailable { reason } => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("CRI: {reason}"))
        }
        CriStatus::Unknown => (
            StatusCode::SERVICE_UNAVAILABLE,
            "CRI: not checked yet".into(),
        ),
    }
}

async fn metrics_handler(
    State(s): State<Http>,
) -> (
    StatusCode,
    [(axum::http::HeaderName, &'static str); 1],
    String,
) {
    let ct = (
        axum::http::header::CONTENT_TYPE,
        "application/openmetrics-text; version=1.0.0; charset=utf-8",
    );
    match metrics::render(&s.registry) {
        Ok(body) => (StatusCode::OK, [ct], body),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, [ct], e.to_string()),
    }
}

async fn kube_client(path: Option<&PathBuf>, qps: f32, burst: u32) -> anyhow::Result<kube::Client> {
    let cfg = match path {
        None => kube::Config::infer()
            .await
            .context("cannot build a Kubernetes client (no kubeconfig and not in a cluster)")?,
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("invalid kubeconfig {}", path.display()))?
        }
    };
    ratelimit::client(cfg, qps, burst).context("cannot build the Kubernetes client")
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn init_tracing(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter);
    match format {
        LogFormat::Text => b.init(),
        LogFormat::Json => b.json().init(),
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let flags = Flags::parse();
    init_tracing(flags.log_format);
    features::install(flags.feature_gates);
    // Only what differs from upstream's defaults; empty means exactly OpenKruise's.
    tracing::info!(differences = %flags.feature_gates, "feature gates");
    for (gate, missing) in flags.feature_gates.without_effect() {
        tracing::warn!(
            gate = gate.name(),
            missing,
            "feature gate {gate} is on, but Kruise-rs lacks part or all of what it does: {missing}"
        );
    }
    match run(flags).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            // One readable line with the cause chain; no backtrace for configuration errors.
            eprintln!("kruise-daemon: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(flags: Flags) -> anyhow::Result<()> {
    let Some(node) = flags.node_name.clone().filter(|n| !n.is_empty()) else {
        bail!(
            "NODE_NAME is not set: kruise-daemon must know its node. Set env NODE_NAME \
             (in a DaemonSet: valueFrom.fieldRef.fieldPath=spec.nodeName) or pass --node-name"
        );
    };

    // A malformed endpoint is a configuration error; a missing or unusable runtime is not.
    let source = SocketSource::from_flags(
        flags.runtime_endpoint.as_deref(),
        flags.socket_file.as_deref(),
        &flags.var_run,
    )?;
    let client = kube_client(
        flags.kubeconfig.as_ref(),
        flags.kube_api_qps,
        flags.kube_api_burst,
    )
    .await?;

    let mut registry = Registry::default();
    let m = Metrics::new(&mut registry);
    let (status_tx, status_rx) = watch::channel(CriStatus::Unknown);
    let http = Http {
        registry: Arc::new(registry),
        cri: status_rx,
    };

    let shutdown = CancellationToken::new();
    let listener = tokio::net::TcpListener::bind(flags.addr)
        .await
        .with_context(|| format!("cannot listen on {}", flags.addr))?;
    tracing::info!(node = %node, addr = %flags.addr, sockets = ?source.candidates(),
        duties = ?flags.duties, "kruise-daemon starting");
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_handler))
        .with_state(http);
    let server = {
        let sd = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { sd.cancelled().await })
                .await
        })
    };

    let events = Events::new(client.clone(), &node);
    let own_pod = match (flags.pod_namespace.clone(), flags.pod_name.clone()) {
        (Some(namespace), Some(name)) if !namespace.is_empty() && !name.is_empty() => {
            Some(OwnPod { namespace, name })
        }
        _ => None,
    };
    let reporters = Reporters {
        client: client.clone(),
        node: node.clone(),
        own_pod,
        events: events.clone(),
        metrics: m.clone(),
    };
    let (connected_tx, mut connected_rx) = watch::channel(None::<CriClient>);
    let supervisor = tokio::spawn(cristatus::supervise(
        source,
        reporters,
        status_tx,
        connected_tx,
        shutdown.clone(),
    ));

    // Every duty needs CRI: they start once the runtime first answers, without a restart.
    let cri = tokio::select! {
        _ = shutdown_signal() => None,
        c = connected_rx.wait_for(Option::is_some) => c.ok().and_then(|c| c.clone()),
    };
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(cri) = cri {
        let duties = gated_duties(&flags.duties, &flags.feature_gates);
        tracing::info!(runtime = %cri.runtime_name(), socket = %cri.socket().display(),
            ?duties, "starting the CRI duties");
        let max = usize::try_from(flags.max_workers_for_pull_image).ok();
        spawn_duties(
            &mut tasks,
            &duties,
            &Wiring {
                client,
                cri,
                node,
                m,
                events,
                shutdown: shutdown.clone(),
                max_pulls: max,
            },
        );
        tokio::select! {
            _ = shutdown_signal() => tracing::info!("shutting down"),
            Some(done) = tasks.join_next() => {
                tracing::error!(duty = ?done.ok(), "a duty ended unexpectedly; shutting down");
            }
        }
    } else {
        tracing::info!("shutting down");
    }
    shutdown.cancel();
    // In-flight CRI calls get a moment to finish; pulls resume after a restart anyway.
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    let _ = tokio::time::timeout(Duration::from_secs(2), supervisor).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
    tracing::info!("kruise-daemon stopped");
    Ok(())
}

/// What every duty is started with.
struct Wiring {
    client: kube::Client,
    cri: CriClient,
    node: String,
    m: Metrics,
    events: Events,
    shutdown: CancellationToken,
    /// Image tags pulled at once; None: no limit.
    max_pulls: Option<usize>,
}

fn spawn_duties(tasks: &mut tokio::task::JoinSet<&'static str>, duties: &[Duty], w: &Wiring) {
    for duty in duties {
        let (client, cri, node, m, ev, sd) = (
            w.client.clone(),
            w.cri.clone(),
            w.node.clone(),
            w.m.clone(),
            w.events.clone(),
            w.shutdown.clone(),
        );
        match duty {
            Duty::Imagepuller => {
                let max = w.max_pulls;
                tasks.spawn(async move {
                    if let Err(e) = imagepuller::run(client, cri, node, max, m, ev, sd).await {
                        tracing::error!(error = %e, "image puller stopped");
                    }
                    "imagepuller"
                });
            }
            Duty::Containermeta => {
                tasks.spawn(async move {
                    containermeta::run(client, cri, node, m, ev, sd).await;
                    "containermeta"
                });
            }
            Duty::Containerrecreate => {
                tasks.spawn(async move {
                    containerrecreate::run(client, cri, node, m, ev, sd).await;
                    "containerrecreate"
                });
            }
            Duty::Podprobe => {
                tasks.spawn(async move {
                    podprobe::run(client, cri, node, sd).await;
                    "podprobe"
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_gates_flag_parses_or_names_the_unknown_gate() {
        let f = Flags::try_parse_from([
            "kruise-daemon",
            "--feature-gates",
            "DaemonWatchingPod=false",
        ])
        .expect("known gate");
        assert!(!f.feature_gates.enabled(Gate::DaemonWatchingPod));
        let err = Flags::try_parse_from(["kruise-daemon", "--feature-gates", "NoSuchGate=true"])
            .expect_err("unknown gate");
        assert!(err.to_string().contains("NoSuchGate"), "{err}");
    }

    #[test]
    fn containermeta_runs_only_while_the_daemon_watches_pods() {
        let all = [
            Duty::Imagepuller,
            Duty::Containermeta,
            Duty::Containerrecreate,
            Duty::Podprobe,
        ];
        assert_eq!(gated_duties(&all, &FeatureGates::default()), all.to_vec());
        let off = FeatureGates::parse("DaemonWatchingPod=false").expect("valid");
        assert_eq!(
            gated_duties(&all, &off),
            vec![Duty::Imagepuller, Duty::Containerrecreate, Duty::Podprobe]
        );
        let off = FeatureGates::parse("PodProbeMarkerGate=false").expect("valid");
        assert!(!gated_duties(&all, &off).contains(&Duty::Podprobe));
    }
}
