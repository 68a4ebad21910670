//! Leader election on a coordination.k8s.io Lease. Controllers run only while this replica holds
//! the lease; when it is lost they are stopped (their in-memory expectations go with them) and
//! the replica waits to be elected again.

use std::future::Future;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio_util::sync::CancellationToken;

/// Lease settings.
#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    pub identity: String,
    /// Seconds a lease stays valid without renewal.
    pub duration_secs: u64,
    /// Seconds before expiry at which the holder renews.
    pub grace_secs: u64,
}

/// Runs `work` (given a token cancelled on lost leadership) every time this replica becomes the
/// leader, until `shutdown`. `on_change` hears every leadership change.
pub async fn run_when_leader<F, Fut>(
    client: Client,
    settings: LeaseSettings,
    shutdown: CancellationToken,
    on_change: impl Fn(bool),
    mut work: F,
) -> Result<(), LeaseManagerError>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let manager = LeaseManagerBuilder::new(client, &settings.name)
        .with_namespace(&settings.namespace)
        .with_identity(&settings.identity)
        .with_duration(settings.duration_secs)
        .with_grace(settings.grace_secs)
        .build()
        .await?;
    let (mut leader_rx, lease_task) = manager.watch().await;
    tracing::info!(lease = %settings.name, namespace = %settings.namespace, identity = %settings.identity, "waiting for leadership");
    let mut running: Option<(CancellationToken, tokio::task::JoinHandle<()>)> = None;
    loop {
        let is_leader = *leader_rx.borrow_and_update();
        match (is_leader, running.is_some()) {
            (true, false) => {
                tracing::info!(identity = %settings.identity, "became the leader; starting controllers");
                on_change(true);
                let token = shutdown.child_token();
                let handle = tokio::spawn(work(token.clone()));
                running = Some((token, handle));
            }
            (false, true) => {
                tracing::warn!(identity = %settings.identity, "lost the lease; stopping controllers");
                on_change(false);
                if let Some((token, handle)) = running.take() {
                    token.cancel();
                    let _ = handle.await;
                }
            }
            _ => {}
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = leader_rx.changed() => {
                if changed.is_err() {
                    tracing::error!("lease manager stopped");
                    break;
                }
            }
        }
    }
    if let Some((token, handle)) = running.take() {
        token.cancel();
        let _ = handle.await;
    }
    on_change(false);
    // Closing the channel makes the lease task release the lease so a standby takes over at once.
    drop(leader_rx);
    match lease_task.await {
        Ok(Ok(_)) => tracing::info!("lease released"),
        Ok(Err(e)) => tracing::warn!(error = %e, "releasing the lease failed"),
        Err(e) => tracing::warn!(error = %e, "lease task panicked"),
    }
    Ok(())
}
