//! Observing the patches: a Pod watch that notes when every Pod has the new image in its spec.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kruise_e2e::{Result, wait_for};
use kube::{Api, ResourceExt};

use crate::other;

/// Watches the Pods of a selector and notes when all `n` of them have the new image in their
/// spec — the moment the last in-place patch reached the API server.
pub(crate) struct ImageWatch {
    pub(crate) synced: Arc<AtomicBool>,
    /// Pod updates seen after the initial list: every write to a Pod (the manager's and
    /// kwok's), which is the work a rollout costs the API server.
    pub(crate) writes: Arc<AtomicUsize>,
    pub(crate) done: Arc<Mutex<Option<Instant>>>,
    pub(crate) task: tokio::task::JoinHandle<()>,
}

pub(crate) fn has_image(p: &Pod, image: &str) -> bool {
    p.spec.as_ref().is_some_and(|s| {
        s.containers
            .iter()
            .any(|c| c.image.as_deref() == Some(image))
    })
}

impl ImageWatch {
    pub(crate) async fn start(
        api: Api<Pod>,
        selector: &str,
        image: &str,
        n: usize,
    ) -> Result<Self> {
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

    pub(crate) async fn wait_done(&self, timeout: Duration) -> Result<Instant> {
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
