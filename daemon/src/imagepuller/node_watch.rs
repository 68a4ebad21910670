//! The watch of this node's NodeImage, which the puller's loop reads the newest of.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::apitypes::NodeImage;

/// Keeps `tx` at this node's NodeImage (`None` once deleted) until `shutdown` fires.
pub(super) fn spawn(
    api: Api<NodeImage>,
    node: &str,
    tx: Arc<watch::Sender<Option<NodeImage>>>,
    shutdown: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let cfg = watcher::Config::default().fields(&format!("metadata.name={node}"));
    tokio::spawn(async move {
        let mut stream = watcher(api, cfg).boxed();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                ev = stream.next() => match ev {
                    Some(Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                        tx.send_replace(Some(o));
                    }
                    Some(Ok(watcher::Event::Delete(_))) => { tx.send_replace(None); }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "NodeImage watch error");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    None => break,
                }
            }
        }
    })
}
