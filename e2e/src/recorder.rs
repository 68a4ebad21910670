//! Records every change of a namespace's Pods during a rollout, so a test can assert on what
//! happened in between (how many Pods were unavailable at once, which conditions flipped).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};

use crate::pod_condition;

/// One observation: the Pod's name and uid, whether it was Ready, and its InPlaceUpdateReady.
#[derive(Clone, Debug)]
pub struct Seen {
    pub name: String,
    pub uid: String,
    pub ready: bool,
    pub inplace_ready: Option<String>,
    pub deleted: bool,
}

/// A background watch of the Pods matching a label selector.
pub struct PodRecorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodRecorder {
    pub fn start(api: Api<Pod>, selector: &str) -> Self {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let cfg = watcher::Config::default().labels(selector);
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, cfg).boxed();
            while let Some(ev) = stream.next().await {
                let (pod, deleted) = match ev {
                    Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => (p, false),
                    Ok(Event::Delete(p)) => (p, true),
                    _ => continue,
                };
                if let Ok(mut v) = sink.lock() {
                    v.push(observe(&pod, deleted));
                }
            }
        });
        Self { seen, task }
    }

    /// Everything seen so far, in order.
    pub fn history(&self) -> Vec<Seen> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// The largest number of existing Pods that were not Ready at the same moment.
    pub fn max_unavailable(&self) -> usize {
        let mut current: BTreeMap<String, bool> = BTreeMap::new();
        let mut worst = 0;
        for s in self.history() {
            if s.deleted {
                current.remove(&s.uid);
            } else {
                current.insert(s.uid.clone(), s.ready);
            }
            worst = worst.max(current.values().filter(|r| !**r).count());
        }
        worst
    }

    /// The InPlaceUpdateReady values a Pod (by uid) went through, without repeats.
    pub fn inplace_ready_sequence(&self, uid: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in self.history().into_iter().filter(|s| s.uid == uid) {
            let v = s.inplace_ready.unwrap_or_else(|| "absent".to_string());
            if out.last() != Some(&v) {
                out.push(v);
            }
        }
        out
    }
}

impl Drop for PodRecorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn observe(pod: &Pod, deleted: bool) -> Seen {
    Seen {
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        ready: crate::pod_ready(pod),
        inplace_ready: pod_condition(pod, kruise_api::keys::INPLACE_UPDATE_READY).map(String::from),
        deleted,
    }
}
