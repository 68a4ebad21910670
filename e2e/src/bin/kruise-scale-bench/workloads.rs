//! The CloneSets of one manager run: one CloneSet of N Pods (`--workloads 1`, the shape every
//! earlier table measured, observed exactly as it always was), or K CloneSets of N/K Pods each.
//! K CloneSets are created and patched concurrently (bounded), and one CloneSet watch says when
//! all of them reached a goal (ready on v1, then rolled out to v2), rather than K polls.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kruise_e2e::{Result, cloneset, wait_for};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::pods::{SETUP_CONCURRENCY, delete_pods, pod_spec};
use crate::{IMAGE_V1, IMAGE_V2, other, timeout_for};

/// The label every Pod of the run carries (the pod watch's selector), whatever the shape.
const APP: &str = "scale";

/// Waits until the API server admits the CloneSet (a server-side dry run): the manager's
/// webhook serves and its configurations point at it. Readiness alone does not say so for
/// OpenKruise, which patches its configurations after it reports ready.
async fn wait_admitted(api: &Api<DynamicObject>, cs: &DynamicObject) -> Result<()> {
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    wait_for(
        "the manager's webhook to admit a CloneSet",
        Duration::from_secs(120),
        // A refusal is retried, and the last one is what a timeout reports.
        || async { Ok(api.create(&dry, cs).await.map(|_| Some(()))?) },
    )
    .await
}

/// The JSON patch of the rollout: the template's image to v2.
fn image_patch() -> serde_json::Value {
    json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": IMAGE_V2}])
}

/// The CloneSet version the installed system serves: v1beta1 (Kruise-rs's storage version, and
/// OpenKruise's master), else v1alpha1 (OpenKruise v1.9.0 as released serves only that). Asking
/// for the stored version spares every request a trip through the conversion webhook.
pub(crate) async fn served_version(client: &Client) -> &'static str {
    match client.list_api_group_resources(keys::APPS_V1BETA1).await {
        Ok(list) if list.resources.iter().any(|r| r.name == "clonesets") => keys::VERSION_V1BETA1,
        _ => keys::VERSION_V1ALPHA1,
    }
}

pub(crate) struct Workloads {
    api: Api<DynamicObject>,
    version: &'static str,
    n: usize,
    k: usize,
    /// K > 1: the CloneSet watch, from before the creates until the rollout completed.
    watch: Option<CloneSetWatch>,
}

impl Workloads {
    pub(crate) fn new(
        client: &Client,
        ns: &str,
        version: &'static str,
        n: usize,
        k: usize,
    ) -> Self {
        Self {
            api: Api::namespaced_with(client.clone(), ns, &cloneset::resource(version)),
            version,
            n,
            k,
            watch: None,
        }
    }

    /// The selector of every Pod of the run.
    pub(crate) fn selector(&self) -> String {
        format!("app={APP}")
    }

    /// Generous, as `timeout_for`, plus half a second per CloneSet beyond the first: each is
    /// admitted by the webhook, reconciled and has its status written on its own.
    pub(crate) fn timeout(&self) -> Duration {
        timeout_for(self.n) + Duration::from_secs((self.k as u64 - 1) / 2)
    }

    fn name(&self, i: usize) -> String {
        if self.k == 1 {
            APP.into()
        } else {
            format!("{APP}-{i}")
        }
    }

    /// CloneSet `i`: InPlaceIfPossible, maxUnavailable 100%, N/K Pods labelled `app=scale`
    /// (and, with K > 1, `workload=<its name>`, so that the selectors do not overlap).
    fn object(&self, i: usize) -> Result<DynamicObject> {
        let name = self.name(i);
        let labels = if self.k == 1 {
            json!({"app": APP})
        } else {
            json!({"app": APP, "workload": name})
        };
        // v1alpha1 names the in-place policy the strategy's type; v1beta1 nests it.
        let strategy = if self.version == keys::VERSION_V1ALPHA1 {
            json!({"type": "InPlaceIfPossible", "maxUnavailable": "100%"})
        } else {
            json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "maxUnavailable": "100%"}})
        };
        Ok(serde_json::from_value(json!({
            "apiVersion": format!("{}/{}", keys::APPS_GROUP, self.version),
            "kind": "CloneSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": self.n / self.k,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": pod_spec(IMAGE_V1)},
                "updateStrategy": strategy
            }
        }))?)
    }

    /// Creates the CloneSets once the webhook admits them and waits until every Pod is ready.
    pub(crate) async fn create_ready(&mut self) -> Result<()> {
        let (n, k) = (self.n, self.k);
        wait_admitted(&self.api, &self.object(0)?).await?;
        if k == 1 {
            let name = self.name(0);
            self.api
                .create(&PostParams::default(), &self.object(0)?)
                .await?;
            let n64 = n as i64;
            cloneset::wait_status(
                &self.api,
                &name,
                &format!("{n} pods of the CloneSet ready"),
                self.timeout(),
                |cs| cloneset::status_i64(cs, "readyReplicas") == n64,
            )
            .await?;
            return Ok(());
        }
        let watch = CloneSetWatch::start(self.api.clone(), k, IMAGE_V1).await?;
        let objects = (0..k).map(|i| self.object(i)).collect::<Result<Vec<_>>>()?;
        stream::iter(objects)
            .map(|cs| {
                let api = self.api.clone();
                async move { api.create(&PostParams::default(), &cs).await }
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?;
        let what = format!("{k} CloneSets of {} pods ready", n / k);
        watch.wait_done(&what, self.timeout()).await?;
        self.watch = Some(watch);
        Ok(())
    }

    /// Gives every CloneSet the new image, as fast as the benchmark can (K > 1: that many
    /// patches in flight), and returns when the last patch was answered, from `start`.
    pub(crate) async fn roll(&self, start: Instant) -> Result<Duration> {
        if let Some(w) = &self.watch {
            w.set_goal(IMAGE_V2);
        }
        stream::iter(0..self.k)
            .map(|i| {
                let (api, name) = (self.api.clone(), self.name(i));
                async move { cloneset::json_patch(&api, &name, image_patch()).await }
            })
            .buffer_unordered(SETUP_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?;
        Ok(start.elapsed())
    }

    /// Waits until the rollout completed (every CloneSet's status observed its generation and
    /// counts all its Pods updated and ready) and returns when, from `start`.
    pub(crate) async fn wait_complete(&self, start: Instant) -> Result<Duration> {
        let (n, k) = (self.n, self.k);
        let Some(w) = &self.watch else {
            let n64 = n as i64;
            cloneset::wait_status(
                &self.api,
                &self.name(0),
                &format!("{n} pods updated and ready"),
                self.timeout(),
                |cs| {
                    cloneset::status_i64(cs, "updatedReadyReplicas") == n64
                        && cloneset::status_i64(cs, "readyReplicas") == n64
                },
            )
            .await?;
            return Ok(start.elapsed());
        };
        let what = format!("{k} CloneSets of {} pods updated and ready", n / k);
        Ok(w.wait_done(&what, self.timeout()).await? - start)
    }

    /// Without a garbage collector the Pods stay: deletes the CloneSets first (else they
    /// recreate them), then their Pods. Failed deletes are retried until all are gone.
    pub(crate) async fn delete(mut self, pods: &Api<Pod>) -> Result<()> {
        self.watch = None;
        let api = &self.api;
        wait_for("the CloneSets deleted", self.timeout(), || async {
            let left = api.list_metadata(&ListParams::default()).await?;
            if left.items.is_empty() {
                return Ok(Some(()));
            }
            let live = left
                .items
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .map(|c| c.name_any());
            stream::iter(live)
                .for_each_concurrent(SETUP_CONCURRENCY, |name| async move {
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                })
                .await;
            Ok(None)
        })
        .await?;
        delete_pods(pods, &self.selector(), self.n).await
    }
}

/// What the watch keeps of a CloneSet.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Seen {
    pub(crate) image: String,
    pub(crate) generation: i64,
    pub(crate) observed: i64,
    pub(crate) replicas: i64,
    pub(crate) ready: i64,
    pub(crate) updated_ready: i64,
}

impl Seen {
    fn of(cs: &DynamicObject) -> Self {
        let spec = &cs.data["spec"];
        Self {
            image: spec["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            generation: cs.metadata.generation.unwrap_or(0),
            observed: cs.data["status"]["observedGeneration"]
                .as_i64()
                .unwrap_or(-1),
            replicas: spec["replicas"].as_i64().unwrap_or(0),
            ready: cloneset::status_i64(cs, "readyReplicas"),
            updated_ready: cloneset::status_i64(cs, "updatedReadyReplicas"),
        }
    }

    /// Rolled out to `image`: the spec has it (so the generation is the one that set it), the
    /// status was written for that generation, and every Pod is updated and ready.
    pub(crate) fn at(&self, image: &str) -> bool {
        self.image == image
            && self.observed == self.generation
            && self.updated_ready == self.replicas
            && self.ready == self.replicas
    }
}

/// The watch's view: every CloneSet seen, the image they should reach, those that did, and when
/// all `k` first had.
#[derive(Debug)]
pub(crate) struct Goal {
    seen: HashMap<String, Seen>,
    image: String,
    reached: HashSet<String>,
    k: usize,
    pub(crate) done: Option<Instant>,
}

impl Goal {
    pub(crate) fn new(k: usize, image: &str) -> Self {
        Self {
            seen: HashMap::new(),
            image: image.into(),
            reached: HashSet::new(),
            k,
            done: None,
        }
    }

    /// A CloneSet's new state (None: deleted).
    pub(crate) fn update(&mut self, name: String, seen: Option<Seen>) {
        if seen.as_ref().is_some_and(|s| s.at(&self.image)) {
            self.reached.insert(name.clone());
        } else {
            self.reached.remove(&name);
        }
        match seen {
            Some(s) => self.seen.insert(name, s),
            None => self.seen.remove(&name),
        };
        self.check();
    }

    /// A new goal: who reached it is counted again, and `done` waits for all again.
    pub(crate) fn set(&mut self, image: &str) {
        self.image = image.into();
        self.done = None;
        self.reached = self
            .seen
            .iter()
            .filter(|(_, s)| s.at(image))
            .map(|(n, _)| n.clone())
            .collect();
        self.check();
    }

    fn check(&mut self) {
        if self.reached.len() >= self.k {
            self.done.get_or_insert_with(Instant::now);
        }
    }
}

/// One watch of the namespace's CloneSets, keeping a `Goal`.
pub(crate) struct CloneSetWatch {
    goal: Arc<Mutex<Goal>>,
    task: tokio::task::JoinHandle<()>,
}

impl CloneSetWatch {
    async fn start(api: Api<DynamicObject>, k: usize, image: &str) -> Result<Self> {
        use kube::runtime::watcher::{self, Event};
        let goal = Arc::new(Mutex::new(Goal::new(k, image)));
        let synced = Arc::new(AtomicBool::new(false));
        let (g, s) = (goal.clone(), synced.clone());
        let task = tokio::spawn(async move {
            let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(ev) = events.next().await {
                let (name, seen) = match ev {
                    Ok(Event::Apply(cs) | Event::InitApply(cs)) => {
                        (cs.name_any(), Some(Seen::of(&cs)))
                    }
                    Ok(Event::Delete(cs)) => (cs.name_any(), None),
                    Ok(Event::InitDone) => {
                        s.store(true, Ordering::SeqCst);
                        continue;
                    }
                    Ok(Event::Init) | Err(_) => continue,
                };
                if let Ok(mut g) = g.lock() {
                    g.update(name, seen);
                }
            }
        });
        let w = Self { goal, task };
        wait_for(
            "the CloneSet watch to sync",
            Duration::from_secs(60),
            || async { Ok(synced.load(Ordering::SeqCst).then_some(())) },
        )
        .await?;
        Ok(w)
    }

    fn set_goal(&self, image: &str) {
        if let Ok(mut g) = self.goal.lock() {
            g.set(image);
        }
    }

    /// When every CloneSet first reached the goal.
    async fn wait_done(&self, what: &str, timeout: Duration) -> Result<Instant> {
        let start = Instant::now();
        loop {
            let (done, reached) = match self.goal.lock() {
                Ok(g) => (g.done, g.reached.len()),
                Err(_) => return Err(other("the CloneSet watch panicked")),
            };
            if let Some(t) = done {
                return Ok(t);
            }
            if start.elapsed() > timeout {
                return Err(other(format!(
                    "{what}: only {reached} after {} s",
                    timeout.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for CloneSetWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(image: &str, generation: i64, observed: i64, ready: i64, updated: i64) -> Seen {
        Seen {
            image: image.into(),
            generation,
            observed,
            replicas: 5,
            ready,
            updated_ready: updated,
        }
    }

    #[test]
    fn a_clone_set_is_rolled_out_when_its_status_counts_the_new_spec() {
        assert!(seen("v2", 2, 2, 5, 5).at("v2"));
        // The status of the generation before: its counts say nothing of v2.
        assert!(!seen("v2", 2, 1, 5, 5).at("v2"));
        assert!(!seen("v2", 2, 2, 5, 4).at("v2"));
        assert!(!seen("v2", 2, 2, 4, 5).at("v2"));
        assert!(!seen("v1", 1, 1, 5, 5).at("v2"));
    }

    #[test]
    fn the_goal_is_done_when_every_clone_set_reached_it() {
        let mut g = Goal::new(2, "v1");
        g.update("a".into(), Some(seen("v1", 1, 1, 5, 5)));
        assert!(g.done.is_none());
        g.update("b".into(), Some(seen("v1", 1, 1, 3, 3)));
        assert!(g.done.is_none());
        g.update("b".into(), Some(seen("v1", 1, 1, 5, 5)));
        assert!(g.done.is_some());
        // The rollout: nobody is there yet, until both are.
        g.set("v2");
        assert!(g.done.is_none());
        g.update("a".into(), Some(seen("v2", 2, 2, 5, 5)));
        g.update("b".into(), Some(seen("v2", 2, 1, 5, 5)));
        assert!(g.done.is_none());
        g.update("b".into(), None);
        assert!(g.done.is_none());
        g.update("b".into(), Some(seen("v2", 2, 2, 5, 5)));
        assert!(g.done.is_some());
    }
}
