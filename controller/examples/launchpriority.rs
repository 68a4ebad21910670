//! Runs only the container launch-priority controller against the cluster in `$KUBECONFIG`
//! (or the usual inference), for trying it out before it is wired into kruise-manager.
//!
//! `cargo run -p kruise-manager --example launchpriority`

use std::sync::Arc;

use kruise_manager::launchpriority;
use kruise_manager::metrics::Metrics;
use kruise_manager::podcache::PodCache;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let client = kube::Client::try_default().await?;
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    let pods = PodCache::start(client.clone(), None, shutdown.clone());
    pods.wait_synced().await;
    tracing::info!("pod cache synced; running the launch-priority controller");
    launchpriority::run(client, pods, Arc::new(Metrics::new()), shutdown).await;
    Ok(())
}
