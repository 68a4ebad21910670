//! kruise-manager: serves the admission webhook, then runs the controllers while it holds the
//! leader lease.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Parser};
use kruise_api::keys;
use kruise_manager::cloneset::controller as cloneset;
use kruise_manager::leader::{self, LeaseSettings};
use kruise_manager::metrics::Metrics;
use kruise_manager::podcache::PodCache;
use kruise_manager::server::{self, Health};
use kruise_manager::{
    crr, imagepulljob, launchpriority, nodeimage, podreadiness, ratelimit, sidecarset,
};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// Counts live heap bytes for /metrics (see `heap`); the system allocator does the work.
#[global_allocator]
static ALLOC: kruise_manager::heap::Counting<std::alloc::System> =
    kruise_manager::heap::Counting(std::alloc::System);

/// Name of the leader-election Lease (upstream's lock name).
const LEASE_NAME: &str = "kruise-manager";
/// Client-side request rate and burst by default: OpenKruise's manager flags
/// (`--rest-config-qps=30 --rest-config-burst=50`), so that a busy controller cannot flood the
/// API server; benchmarks and large clusters raise them with the flags.
const DEFAULT_KUBE_API_QPS: f32 = 30.0;
const DEFAULT_KUBE_API_BURST: u32 = 50;

#[derive(Parser, Debug)]
#[command(
    name = "kruise-manager",
    version,
    about = "Kruise-rs controller manager"
)]
struct Args {
    /// Kubeconfig file; without it the usual inference applies (KUBECONFIG, ~/.kube/config,
    /// in-cluster service account).
    #[arg(long, env = "KUBECONFIG_PATH")]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use with --kubeconfig.
    #[arg(long)]
    context: Option<String>,
    /// Address of the Prometheus /metrics endpoint.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Address of /healthz and /readyz.
    #[arg(long, default_value = "0.0.0.0:8000")]
    health_addr: SocketAddr,
    /// Run controllers only while holding the leader Lease.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    leader_elect: bool,
    /// Namespace of the leader Lease (default: $POD_NAMESPACE, else kruise-system).
    #[arg(long)]
    leader_election_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, default_value = LEASE_NAME)]
    leader_election_id: String,
    /// Seconds the lease is valid without renewal; a standby takes over after this.
    #[arg(long, default_value_t = 15)]
    lease_duration: u64,
    /// Seconds before expiry at which the leader renews.
    #[arg(long, default_value_t = 5)]
    lease_grace: u64,
    /// Port of the admission webhook server (HTTPS).
    #[arg(long, default_value_t = keys::WEBHOOK_PORT)]
    webhook_port: u16,
    /// Dev mode: host the API server uses to reach the webhook (instead of the Service).
    #[arg(long, env = "WEBHOOK_HOST")]
    webhook_host: Option<String>,
    /// Do not serve the webhook (controllers start without waiting for it).
    #[arg(long)]
    disable_webhook: bool,
    /// How long to wait for the webhook to answer /healthz over TLS before giving up.
    #[arg(long, default_value_t = 120)]
    webhook_ready_timeout: u64,
    /// Watch only this namespace (pods and workloads); default: all namespaces.
    #[arg(long)]
    watch_namespace: Option<String>,
    /// Log as JSON lines.
    #[arg(long)]
    log_json: bool,
    /// Client-side limit of API requests per second (client-go's --kube-api-qps); 0: no limit.
    /// The default is OpenKruise's manager default (`--rest-config-qps=30`).
    #[arg(long, default_value_t = DEFAULT_KUBE_API_QPS)]
    kube_api_qps: f32,
    /// Requests allowed at once above --kube-api-qps (client-go's --kube-api-burst). The default
    /// is OpenKruise's manager default (`--rest-config-burst=50`).
    #[arg(long, default_value_t = DEFAULT_KUBE_API_BURST)]
    kube_api_burst: u32,
}

fn init_tracing(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// A client with the given client-side limit (qps ≤ 0: none).
async fn make_client(args: &Args, qps: f32, burst: u32) -> anyhow::Result<Client> {
    let Some(path) = &args.kubeconfig else {
        let cfg = kube::Config::infer()
            .await
            .context("inferring the Kubernetes client configuration")?;
        return ratelimit::client(cfg, qps, burst).context("building the Kubernetes client");
    };
    let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let opts = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    let cfg = kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .context("loading kubeconfig")?;
    ratelimit::client(cfg, qps, burst).context("building the Kubernetes client")
}

/// Cancels `token` on SIGTERM or Ctrl-C.
fn shutdown_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            _ = term => tracing::info!("SIGTERM received, shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupt received, shutting down"),
        }
        token.cancel();
    });
}

fn identity() -> String {
    let base = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "kruise-manager".to_string());
    // Two replicas on one host (dev mode) must not share an identity.
    format!("{base}_{}", std::process::id())
}

/// Everything the controllers run on while this replica leads.
async fn run_controllers(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    namespace: Option<String>,
    token: CancellationToken,
) {
    let instance = std::env::var("POD_NAME").ok();
    let readiness = podreadiness::run(client.clone(), pods.clone(), metrics.clone(), token.clone());
    let launch = launchpriority::run(client.clone(), pods.clone(), metrics.clone(), token.clone());
    let node_images = nodeimage::run(client.clone(), metrics.clone(), token.clone());
    let pull_jobs = imagepulljob::run(client.clone(), pods.clone(), metrics.clone(), token.clone());
    let recreate = crr::run(client.clone(), pods.clone(), metrics.clone(), token.clone());
    let sidecars = sidecarset::run(client.clone(), pods.clone(), metrics.clone(), token.clone());
    let daemonsets = kruise_manager::daemonset::controller::run(
        client.clone(),
        pods.clone(),
        metrics.clone(),
        instance.clone(),
        namespace.clone(),
        token.clone(),
    );
    let asts = kruise_manager::statefulset::controller::run(
        Arc::new(kruise_manager::statefulset::controller::Context::new(
            client.clone(),
            pods.clone(),
            metrics.clone(),
            instance.clone(),
            namespace.clone(),
        )),
        token.clone(),
    );
    let ctx = Arc::new(cloneset::Context::new(
        client, pods, metrics, instance, namespace,
    ));
    tokio::join!(
        cloneset::run(ctx, token),
        asts,
        readiness,
        launch,
        node_images,
        pull_jobs,
        recreate,
        sidecars,
        daemonsets
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    init_tracing(args.log_json);
    let client = make_client(&args, args.kube_api_qps, args.kube_api_burst).await?;
    let shutdown = CancellationToken::new();
    shutdown_on_signals(shutdown.clone());

    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    let mut servers = Vec::new();
    if args.metrics_addr == args.health_addr {
        let r = server::router(health.clone(), metrics.clone(), true, true);
        servers.push(tokio::spawn(server::serve(
            args.health_addr,
            r,
            shutdown.clone(),
        )));
    } else {
        let r = server::router(health.clone(), metrics.clone(), true, false);
        servers.push(tokio::spawn(server::serve(
            args.metrics_addr,
            r,
            shutdown.clone(),
        )));
        let r = server::router(health.clone(), metrics.clone(), false, true);
        servers.push(tokio::spawn(server::serve(
            args.health_addr,
            r,
            shutdown.clone(),
        )));
    }

    let namespace = args
        .leader_election_namespace
        .clone()
        .or_else(|| {
            std::env::var(keys::ENV_POD_NAMESPACE)
                .ok()
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| keys::KRUISE_NAMESPACE.to_string());

    // The webhook comes first: a controller must never create a pod the webhook has not had the
    // chance to mutate.
    let webhook = if args.disable_webhook {
        tracing::warn!("webhook disabled: pods will not get the KruisePodReady readiness gate");
        None
    } else {
        let mut cfg = kruise_webhook::WebhookConfig::from_env();
        cfg.bind_addr.set_port(args.webhook_port);
        if let Some(host) = &args.webhook_host {
            cfg.host_url = Some(format!("https://{host}:{}", args.webhook_port));
        }
        let token = shutdown.clone();
        // The webhook's own client, without the controllers' rate limit: an admission call (a
        // template dry-run, a CRR's Pod) must not queue behind a rollout's writes and miss the
        // API server's timeout. Its requests are bounded by the admissions the API server sends.
        let wclient = make_client(&args, 0.0, 0).await?;
        let wcfg = cfg.clone();
        let handle = tokio::spawn(async move {
            kruise_webhook::run(wclient, wcfg, token.cancelled_owned()).await
        });
        tokio::select! {
            r = kruise_webhook::wait_ready(&cfg, Duration::from_secs(args.webhook_ready_timeout)) => {
                r.context("waiting for the webhook")?;
            }
            _ = shutdown.cancelled() => return Ok(()),
        }
        tracing::info!(port = args.webhook_port, "webhook is serving");
        Some(handle)
    };

    let pods = PodCache::start(
        client.clone(),
        args.watch_namespace.as_deref(),
        shutdown.clone(),
    );
    tokio::select! {
        _ = pods.wait_synced() => {}
        _ = shutdown.cancelled() => return Ok(()),
    }
    tracing::info!("pod cache synced");
    health.set_ready(true);

    if args.leader_elect {
        let settings = LeaseSettings {
            name: args.leader_election_id.clone(),
            namespace,
            identity: identity(),
            duration_secs: args.lease_duration,
            grace_secs: args.lease_grace,
        };
        let m = metrics.clone();
        let (c, p, wn) = (client.clone(), pods.clone(), args.watch_namespace.clone());
        leader::run_when_leader(
            client.clone(),
            settings,
            shutdown.clone(),
            move |leading| {
                m.is_leader.set(i64::from(leading));
            },
            move |token| run_controllers(c.clone(), p.clone(), metrics.clone(), wn.clone(), token),
        )
        .await
        .context("leader election")?;
    } else {
        tracing::info!("leader election disabled; starting controllers");
        let _ = metrics.is_leader.set(1);
        run_controllers(
            client.clone(),
            pods.clone(),
            metrics.clone(),
            args.watch_namespace.clone(),
            shutdown.clone(),
        )
        .await;
    }

    shutdown.cancel();
    if let Some(h) = webhook {
        match h.await {
            Ok(Err(e)) => tracing::warn!(error = %e, "webhook server ended with an error"),
            Err(e) => tracing::warn!(error = %e, "webhook task failed"),
            Ok(Ok(())) => {}
        }
    }
    for s in servers {
        if let Ok(Err(e)) = s.await {
            tracing::warn!(error = %e, "HTTP server ended with an error");
        }
    }
    tracing::info!("kruise-manager stopped");
    Ok(())
}
