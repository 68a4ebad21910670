//! What the campaign saw: every change of every object in its namespace, from watches of its
//! own that resume (re-list) after the API server comes back. A Pod's observation keeps what
//! the invariants read; any other object's keeps its status.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::MatchedWorkloadSpread;
use kruise_api::keys;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One container as a Pod observation saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerObs {
    pub name: String,
    /// The image the spec asks for: the revision this container should run.
    pub spec_image: String,
    pub id: String,
    pub restarts: i32,
}

/// One observation of a Pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodObs {
    /// Milliseconds since the campaign started.
    pub t_ms: u64,
    pub name: String,
    pub uid: String,
    /// Gone (a watch delete, or missing from a re-list).
    pub deleted: bool,
    /// Has a deletionTimestamp.
    pub terminating: bool,
    pub ready: bool,
    /// The controller owner, `Kind/name` (empty: none).
    pub owner: String,
    /// The slot the Pod fills for its owner: `owner/key` (see [`slot_key`]).
    pub slot: String,
    /// The WorkloadSpread subset it was placed in, `ws/subset`.
    pub spread: Option<String>,
    pub containers: Vec<ContainerObs>,
}

/// One observation of any other object.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ObjObs {
    pub t_ms: u64,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub deleted: bool,
    /// The controller owner, `Kind/name` (empty: none).
    pub owner: String,
    /// An AdvancedCronJob run's schedule point (its scheduled-at annotation).
    pub scheduled: Option<String>,
    pub status: Value,
}

/// Everything seen, in the order seen.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct History {
    pub pods: Vec<PodObs>,
    pub objects: Vec<ObjObs>,
    /// Errors the watches hit (the API server away) and resumed from.
    pub watch_errors: usize,
}

/// The key of the slot a Pod fills: a CloneSet's instance id; an Advanced StatefulSet's
/// ordinal (its name); the node of a DaemonSet's or BroadcastJob's Pod; else the Pod's name.
pub fn slot_key(pod: &Pod, owner_kind: &str) -> String {
    if let Some(id) = pod.labels().get(keys::CLONESET_INSTANCE_ID_LABEL) {
        return id.clone();
    }
    match owner_kind {
        "DaemonSet" | "BroadcastJob" => target_node(pod).unwrap_or_else(|| pod.name_any()),
        _ => pod.name_any(),
    }
}

/// The node a per-node Pod is for: its nodeName, or before scheduling the node its required
/// affinity names (`metadata.name` field selector, as DaemonSets pin their Pods).
fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.clone().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == "metadata.name")
        .and_then(|r| r.values.as_ref()?.first().cloned())
}

/// A Pod as the invariants read it.
pub fn pod_obs(pod: &Pod, t_ms: u64, deleted: bool) -> PodObs {
    let owner_ref = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    let owner = owner_ref
        .map(|o| format!("{}/{}", o.kind, o.name))
        .unwrap_or_default();
    let kind = owner_ref.map(|o| o.kind.as_str()).unwrap_or_default();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let st = statuses.iter().find(|s| s.name == c.name);
            ContainerObs {
                name: c.name.clone(),
                spec_image: c.image.clone().unwrap_or_default(),
                id: st.and_then(|s| s.container_id.clone()).unwrap_or_default(),
                restarts: st.map(|s| s.restart_count).unwrap_or(0),
            }
        })
        .collect();
    PodObs {
        t_ms,
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        deleted,
        terminating: pod.metadata.deletion_timestamp.is_some(),
        ready: crate::pod_ready(pod),
        slot: format!("{owner}/{}", slot_key(pod, kind)),
        owner,
        spread: MatchedWorkloadSpread::of(pod.metadata.annotations.as_ref())
            .map(|m| format!("{}/{}", m.name, m.subset)),
        containers,
    }
}

/// Background watches of the campaign's namespace, each resumed (with backoff) after errors.
pub struct Recorder {
    history: Arc<Mutex<History>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    t0: Instant,
}

impl Recorder {
    /// Watches the namespace's Pods and its objects of each of `kinds`.
    pub fn start(client: &Client, ns: &str, kinds: &[ApiResource], t0: Instant) -> Self {
        let history = Arc::new(Mutex::new(History::default()));
        let mut tasks = vec![tokio::spawn(watch_pods(
            Api::namespaced(client.clone(), ns),
            history.clone(),
            t0,
        ))];
        for ar in kinds {
            tasks.push(tokio::spawn(watch_objects(
                Api::namespaced_with(client.clone(), ns, ar),
                ar.kind.clone(),
                history.clone(),
                t0,
            )));
        }
        Self { history, tasks, t0 }
    }

    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.t0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn snapshot(&self) -> History {
        self.history.lock().map(|h| h.clone()).unwrap_or_default()
    }

    pub fn stop(self) -> History {
        for t in &self.tasks {
            t.abort();
        }
        self.snapshot()
    }
}

fn elapsed(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What a re-list tells: the objects it lists, and (by their absence) those deleted while the
/// watch was away.
struct Relist {
    seen: Vec<String>,
}

async fn watch_pods(api: Api<Pod>, history: Arc<Mutex<History>>, t0: Instant) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relist: Option<Relist> = None;
    while let Some(ev) = stream.next().await {
        let Ok(mut h) = history.lock() else { return };
        let t = elapsed(t0);
        match ev {
            Ok(Event::Apply(p)) => h.pods.push(pod_obs(&p, t, false)),
            Ok(Event::Delete(p)) => h.pods.push(pod_obs(&p, t, true)),
            Ok(Event::Init) => relist = Some(Relist { seen: Vec::new() }),
            Ok(Event::InitApply(p)) => {
                if let Some(r) = relist.as_mut() {
                    r.seen.push(p.uid().unwrap_or_default());
                }
                h.pods.push(pod_obs(&p, t, false));
            }
            Ok(Event::InitDone) => {
                let seen = relist.take().map(|r| r.seen).unwrap_or_default();
                let gone = vanished(&h.pods, &seen);
                for mut last in gone {
                    last.t_ms = t;
                    last.deleted = true;
                    h.pods.push(last);
                }
            }
            Err(_) => h.watch_errors += 1,
        }
    }
}

/// The last observation of each Pod that was alive before a re-list and is not in it.
fn vanished(pods: &[PodObs], listed: &[String]) -> Vec<PodObs> {
    let mut last: std::collections::BTreeMap<&str, &PodObs> = Default::default();
    for p in pods {
        last.insert(p.uid.as_str(), p);
    }
    last.into_values()
        .filter(|p| !p.deleted && !listed.contains(&p.uid))
        .cloned()
        .collect()
}

async fn watch_objects(
    api: Api<DynamicObject>,
    kind: String,
    history: Arc<Mutex<History>>,
    t0: Instant,
) {
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(ev) = stream.next().await {
        let Ok(mut h) = history.lock() else { return };
        let (o, deleted) = match ev {
            Ok(Event::Apply(o) | Event::InitApply(o)) => (o, false),
            Ok(Event::Delete(o)) => (o, true),
            Ok(_) => continue,
            Err(_) => {
                h.watch_errors += 1;
                continue;
            }
        };
        let obs = ObjObs {
            t_ms: elapsed(t0),
            kind: kind.clone(),
            name: o.name_any(),
            uid: o.uid().unwrap_or_default(),
            deleted,
            owner: o
                .owner_references()
                .iter()
                .find(|r| r.controller == Some(true))
                .map(|r| format!("{}/{}", r.kind, r.name))
                .unwrap_or_default(),
            scheduled: o
                .annotations()
                .get(keys::ADVANCEDCRONJOB_SCHEDULED_AT_ANNOTATION)
                .cloned(),
            status: o.data["status"].clone(),
        };
        h.objects.push(obs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn slots_follow_the_owner_kind() {
        let cs = pod(json!({"metadata": {"name": "cs-abcde", "uid": "u1",
            "labels": {"apps.kruise.io/cloneset-instance-id": "abcde"},
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                "name": "cs", "uid": "o", "controller": true}]}}));
        assert_eq!(pod_obs(&cs, 0, false).slot, "CloneSet/cs/abcde");
        let ds = pod(
            json!({"metadata": {"name": "ds-x", "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1",
                "kind": "DaemonSet", "name": "ds", "uid": "o", "controller": true}]},
            "spec": {"containers": [], "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}}),
        );
        assert_eq!(pod_obs(&ds, 0, false).slot, "DaemonSet/ds/n1");
        let plain = pod(json!({"metadata": {"name": "p"}}));
        assert_eq!(pod_obs(&plain, 0, false).slot, "/p");
    }

    #[test]
    fn a_relist_marks_the_pods_it_no_longer_lists_deleted() {
        let a = PodObs {
            uid: "a".into(),
            ..Default::default()
        };
        let b = PodObs {
            uid: "b".into(),
            ..Default::default()
        };
        let gone = vanished(&[a, b], &["a".to_string()]);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].uid, "b");
    }
}
