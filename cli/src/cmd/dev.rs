//! `kubectl kruise dev`: the manager (controllers and webhook) embedded in the plugin process,
//! for a dev cluster. It installs or updates the CRDs, serves the webhook on this host with a
//! self-signed certificate, points the webhook configurations at it, shows a one-line live
//! summary, and on Ctrl-C or SIGTERM removes the webhook configurations so the cluster is never
//! left refusing Pods.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_manager::app::{self, AppConfig};
use kruise_manager::metrics::Metrics;
use kube::api::{DynamicObject, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::cli::DevArgs;
use crate::ctx::{ConnectArgs, Ctx};
use crate::dev::{self, Images, cluster};
use crate::error::{CliError, Result, exit, kube_err};

/// Loads the client configuration the connection flags name (as `Ctx::connect` does).
async fn kube_config(args: &ConnectArgs) -> Result<Config> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..Default::default()
    };
    match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                CliError::Kubeconfig(format!("cannot read {}: {e}", path.display()))
            })?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| CliError::Kubeconfig(e.to_string()))
        }
        None if args.context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| CliError::Kubeconfig(e.to_string())),
        None => Config::infer()
            .await
            .map_err(|e| CliError::Kubeconfig(e.to_string())),
    }
}

/// The webhook URL base the API server calls.
pub fn webhook_url(host: &str, port: u16) -> String {
    let host = if host.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    format!("https://{host}:{port}")
}

/// Why `dev` must not start: something else serves the webhooks.
async fn refusal(client: &Client) -> Result<Option<String>> {
    if let Some(i) = cluster::installed(client).await? {
        return Ok(Some(format!(
            "{} {} runs in the cluster (Deployment {}, image {}) and serves the webhooks; \
             a second manager would fight it. Use another cluster, or remove it first \
             (kubectl kruise uninstall for Kruise-rs, helm uninstall for OpenKruise)",
            i.flavor, i.version, i.deployment, i.image
        )));
    }
    match cluster::webhook_target(client).await? {
        Some(t) if t.starts_with("service ") => Ok(Some(format!(
            "the webhook configuration {} sends Pods to {t}: an in-cluster Kruise (ours or \
             OpenKruise) serves the webhooks. Remove it first (kubectl kruise uninstall, or helm \
             uninstall for OpenKruise)",
            keys::MUTATING_WEBHOOK_CONFIGURATION_NAME
        ))),
        Some(url) => {
            // A URL: another dev manager, alive when it holds the Lease.
            let leases: Api<Lease> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
            let lease = leases.get_opt(app::LEASE_NAME).await.map_err(kube_err)?;
            let held = lease.and_then(|l| l.spec).and_then(|s| {
                let renewed = s.renew_time?.0;
                let valid = i64::from(s.lease_duration_seconds.unwrap_or(15));
                let fresh = jiff::Timestamp::now().duration_since(renewed).as_secs() <= valid;
                fresh.then_some(s.holder_identity.unwrap_or_default())
            });
            Ok(held.map(|holder| {
                format!(
                    "another dev-mode manager serves the webhooks at {url} and holds the Lease \
                     {}/{} ({holder}): stop it first (Ctrl-C in its terminal, or hack/dev-up.sh down)",
                    keys::KRUISE_NAMESPACE,
                    app::LEASE_NAME
                )
            }))
        }
        None => Ok(None),
    }
}

/// Installs or updates the namespaces and CRDs of `deploy/` (not the workloads: this process is
/// the manager).
async fn install_crds(client: &Client) -> Result<usize> {
    let objects = dev::objects(&Images::default()).map_err(|e| CliError::Failed(e.to_string()))?;
    for ns in objects.iter().filter(|o| dev::kind(o) == "Namespace") {
        cluster::apply(client, ns, false).await?;
    }
    let crds = dev::crds(&objects);
    for crd in &crds {
        cluster::apply(client, crd, false).await?;
    }
    cluster::wait_established(client, &crds, Duration::from_secs(60)).await?;
    Ok(crds.len())
}

/// True when some kruise-daemon Pod is Ready.
async fn daemon_runs(client: &Client) -> Result<bool> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), keys::KRUISE_NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=kruise-daemon"))
        .await
        .map_err(kube_err)?;
    Ok(list.items.iter().any(|p| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    }))
}

/// Counters summed over their labels, from the manager's metrics.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Counters {
    pub reconciles: f64,
    pub errors: f64,
    pub inplace_started: f64,
    pub inplace_completed: f64,
    pub leader: bool,
}

/// Sums the counters we show out of the OpenMetrics text.
pub fn counters(text: &str) -> Counters {
    let sum = |name: &str| -> f64 {
        text.lines()
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            // Not `sum`: an empty float sum is -0, which would print as "-0".
            .fold(0.0, |a, b| a + b)
    };
    Counters {
        reconciles: sum("kruise_manager_reconciles_total"),
        errors: sum("kruise_manager_reconcile_errors_total"),
        inplace_started: sum("kruise_manager_inplace_updates_started_total"),
        inplace_completed: sum("kruise_manager_inplace_updates_completed_total"),
        leader: sum("kruise_manager_leader") >= 1.0,
    }
}

/// CloneSets, and how many are rolling out (not all replicas updated and ready).
pub fn rollouts(clonesets: &[Value]) -> (usize, usize) {
    let rolling = clonesets
        .iter()
        .filter(|c| {
            let spec = c["spec"]["replicas"].as_i64().unwrap_or(1);
            let s = &c["status"];
            let observed = s["observedGeneration"].as_i64().unwrap_or(0)
                >= c["metadata"]["generation"].as_i64().unwrap_or(0);
            !(observed
                && s["updatedReplicas"].as_i64().unwrap_or(0) >= spec
                && s["updatedReadyReplicas"]
                    .as_i64()
                    .or_else(|| s["readyReplicas"].as_i64())
                    .unwrap_or(0)
                    >= spec
                && s["replicas"].as_i64().unwrap_or(0) == spec)
        })
        .count();
    (clonesets.len(), rolling)
}

/// The summary line.
pub fn summary(ready: bool, c: &Counters, clonesets: (usize, usize)) -> String {
    let state = match (ready, c.leader) {
        (false, _) => "starting",
        (true, false) => "serving (waiting for the Lease)",
        (true, true) => "running",
    };
    format!(
        "{state} · CloneSets {} ({} rolling) · reconciles {} · errors {} · in-place updates {}/{} done",
        clonesets.0, clonesets.1, c.reconciles, c.errors, c.inplace_completed, c.inplace_started
    )
}

async fn clonesets(ctx: &Ctx) -> Vec<Value> {
    let Ok((ar, _)) = ctx.resolve(keys::APPS_GROUP, "clonesets").await else {
        return Vec::new();
    };
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    match api.list(&ListParams::default()).await {
        Ok(l) => l
            .items
            .into_iter()
            .filter_map(|o| serde_json::to_value(o).ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Installs the CRDs and says what runs and what does not.
async fn announce(client: &kube::Client, args: &DevArgs, url: &str) -> Result<()> {
    let crds = install_crds(client).await?;
    println!(
        "kruise dev: Kruise-rs {} manager embedded; {crds} CRDs installed or updated",
        env!("CARGO_PKG_VERSION")
    );
    println!(
        "  webhook {url} (self-signed CA in Secret {}/{}; the API server must reach this host there, --webhook-host)",
        keys::KRUISE_NAMESPACE,
        keys::WEBHOOK_SECRET_NAME
    );
    if !daemon_runs(client).await? {
        println!(
            "  no kruise-daemon runs: in-place updates complete from the Pod's imageID, and container restarts (ContainerRecreateRequests) and image pre-pulls wait for a daemon"
        );
    }
    let gates = args.feature_gates.to_flag();
    println!(
        "  feature gates: {}",
        if gates.is_empty() {
            "OpenKruise's defaults".to_owned()
        } else {
            format!("OpenKruise's defaults except {gates}")
        }
    );
    println!("  Ctrl-C stops it and removes the webhook configurations");
    Ok(())
}

/// Runs the embedded manager until Ctrl-C or SIGTERM.
#[tracing::instrument(skip_all)]
pub async fn run(connect: &ConnectArgs, args: &DevArgs) -> Result<i32> {
    let config = kube_config(connect).await?;
    let ctx = Ctx::connect(connect).await?;
    let client = ctx.client.clone();
    if let Some(why) = refusal(&client).await? {
        return Err(CliError::Failed(format!(
            "kubectl kruise dev refuses to start: {why}"
        )));
    }
    let url = webhook_url(&args.webhook_host, args.webhook_port);
    announce(&client, args, &url).await?;

    kruise_api::features::install(args.feature_gates);
    let mut cfg = AppConfig::new(config);
    cfg.feature_gates = args.feature_gates;
    cfg.leader_election_namespace = keys::KRUISE_NAMESPACE.to_owned();
    cfg.identity = format!("kubectl-kruise-dev_{}", app::identity());
    cfg.webhook = Some(kruise_webhook::WebhookConfig {
        bind_addr: SocketAddr::new(args.listen, args.webhook_port),
        host_url: Some(url.clone()),
        ..Default::default()
    });
    let metrics: Arc<Metrics> = cfg.metrics.clone();
    let health = cfg.health.clone();

    let token = CancellationToken::new();
    app::shutdown_on_signals(token.clone());
    // A closed terminal (SIGHUP) must clean up too, or Pods would be refused afterwards.
    if let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        let t = token.clone();
        tokio::spawn(async move {
            hup.recv().await;
            t.cancel();
        });
    }
    let mut manager = tokio::spawn(app::run(cfg, token.clone()));
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    let outcome = loop {
        tokio::select! {
            r = &mut manager => break Some(r),
            _ = token.cancelled() => break None,
            _ = ticker.tick() => {}
        }
        let line = summary(
            health.is_ready(),
            &counters(&metrics.encode().unwrap_or_default()),
            rollouts(&clonesets(&ctx).await),
        );
        if tty {
            print!("\r\x1b[K{line}");
            let _ = std::io::stdout().flush();
        } else if line != last {
            println!("{line}");
        }
        last = line;
    };
    if tty {
        println!();
    }
    // Configurations first, while the server still answers, so no Pod is refused meanwhile.
    let removed = cluster::delete_webhook_configurations(&client).await;
    token.cancel();
    let result = match outcome {
        Some(r) => r,
        None => match tokio::time::timeout(Duration::from_secs(20), manager).await {
            Ok(r) => r,
            Err(_) => Ok(Ok(())),
        },
    };
    // Once more: the webhook may have re-registered itself while stopping.
    let again = cluster::delete_webhook_configurations(&client).await;
    match (removed, again) {
        (Ok(a), Ok(b)) => {
            println!(
                "kruise dev stopped: removed {} webhook configurations (CRDs and the {} namespace stay; kubectl kruise uninstall removes them)",
                a + b,
                keys::KRUISE_NAMESPACE
            );
            // The CRDs stay, and so does their conversion URL: say what that breaks and what
            // mends it rather than leave a v1alpha1 request to fail with "connection refused".
            if let Ok(names) = cluster::crds_converting_at(&client, &url).await
                && !names.is_empty()
            {
                println!(
                    "  {} CRDs still convert between versions through {url}: requests for a version other than the stored one (v1alpha1) fail until kubectl kruise dev runs again or kubectl kruise install serves them: {}",
                    names.len(),
                    names.join(", ")
                );
            }
        }
        (Err(e), _) | (_, Err(e)) => {
            return Err(CliError::Failed(format!(
                "could not remove the webhook configurations ({e}): delete them by hand, or Pods may be refused: kubectl delete mutatingwebhookconfiguration {} ; kubectl delete validatingwebhookconfiguration {}",
                keys::MUTATING_WEBHOOK_CONFIGURATION_NAME,
                keys::VALIDATING_WEBHOOK_CONFIGURATION_NAME
            )));
        }
    }
    match result {
        Ok(Ok(())) => Ok(exit::OK),
        Ok(Err(e)) => Err(CliError::Failed(format!(
            "the embedded manager stopped: {e}"
        ))),
        Err(e) => Err(CliError::Failed(format!(
            "the embedded manager failed: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_over_labels() {
        let text = "# HELP x\nkruise_manager_reconciles_total{controller=\"cloneset\"} 3\nkruise_manager_reconciles_total{controller=\"crr\"} 4\nkruise_manager_reconcile_errors_total{controller=\"cloneset\",error=\"api\"} 1\nkruise_manager_leader 1\n";
        let c = counters(text);
        assert_eq!(c.reconciles, 7.0);
        assert_eq!(c.errors, 1.0);
        assert!(c.leader);
        let none = counters("");
        assert!(
            !summary(true, &none, (0, 0)).contains("-0"),
            "no negative zero"
        );
    }

    #[test]
    fn a_cloneset_with_old_pods_is_rolling() {
        let done = serde_json::json!({"metadata": {"generation": 2}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "updatedReadyReplicas": 2}});
        let rolling = serde_json::json!({"metadata": {"generation": 3}, "spec": {"replicas": 2},
            "status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 1, "updatedReadyReplicas": 1}});
        assert_eq!(rollouts(&[done, rolling]), (2, 1));
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(webhook_url("127.0.0.1", 9876), "https://127.0.0.1:9876");
        assert_eq!(webhook_url("::1", 9876), "https://[::1]:9876");
        assert_eq!(
            webhook_url("host.docker.internal", 9443),
            "https://host.docker.internal:9443"
        );
    }
}
