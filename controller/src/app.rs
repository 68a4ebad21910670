//! The manager as a library: everything `kruise-manager` does after parsing its flags, so the
//! binary and `kubectl kruise dev` (the manager embedded in the plugin) run the same code.
//!
//! Order, as upstream's `main.go`: serve the webhook and wait until it answers over TLS, sync
//! the Pod cache, then run the controllers ([`CONTROLLERS`]) while holding the leader Lease.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kruise_api::features::{self, FeatureGates};
use kruise_api::keys;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::leader::{self, LeaseSettings};
use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::registry::{self, Controller, Shared};
use crate::server::{self, Health};
use crate::{
    advancedcronjob, broadcastjob, cloneset, crr, daemonset, ephemeraljob, imagepulljob,
    launchpriority, nodeimage, persistentpodstate, podprobemarker, podreadiness,
    podunavailablebudget, ratelimit, resourcedistribution, sidecarset, sidecarterminator,
    statefulset, uniteddeployment, workloadspread,
};

/// Name of the leader-election Lease (upstream's lock name).
pub const LEASE_NAME: &str = "kruise-manager";
/// Client-side request rate and burst by default: OpenKruise's manager flags
/// (`--rest-config-qps=30 --rest-config-burst=50`), so that a busy controller cannot flood the
/// API server; benchmarks and large clusters raise them.
pub const DEFAULT_KUBE_API_QPS: f32 = 30.0;
/// See [`DEFAULT_KUBE_API_QPS`].
pub const DEFAULT_KUBE_API_BURST: u32 = 50;

/// Why the manager could not start or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A client could not be built from the configuration.
    #[error("building the Kubernetes client: {0}")]
    Client(String),
    /// The webhook did not come up.
    #[error("waiting for the webhook: {0}")]
    Webhook(#[from] kruise_webhook::Error),
    /// Leader election failed.
    #[error("leader election: {0}")]
    Leader(String),
}

/// What to run, and where. [`AppConfig::new`] gives the `kruise-manager` defaults.
// Not Debug: the kube config holds credentials, and Metrics is not Debug.
#[derive(Clone)]
pub struct AppConfig {
    /// Where the API server is and how to authenticate.
    pub kube: kube::Config,
    /// Feature gates (upstream's defaults unless `--feature-gates` said otherwise).
    pub feature_gates: FeatureGates,
    /// Client-side limit of the controllers' requests per second (≤ 0: none).
    pub kube_api_qps: f32,
    /// Requests allowed at once above `kube_api_qps`.
    pub kube_api_burst: u32,
    /// Requests each client keeps in flight at once (0: no bound; see
    /// [`ratelimit::MAX_IN_FLIGHT`]).
    pub kube_api_max_in_flight: usize,
    /// Address of `/metrics`; `None`: not served.
    pub metrics_addr: Option<SocketAddr>,
    /// Address of `/healthz` and `/readyz`; `None`: not served.
    pub health_addr: Option<SocketAddr>,
    /// Run controllers only while holding the leader Lease.
    pub leader_elect: bool,
    /// Namespace of the leader Lease.
    pub leader_election_namespace: String,
    /// Name of the leader Lease.
    pub leader_election_id: String,
    /// Seconds the lease is valid without renewal.
    pub lease_duration: u64,
    /// Seconds before expiry at which the leader renews.
    pub lease_grace: u64,
    /// The webhook to serve; `None`: no webhook (controllers start without waiting for it).
    pub webhook: Option<kruise_webhook::WebhookConfig>,
    /// How long to wait for the webhook to answer `/healthz` over TLS.
    pub webhook_ready_timeout: Duration,
    /// Watch only this namespace (Pods and workloads); `None`: all.
    pub watch_namespace: Option<String>,
    /// Identity in the leader Lease.
    pub identity: String,
    /// The controllers' metrics; shared so an embedding process can summarise them.
    pub metrics: Arc<Metrics>,
    /// Readiness as `/readyz` reports it; shared for the same reason.
    pub health: Arc<Health>,
}

impl AppConfig {
    /// The `kruise-manager` defaults for a cluster reached through `kube`.
    pub fn new(kube: kube::Config) -> Self {
        Self {
            kube,
            feature_gates: features::installed(),
            kube_api_qps: DEFAULT_KUBE_API_QPS,
            kube_api_burst: DEFAULT_KUBE_API_BURST,
            kube_api_max_in_flight: ratelimit::MAX_IN_FLIGHT,
            metrics_addr: None,
            health_addr: None,
            leader_elect: true,
            leader_election_namespace: keys::own_namespace(),
            leader_election_id: LEASE_NAME.to_owned(),
            lease_duration: 15,
            lease_grace: 5,
            webhook: Some(kruise_webhook::WebhookConfig::from_env()),
            webhook_ready_timeout: Duration::from_secs(120),
            watch_namespace: None,
            identity: identity(),
            metrics: Arc::new(Metrics::new()),
            health: Arc::new(Health::default()),
        }
    }
}

/// `$POD_NAME` (else the host name) and the process id: two replicas on one host (dev mode)
/// must not share an identity.
pub fn identity() -> String {
    let base = std::env::var("POD_NAME")
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "kruise-manager".to_string());
    format!("{base}_{}", std::process::id())
}

/// Cancels `token` on SIGTERM or Ctrl-C.
pub fn shutdown_on_signals(token: CancellationToken) {
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

/// Every controller, in the order the manager starts them: the Pod-level ones every workload
/// relies on, the SidecarSet, the workloads and jobs, the policies, then UnitedDeployment and
/// CloneSet. A new controller is one line here (its folder declares `controller::CONTROLLER`,
/// with its name, its feature gate and its start).
pub const CONTROLLERS: &[Controller] = &[
    podreadiness::controller::CONTROLLER,
    launchpriority::controller::CONTROLLER,
    nodeimage::controller::CONTROLLER,
    imagepulljob::controller::CONTROLLER,
    crr::controller::CONTROLLER,
    sidecarset::controller::CONTROLLER,
    daemonset::controller::CONTROLLER,
    broadcastjob::controller::CONTROLLER,
    advancedcronjob::controller::CONTROLLER,
    ephemeraljob::controller::CONTROLLER,
    statefulset::controller::CONTROLLER,
    podunavailablebudget::controller::CONTROLLER,
    resourcedistribution::controller::CONTROLLER,
    persistentpodstate::controller::CONTROLLER,
    workloadspread::controller::CONTROLLER,
    sidecarterminator::controller::CONTROLLER,
    podprobemarker::controller::CONTROLLER,
    uniteddeployment::controller::CONTROLLER,
    cloneset::controller::CONTROLLER,
];

/// The controllers that upstream starts only under a feature gate (their `Add` functions return
/// early), as their registry entries decide: the ones that hand work to kruise-daemon need
/// `KruiseDaemon`, the pull-job controllers also `ImagePullJobGate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatedControllers {
    pub node_images: bool,
    pub pull_jobs: bool,
    pub container_recreate: bool,
    /// Upstream starts the PodUnavailableBudget controller when either of its gates is on.
    pub pod_unavailable_budget: bool,
    /// `ResourceDistributionGate` (off by default upstream).
    pub resource_distribution: bool,
    /// `SidecarTerminator` (off by default upstream; it needs `KruiseDaemon`, which carries
    /// out its requests).
    pub sidecar_terminator: bool,
    /// `PodProbeMarkerGate` (on by default upstream; it needs `KruiseDaemon`, which runs the
    /// probes): the PodProbeMarker and NodePodProbe controllers.
    pub pod_probe_marker: bool,
    /// `WorkloadSpread` (on by default upstream).
    pub workload_spread: bool,
}

impl GatedControllers {
    pub fn of(gates: &FeatureGates) -> Self {
        let on = |c: &Controller| (c.enabled)(gates);
        Self {
            node_images: on(&nodeimage::controller::CONTROLLER),
            pull_jobs: on(&imagepulljob::controller::CONTROLLER),
            container_recreate: on(&crr::controller::CONTROLLER),
            pod_unavailable_budget: on(&podunavailablebudget::controller::CONTROLLER),
            resource_distribution: on(&resourcedistribution::controller::CONTROLLER),
            sidecar_terminator: on(&sidecarterminator::controller::CONTROLLER),
            pod_probe_marker: on(&podprobemarker::controller::CONTROLLER),
            workload_spread: on(&workloadspread::controller::CONTROLLER),
        }
    }
}

/// Everything the controllers run on while this replica leads: the shared state, then every
/// controller of [`CONTROLLERS`] its gate allows.
pub async fn run_controllers(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    watch_namespace: Option<String>,
    gates: FeatureGates,
    token: CancellationToken,
) {
    let shared = Shared::start(client, pods, metrics, gates, watch_namespace, token);
    registry::run(CONTROLLERS, &shared).await;
}

fn client(
    cfg: &kube::Config,
    qps: f32,
    burst: u32,
    max_in_flight: usize,
) -> Result<Client, AppError> {
    ratelimit::client_with(cfg.clone(), qps, burst, max_in_flight)
        .map_err(|e| AppError::Client(e.to_string()))
}

/// A spawned server task.
type Task<E> = tokio::task::JoinHandle<Result<(), E>>;

/// How starting the webhook ended.
enum WebhookStart {
    /// No webhook configured.
    Disabled,
    /// Serving; the task ends at shutdown.
    Serving(Task<kruise_webhook::Error>),
    /// Shutdown came before it was ready.
    Cancelled,
}

/// Runs the manager until `shutdown` is cancelled (upstream's `main`, after flag parsing).
/// Returns early with an error when the webhook does not come up or leader election fails.
#[tracing::instrument(skip_all, fields(identity = %cfg.identity))]
pub async fn run(cfg: AppConfig, shutdown: CancellationToken) -> Result<(), AppError> {
    let client = client(
        &cfg.kube,
        cfg.kube_api_qps,
        cfg.kube_api_burst,
        cfg.kube_api_max_in_flight,
    )?;
    let servers = start_servers(&cfg, &shutdown);

    // The webhook comes first: a controller must never create a pod the webhook has not had the
    // chance to mutate.
    let webhook = match start_webhook(&cfg, &shutdown).await? {
        WebhookStart::Cancelled => return Ok(()),
        WebhookStart::Disabled => None,
        WebhookStart::Serving(handle) => Some(handle),
    };

    let pods = PodCache::start(
        client.clone(),
        cfg.watch_namespace.as_deref(),
        shutdown.clone(),
    );
    tokio::select! {
        _ = pods.wait_synced() => {}
        _ = shutdown.cancelled() => return Ok(()),
    }
    tracing::info!("pod cache synced");
    cfg.health.set_ready(true);

    let result = run_leading(&cfg, client, pods, &shutdown).await;
    shutdown.cancel();
    stop(webhook, servers).await;
    tracing::info!("kruise-manager stopped");
    result
}

/// The metrics and health endpoints; one server when both share an address.
fn start_servers(cfg: &AppConfig, shutdown: &CancellationToken) -> Vec<Task<server::ServeError>> {
    let (metrics, health) = (cfg.metrics.clone(), cfg.health.clone());
    let mut servers = Vec::new();
    match (cfg.metrics_addr, cfg.health_addr) {
        (Some(m), Some(h)) if m == h => {
            let r = server::router(health.clone(), metrics.clone(), true, true);
            servers.push(tokio::spawn(server::serve(h, r, shutdown.clone())));
        }
        (m, h) => {
            if let Some(m) = m {
                let r = server::router(health.clone(), metrics.clone(), true, false);
                servers.push(tokio::spawn(server::serve(m, r, shutdown.clone())));
            }
            if let Some(h) = h {
                let r = server::router(health.clone(), metrics.clone(), false, true);
                servers.push(tokio::spawn(server::serve(h, r, shutdown.clone())));
            }
        }
    }
    servers
}

/// Starts the admission webhook and waits until it serves.
async fn start_webhook(
    cfg: &AppConfig,
    shutdown: &CancellationToken,
) -> Result<WebhookStart, AppError> {
    let Some(wcfg) = &cfg.webhook else {
        tracing::warn!("webhook disabled: pods will not get the KruisePodReady readiness gate");
        return Ok(WebhookStart::Disabled);
    };
    // The webhook's own client, without the controllers' rate limit: an admission call
    // (a template dry-run, a CRR's Pod) must not queue behind a rollout's writes and miss
    // the API server's timeout. Its requests are bounded by the admissions it is sent.
    let wclient = self::client(&cfg.kube, 0.0, 0, cfg.kube_api_max_in_flight)?;
    let token = shutdown.clone();
    let mut run_cfg = wcfg.clone();
    run_cfg.feature_gates = cfg.feature_gates;
    run_cfg.metrics = cfg.metrics.protection.clone();
    let handle = tokio::spawn(async move {
        kruise_webhook::run(wclient, run_cfg, token.cancelled_owned()).await
    });
    tokio::select! {
        r = kruise_webhook::wait_ready(wcfg, cfg.webhook_ready_timeout) => {
            if let Err(e) = r {
                // The server task may hold the real cause (a taken port, RBAC).
                if handle.is_finished()
                    && let Ok(Err(cause)) = handle.await
                {
                    return Err(AppError::Webhook(cause));
                }
                return Err(AppError::Webhook(e));
            }
        }
        _ = shutdown.cancelled() => return Ok(WebhookStart::Cancelled),
    }
    tracing::info!(addr = %wcfg.bind_addr, "webhook is serving");
    Ok(WebhookStart::Serving(handle))
}

/// Runs the controllers: while this replica leads when leader election is on, else at once.
async fn run_leading(
    cfg: &AppConfig,
    client: Client,
    pods: PodCache,
    shutdown: &CancellationToken,
) -> Result<(), AppError> {
    let metrics = cfg.metrics.clone();
    if !cfg.leader_elect {
        tracing::info!("leader election disabled; starting controllers");
        metrics.is_leader.set(1);
        run_controllers(
            client.clone(),
            pods.clone(),
            metrics.clone(),
            cfg.watch_namespace.clone(),
            cfg.feature_gates,
            shutdown.clone(),
        )
        .await;
        return Ok(());
    }
    let settings = LeaseSettings {
        name: cfg.leader_election_id.clone(),
        namespace: cfg.leader_election_namespace.clone(),
        identity: cfg.identity.clone(),
        duration_secs: cfg.lease_duration,
        grace_secs: cfg.lease_grace,
    };
    let m = metrics.clone();
    let gates = cfg.feature_gates;
    let (c, p, wn) = (client.clone(), pods.clone(), cfg.watch_namespace.clone());
    leader::run_when_leader(
        client.clone(),
        settings,
        shutdown.clone(),
        move |leading| {
            m.is_leader.set(i64::from(leading));
        },
        move |token| {
            run_controllers(
                c.clone(),
                p.clone(),
                metrics.clone(),
                wn.clone(),
                gates,
                token,
            )
        },
    )
    .await
    .map_err(|e| AppError::Leader(e.to_string()))
}

/// Waits for the webhook and HTTP servers to end after shutdown, logging how they ended.
async fn stop(
    webhook: Option<Task<kruise_webhook::Error>>,
    servers: Vec<Task<server::ServeError>>,
) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_controllers_start_as_upstream_starts_them() {
        let cases = [
            // Upstream's defaults: no pull jobs, no distributions.
            ("", (true, false, true, true, false, false)),
            (
                "ImagePullJobGate=true",
                (true, true, true, true, false, false),
            ),
            // Pre-download turns the pull-job gate on.
            (
                "PreDownloadImageForInPlaceUpdate=true",
                (true, true, true, true, false, false),
            ),
            (
                "KruiseDaemon=false,ImagePullJobGate=true",
                (false, false, false, true, false, false),
            ),
            // PodUnavailableBudget: either gate starts the controller.
            (
                "PodUnavailableBudgetDeleteGate=false",
                (true, false, true, false, false, false),
            ),
            (
                "PodUnavailableBudgetDeleteGate=false,PodUnavailableBudgetUpdateGate=true",
                (true, false, true, true, false, false),
            ),
            (
                "ResourceDistributionGate=true",
                (true, false, true, true, true, false),
            ),
            // SidecarTerminator: off upstream, and off with the daemon that carries out its
            // requests.
            (
                "SidecarTerminator=true",
                (true, false, true, true, false, true),
            ),
            (
                "KruiseDaemon=false,SidecarTerminator=true",
                (false, false, false, true, false, false),
            ),
        ];
        for (
            flag,
            (
                node_images,
                pull_jobs,
                container_recreate,
                pod_unavailable_budget,
                resource_distribution,
                sidecar_terminator,
            ),
        ) in cases
        {
            let gates = FeatureGates::parse(flag).expect(flag);
            assert_eq!(
                GatedControllers::of(&gates),
                GatedControllers {
                    node_images,
                    pull_jobs,
                    container_recreate,
                    pod_unavailable_budget,
                    resource_distribution,
                    sidecar_terminator,
                    // PodProbeMarkerGate is on by default; it follows the daemon's gate.
                    pod_probe_marker: node_images,
                    // WorkloadSpread is on by default upstream; see the test below.
                    workload_spread: true,
                },
                "{flag}"
            );
        }
        let off = FeatureGates::parse("PodProbeMarkerGate=false").expect("valid");
        assert!(!GatedControllers::of(&off).pod_probe_marker);
    }

    #[test]
    fn workload_spread_follows_its_gate() {
        let on = FeatureGates::parse("").expect("defaults");
        assert!(GatedControllers::of(&on).workload_spread);
        let off = FeatureGates::parse("WorkloadSpread=false").expect("off");
        assert!(!GatedControllers::of(&off).workload_spread);
    }

    #[test]
    fn identity_carries_the_process_id() {
        let id = identity();
        assert!(
            id.ends_with(&format!("_{}", std::process::id())),
            "identity {id} must end with the pid so two replicas on one host differ"
        );
    }
}
