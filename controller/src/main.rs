//! kruise-manager: serves the admission webhook, then runs the controllers while it holds the
//! leader lease. The work is in the library ([`kruise_manager::app`]); this is flags → config.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgAction, Parser};
use kruise_api::features::{self, FeatureGates};
use kruise_api::keys;
use kruise_manager::app::{
    self, AppConfig, DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS, LEASE_NAME,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

/// Counts live heap bytes for /metrics (see `heap`); the system allocator does the work.
#[global_allocator]
static ALLOC: kruise_manager::heap::Counting<std::alloc::System> =
    kruise_manager::heap::Counting(std::alloc::System);

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
    /// Requests the manager keeps in flight at once, whatever the rate (each one is an HTTP/1.1
    /// connection to the API server, kept open for 90 s after); 0: no bound.
    #[arg(long, env = "KRUISE_KUBE_API_MAX_IN_FLIGHT", default_value_t = kruise_manager::ratelimit::MAX_IN_FLIGHT)]
    kube_api_max_in_flight: usize,
    /// Feature gates as OpenKruise v1.9 spells them (`Name=true,Other=false`, `AllAlpha=true`;
    /// the Helm chart's `featureGates`). Unset gates keep upstream's defaults; upstream's rules
    /// between gates apply (`PodWebhook=false` turns off the Pod-webhook gates, ...).
    #[arg(long, default_value = "", value_parser = FeatureGates::parse)]
    feature_gates: FeatureGates,
    /// Seconds between checks whether to hand freed heap pages back to the kernel
    /// (`malloc_trim`, when the heap fell 4 MiB or more below its peak since the last check);
    /// 0: never, glibc then keeps the RSS at the heap's peak.
    #[arg(long, env = "KRUISE_MALLOC_TRIM_SECS", default_value_t = 5)]
    malloc_trim_secs: u64,
    /// Threads that run the controllers and the webhook. 1 runs them all on one thread, which
    /// costs the least CPU per rollout and fits the shipped Deployment's CPU limit of 1; with a
    /// higher limit, raise it. 0: one per CPU the process may use.
    #[arg(long, env = "KRUISE_WORKER_THREADS", default_value_t = 1)]
    worker_threads: usize,
    /// Export the workload gauges (`kruise_cloneset_*`, `kruise_advancedstatefulset_*`, ...)
    /// on /metrics, computed at each scrape from the controllers' caches.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    workload_metrics: bool,
    /// Run the uninstall guard and exit (the Helm chart's pre-delete hook): fail while Kruise
    /// objects users made exist, then delete the webhook configurations the manager created.
    #[arg(long)]
    pre_delete_hook: bool,
    /// With --pre-delete-hook: remove the webhook configurations even while Kruise objects exist.
    #[arg(long, requires = "pre_delete_hook")]
    allow_objects: bool,
}

/// The live-heap drop below its recent peak that makes a trim worth its page faults.
const TRIM_MIN_DROP: usize = 4 << 20;

fn init_tracing(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// The client configuration the flags name (the usual inference without --kubeconfig).
async fn kube_config(args: &Args) -> anyhow::Result<kube::Config> {
    let Some(path) = &args.kubeconfig else {
        return kube::Config::infer()
            .await
            .context("inferring the Kubernetes client configuration");
    };
    let kc = Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let opts = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .context("loading kubeconfig")
}

fn config(args: Args, kube: kube::Config) -> AppConfig {
    let mut cfg = AppConfig::new(kube);
    cfg.feature_gates = args.feature_gates;
    cfg.kube_api_qps = args.kube_api_qps;
    cfg.kube_api_burst = args.kube_api_burst;
    cfg.kube_api_max_in_flight = args.kube_api_max_in_flight;
    cfg.metrics_addr = Some(args.metrics_addr);
    cfg.metrics.workloads.set_enabled(args.workload_metrics);
    cfg.health_addr = Some(args.health_addr);
    cfg.leader_elect = args.leader_elect;
    if let Some(ns) = args.leader_election_namespace {
        cfg.leader_election_namespace = ns;
    }
    cfg.leader_election_id = args.leader_election_id;
    cfg.lease_duration = args.lease_duration;
    cfg.lease_grace = args.lease_grace;
    cfg.webhook_ready_timeout = Duration::from_secs(args.webhook_ready_timeout);
    cfg.watch_namespace = args.watch_namespace;
    cfg.webhook = if args.disable_webhook {
        None
    } else {
        let mut w = kruise_webhook::WebhookConfig::from_env();
        w.bind_addr.set_port(args.webhook_port);
        if let Some(host) = &args.webhook_host {
            w.host_url = Some(format!("https://{host}:{}", args.webhook_port));
        }
        Some(w)
    };
    cfg
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    runtime(args.worker_threads)
        .context("starting the async runtime")?
        .block_on(run(args))
}

/// One thread: a current-thread runtime, so no task wakes another thread (a multi-thread
/// runtime with one worker still hands work between it and the thread that blocks on `main`).
fn runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    if workers == 1 {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if workers > 1 {
        builder.worker_threads(workers);
    }
    builder.enable_all().build()
}

async fn run(args: Args) -> anyhow::Result<()> {
    init_tracing(args.log_json);
    features::install(args.feature_gates);
    // Only what differs from upstream's defaults; empty means exactly OpenKruise's.
    tracing::info!(differences = %args.feature_gates, "feature gates");
    for (gate, missing) in args.feature_gates.without_effect() {
        tracing::warn!(
            gate = gate.name(),
            missing,
            "feature gate {gate} is on, but Kruise-rs lacks part or all of what it does: {missing}"
        );
    }
    let kube = kube_config(&args).await?;
    if args.pre_delete_hook {
        let client = kube::Client::try_from(kube).context("building the client")?;
        kruise_webhook::configuration::uninstall::pre_delete(&client, args.allow_objects).await?;
        tracing::info!("nothing holds the uninstall back");
        return Ok(());
    }
    let shutdown = CancellationToken::new();
    app::shutdown_on_signals(shutdown.clone());
    if args.malloc_trim_secs > 0 {
        tokio::spawn(kruise_manager::heap::trim_periodically(
            Duration::from_secs(args.malloc_trim_secs),
            TRIM_MIN_DROP,
            shutdown.clone(),
        ));
    }
    app::run(config(args, kube), shutdown).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Args;
    use clap::Parser;
    use kruise_api::features::Gate;

    #[test]
    fn feature_gates_flag_parses_into_the_typed_set() {
        let args = Args::try_parse_from([
            "kruise-manager",
            "--feature-gates",
            "PreDownloadImageForInPlaceUpdate=true",
        ])
        .expect("a known gate parses");
        assert!(
            args.feature_gates
                .enabled(Gate::PreDownloadImageForInPlaceUpdate)
        );
        let args = Args::try_parse_from(["kruise-manager"]).expect("no flag");
        assert!(
            args.feature_gates.differences().is_empty(),
            "upstream's defaults"
        );
    }

    #[test]
    fn one_worker_thread_is_a_current_thread_runtime_and_more_are_that_many_workers() {
        use tokio::runtime::RuntimeFlavor;
        let args = Args::try_parse_from(["kruise-manager"]).expect("no flag");
        let rt = super::runtime(args.worker_threads).expect("the default runtime");
        assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
        let args = Args::try_parse_from(["kruise-manager", "--worker-threads", "3"]).expect("3");
        let rt = super::runtime(args.worker_threads).expect("three workers");
        assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
        assert_eq!(rt.metrics().num_workers(), 3);
        let rt = super::runtime(0).expect("one worker per CPU");
        assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
    }

    #[test]
    fn an_unknown_gate_is_refused_by_name() {
        let err = Args::try_parse_from(["kruise-manager", "--feature-gates", "NoSuchGate=true"])
            .expect_err("unknown gate");
        assert!(err.to_string().contains("NoSuchGate"), "{err}");
    }
}
