//! One Pod watch for the whole manager. A reflector keeps the store every controller reads from,
//! and each change is handed to every subscriber's mapping ([`PodCache::targets`]), which turns
//! it into the workloads that subscriber reconciles. The store is updated before the event is
//! handed on, so a reconcile triggered by an event always sees that event in the store.
//!
//! Memory: the store is the only long-lived copy of each Pod. Before a Pod is stored,
//! [`slim`] drops the fields no controller reads ([`DROPPED_FIELDS`]), and an event carries the
//! store's own `Arc` rather than a second copy. Subscribers queue what their mapping returns
//! (object references, bounded by [`fanout::CAPACITY`]), not Pods.

mod fanout;
mod read;

pub use read::{PodRead, PodWritten};

use std::sync::Arc;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, watcher};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use fanout::Fanout;

/// What [`slim`] drops from every Pod before the cache stores it, as JSON paths (`[]`: every
/// element of a list). No reader in the manager uses any of them: each one was checked against
/// every controller (`grep` of the field's Rust name under controller/src, api/src and
/// runtime/src finds no read). A controller that needs one of them must take it out of this
/// list and out of [`slim`] (the test `slim_drops_exactly_the_listed_fields` checks that the
/// two agree).
///
/// Kept on purpose although large: every container field (the in-place engine diffs
/// containers and writes resources and images into them), volumes (PVC ownership, StatefulSet
/// identity), affinity and tolerations (which node a DaemonSet Pod is meant for), conditions
/// and container statuses (readiness, in-place completion).
///
/// Writing back is safe: the engine's writes are JSON patches of the difference between the
/// cached Pod and its changed copy, and a dropped field is absent from both, so no operation
/// ever touches it on the server (the test `patches_from_a_slim_pod_keep_the_dropped_fields`).
pub const DROPPED_FIELDS: &[&str] = &[
    "metadata.managedFields",
    "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]",
    "spec.dnsConfig",
    "spec.hostAliases",
    "spec.overhead",
    "spec.securityContext",
    "spec.topologySpreadConstraints",
    "status.hostIPs",
    "status.podIPs",
    "status.nominatedNodeName",
    "status.resourceClaimStatuses",
    "status.containerStatuses[].volumeMounts",
    "status.containerStatuses[].user",
    "status.containerStatuses[].allocatedResourcesStatus",
    "status.initContainerStatuses[].volumeMounts",
    "status.initContainerStatuses[].user",
    "status.initContainerStatuses[].allocatedResourcesStatus",
];

/// Drops [`DROPPED_FIELDS`] from `pod`, keeping every other field as it came. An annotation
/// map that becomes empty stays an (empty) map: turning it into `None` would make a later
/// diff add the whole map and so overwrite the server's annotations.
pub fn slim(pod: &mut Pod) {
    pod.metadata.managed_fields = None;
    if let Some(a) = pod.metadata.annotations.as_mut() {
        a.remove(keys::k8s::LAST_APPLIED_ANNOTATION);
    }
    if let Some(spec) = pod.spec.as_mut() {
        spec.dns_config = None;
        spec.host_aliases = None;
        spec.overhead = None;
        spec.security_context = None;
        spec.topology_spread_constraints = None;
    }
    if let Some(status) = pod.status.as_mut() {
        status.host_ips = None;
        status.pod_ips = None;
        status.nominated_node_name = None;
        status.resource_claim_statuses = None;
        let statuses = status
            .container_statuses
            .iter_mut()
            .chain(status.init_container_statuses.iter_mut())
            .flatten();
        for c in statuses {
            c.volume_mounts = None;
            c.user = None;
            c.allocated_resources_status = None;
        }
    }
}

/// Test knob, deliberately not a flag: when this environment variable is `1`, every subscriber
/// behaves as if it had lagged on every event (it receives `Resync` instead of each event), the
/// worst case of a slow subscriber. The e2e suite (`e2e/tests/e2e/scale.rs`) starts a manager with
/// it to prove that controllers converge from the store alone.
pub const ENV_DEBUG_POD_EVENT_LAG: &str = "KRUISE_DEBUG_POD_EVENT_LAG";

#[derive(Clone, Debug)]
pub enum PodEvent {
    Applied(Arc<Pod>),
    Deleted(Arc<Pod>),
    /// The watch relisted (start or reconnect) or a subscriber lagged: reconcile everything.
    Resync,
}

/// The shared Pod cache.
#[derive(Clone)]
pub struct PodCache {
    store: Store<Pod>,
    fanout: Fanout<PodEvent>,
    synced: watch::Receiver<bool>,
    /// See [`ENV_DEBUG_POD_EVENT_LAG`].
    always_lag: bool,
}

/// The watch's event with each Pod as the store keeps it.
fn read_event(e: watcher::Event<PodRead>) -> watcher::Event<Pod> {
    use watcher::Event;
    match e {
        Event::Apply(PodRead(p)) => Event::Apply(p),
        Event::Delete(PodRead(p)) => Event::Delete(p),
        Event::Init => Event::Init,
        Event::InitApply(PodRead(p)) => Event::InitApply(p),
        Event::InitDone => Event::InitDone,
    }
}

impl PodCache {
    /// Starts the watch on `namespace` (all namespaces when `None`); it stops when `shutdown` is
    /// cancelled.
    pub fn start(client: Client, namespace: Option<&str>, shutdown: CancellationToken) -> Self {
        let (store, writer) = reflector::store::<Pod>();
        let fanout = Fanout::default();
        let (synced_tx, synced) = watch::channel(false);
        let api: Api<PodRead> = match namespace {
            Some(ns) => Api::namespaced(client, ns),
            None => Api::all(client),
        };
        let sender = fanout.clone();
        let store_for_events = store.clone();
        tokio::spawn(async move {
            // managedFields are often the largest part of a Pod and no controller reads them:
            // the decode skips them ([`PodRead`]), and the rest of DROPPED_FIELDS is dropped
            // before the store, which keeps it small.
            let stream = watcher(api, watcher::Config::default())
                .default_backoff()
                .map_ok(read_event)
                .modify(slim)
                .reflect(writer);
            let stored = store_for_events.clone();
            // The event shares the store's allocation: the watch's own copy is dropped here
            // instead of living on in a subscriber's mapping.
            let shared = move |p: Pod| {
                stored
                    .get(&ObjectRef::from_obj(&p))
                    .unwrap_or_else(|| Arc::new(p))
            };
            let mut stream = std::pin::pin!(stream);
            loop {
                let item = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    item = stream.next() => item,
                };
                let Some(item) = item else { break };
                match item {
                    Ok(watcher::Event::Apply(p)) => {
                        sender.send(&PodEvent::Applied(shared(p)));
                    }
                    // A (re)list: the store swaps the listed Pods in at InitDone, which sends
                    // Resync. Sending each listed Pod as well would map a second copy of every
                    // Pod (the store does not share them yet) for events the Resync covers.
                    Ok(watcher::Event::InitApply(_)) => {}
                    Ok(watcher::Event::Delete(p)) => {
                        sender.send(&PodEvent::Deleted(Arc::new(p)));
                    }
                    Ok(watcher::Event::InitDone) => {
                        let _ = synced_tx.send(true);
                        sender.send(&PodEvent::Resync);
                    }
                    Ok(watcher::Event::Init) => {}
                    Err(e) => tracing::warn!(error = %e, "pod watch failed, retrying"),
                }
            }
            tracing::info!("pod cache stopped");
        });
        let always_lag = std::env::var(ENV_DEBUG_POD_EVENT_LAG).is_ok_and(|v| v == "1");
        if always_lag {
            tracing::warn!(
                env = ENV_DEBUG_POD_EVENT_LAG,
                "test mode: every pod event reaches subscribers as a lag (Resync)"
            );
        }
        Self {
            store,
            fanout,
            synced,
            always_lag,
        }
    }

    /// What the store shows of `pod` now: there, terminating or gone.
    pub fn cached(&self, pod: &Pod) -> crate::expectations::Cached {
        let now = self.store().get(&ObjectRef::from_obj(pod));
        crate::expectations::Cached::of(now.as_deref().map(|p| &p.metadata))
    }

    /// Observes the scale expectations of workload `key` (`namespace/name`) that the store
    /// already shows done (see [`ScaleExpectations::observe_cache`]); how many it observed.
    pub fn observe(&self, exp: &crate::expectations::ScaleExpectations, key: &str) -> usize {
        let Some((ns, _)) = key.split_once('/') else {
            return 0;
        };
        exp.observe_cache(key, |name| {
            let now = self.store.get(&ObjectRef::new(name).within(ns));
            crate::expectations::Cached::of(now.as_deref().map(|p| &p.metadata))
        })
    }

    pub fn store(&self) -> &Store<Pod> {
        &self.store
    }

    /// Waits until the first list has been loaded.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.clone();
        let _ = rx.wait_for(|s| *s).await;
    }

    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// What each change from now on maps to, as a stream: `map` runs in the cache's task on
    /// every event, and the subscriber is woken only for what it returns. A subscriber that
    /// falls behind receives `map(&PodEvent::Resync)` in place of what it missed. `map` must be
    /// cheap and must not block: every Pod event waits for every subscriber's mapping.
    pub fn targets<T, F>(&self, map: F) -> impl Stream<Item = T> + Send + 'static
    where
        T: Send + 'static,
        F: Fn(&PodEvent) -> Vec<T> + Send + Sync + 'static,
    {
        let always_lag = self.always_lag;
        self.fanout
            .subscribe(PodEvent::Resync, move |ev: &PodEvent| {
                if always_lag {
                    map(&PodEvent::Resync)
                } else {
                    map(ev)
                }
            })
    }

    /// `pick` of every cached Pod once, then of each Pod that changes (of every Pod again after
    /// a lag), for controllers that look at Pods one at a time. Deleted Pods are not sent.
    pub fn live_targets<T, I, F>(&self, pick: F) -> impl Stream<Item = T> + Send + 'static
    where
        T: Send + 'static,
        I: IntoIterator<Item = T>,
        F: Fn(&Arc<Pod>) -> I + Send + Sync + 'static,
    {
        let pick = Arc::new(pick);
        let (store, each) = (self.store.clone(), pick.clone());
        // Subscribed before the store is read, so no change falls between the two.
        let changes = self.targets(move |ev| match ev {
            PodEvent::Applied(p) => each(p).into_iter().collect(),
            PodEvent::Deleted(_) => Vec::new(),
            PodEvent::Resync => store.state().iter().flat_map(|p| each(p)).collect(),
        });
        let initial: Vec<T> = self.store.state().iter().flat_map(|p| pick(p)).collect();
        futures::stream::iter(initial).chain(changes)
    }

    /// Every pod in `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Pod>> {
        self.store
            .state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
            .collect()
    }

    /// Pods in `namespace` whose controller owner has `owner_uid`.
    pub fn owned_by(&self, namespace: &str, owner_uid: &str) -> Vec<Arc<Pod>> {
        self.store
            .state()
            .into_iter()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && controller_uid(p) == Some(owner_uid)
            })
            .collect()
    }
}

/// UID of the controller owner reference, if any.
pub fn controller_uid(pod: &Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A Pod as a 1.34 API server returns it, with every field [`DROPPED_FIELDS`] names and the
    /// ones next to them that must stay.
    fn full_pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-0",
                "namespace": "default",
                "uid": "u-1",
                "resourceVersion": "42",
                "labels": {"app": "web", "controller-revision-hash": "web-1"},
                "annotations": {
                    "apps.kruise.io/inplace-update-state": "{\"revision\":\"web-1\"}",
                    "kubectl.kubernetes.io/last-applied-configuration": "{\"big\":true}"
                },
                "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                    "name": "web", "uid": "cs-1", "controller": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                    "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {
                "nodeName": "node-1",
                "hostname": "web-0",
                "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                "containers": [{
                    "name": "app", "image": "app:v1",
                    "env": [{"name": "A", "value": "1"}],
                    "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "500m"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]
                }],
                "initContainers": [{"name": "init", "image": "init:v1"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name",
                        "operator": "In", "values": ["node-1"]}]}]}}},
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                    "effect": "NoExecute", "tolerationSeconds": 300}],
                "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]},
                "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db"]}],
                "overhead": {"cpu": "10m"},
                "securityContext": {"runAsUser": 1000},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "ScheduleAnyway"}]
            },
            "status": {
                "phase": "Running",
                "hostIP": "192.168.0.2",
                "hostIPs": [{"ip": "192.168.0.2"}],
                "podIP": "10.88.0.7",
                "podIPs": [{"ip": "10.88.0.7"}],
                "nominatedNodeName": "node-2",
                "resourceClaimStatuses": [{"name": "gpu"}],
                "startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{
                    "name": "app", "image": "app:v1", "imageID": "sha256:aaa",
                    "containerID": "containerd://c1", "ready": true, "restartCount": 2,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}},
                    "resources": {"requests": {"cpu": "500m"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "user": {"linux": {"uid": 0, "gid": 0}},
                    "allocatedResourcesStatus": [{"name": "gpu", "resources": []}]
                }],
                "initContainerStatuses": [{
                    "name": "init", "image": "init:v1", "imageID": "sha256:bbb",
                    "ready": true, "restartCount": 0,
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "user": {"linux": {"uid": 0, "gid": 0}},
                    "allocatedResourcesStatus": [{"name": "gpu", "resources": []}]
                }]
            }
        })
    }

    fn slimmed(v: &Value) -> Pod {
        let mut pod: Pod = serde_json::from_value(v.clone()).expect("pod");
        slim(&mut pod);
        pod
    }

    /// `/status/containerStatuses/0/user` as `status.containerStatuses[].user`, the notation
    /// of [`DROPPED_FIELDS`].
    fn dotted(pointer: &str) -> String {
        let parts: Vec<String> = pointer
            .trim_start_matches('/')
            .split('/')
            .map(|p| p.replace("~1", "/").replace("~0", "~"))
            .collect();
        let mut out = String::new();
        for (i, p) in parts.iter().enumerate() {
            if p.parse::<usize>().is_ok() {
                out.push_str("[]");
            } else if i > 0 && parts[i - 1] == "annotations" {
                out.push_str(&format!("[{p}]"));
            } else {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(p);
            }
        }
        out
    }

    #[test]
    fn slim_drops_exactly_the_listed_fields() {
        let full = full_pod();
        let slim = serde_json::to_value(slimmed(&full)).expect("json");
        let ops = json_patch::diff(&full, &slim).0;
        let mut removed = Vec::new();
        for op in &ops {
            match op {
                json_patch::PatchOperation::Remove(r) => removed.push(dotted(&r.path.to_string())),
                other => panic!("slim changed a field instead of dropping it: {other:?}"),
            }
        }
        removed.sort();
        removed.dedup();
        let mut listed: Vec<String> = DROPPED_FIELDS.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(removed, listed);
    }

    #[test]
    fn slim_keeps_what_the_controllers_read() {
        let pod = slimmed(&full_pod());
        let meta = &pod.metadata;
        assert_eq!(meta.uid.as_deref(), Some("u-1"));
        assert_eq!(meta.resource_version.as_deref(), Some("42"));
        assert_eq!(controller_uid(&pod), Some("cs-1"));
        let ann = meta.annotations.as_ref().expect("annotations");
        assert!(ann.contains_key("apps.kruise.io/inplace-update-state"));
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(spec.containers[0].image.as_deref(), Some("app:v1"));
        assert!(spec.containers[0].resources.is_some());
        assert!(spec.containers[0].env.is_some());
        assert!(spec.volumes.is_some() && spec.affinity.is_some() && spec.tolerations.is_some());
        assert_eq!(spec.readiness_gates.as_ref().map(Vec::len), Some(1));
        let status = pod.status.as_ref().expect("status");
        let c = &status.container_statuses.as_ref().expect("statuses")[0];
        assert_eq!(c.container_id.as_deref(), Some("containerd://c1"));
        assert_eq!(c.image_id, "sha256:aaa");
        assert_eq!(c.restart_count, 2);
        assert!(c.state.is_some() && c.resources.is_some());
        assert_eq!(status.pod_ip.as_deref(), Some("10.88.0.7"));
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
    }

    /// What the in-place engine does: a JSON patch of the difference between the cached Pod
    /// and its changed copy, applied by the server to the whole Pod.
    #[test]
    fn patches_from_a_slim_pod_keep_the_dropped_fields() {
        let full = full_pod();
        let before = slimmed(&full);
        let mut after = before.clone();
        after
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("apps.kruise.io/inplace-update-grace".into(), "x".into());
        let spec = after.spec.as_mut().expect("spec");
        spec.containers[0].image = Some("app:v2".into());
        let status = after.status.as_mut().expect("status");
        status.conditions.get_or_insert_default().push(
            serde_json::from_value(json!({"type": "InPlaceUpdateReady", "status": "False"}))
                .expect("condition"),
        );
        let patch = json_patch::diff(
            &serde_json::to_value(&before).expect("json"),
            &serde_json::to_value(&after).expect("json"),
        );
        let mut server = full.clone();
        json_patch::patch(&mut server, &patch).expect("patch applies");
        assert_eq!(server["spec"]["containers"][0]["image"], "app:v2");
        assert_eq!(
            server["status"]["conditions"][1]["type"],
            "InPlaceUpdateReady"
        );
        assert_eq!(
            server["metadata"]["annotations"]["apps.kruise.io/inplace-update-grace"],
            "x"
        );
        // Everything slim dropped is still on the server, unchanged.
        for ptr in [
            "/metadata/managedFields",
            "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration",
            "/spec/securityContext",
            "/spec/topologySpreadConstraints",
            "/status/podIPs",
            "/status/containerStatuses/0/volumeMounts",
            "/status/initContainerStatuses/0/user",
        ] {
            assert_eq!(server.pointer(ptr), full.pointer(ptr), "{ptr}");
            assert!(server.pointer(ptr).is_some(), "{ptr} lost");
        }
    }

    /// A Pod whose only annotation is the dropped one keeps an empty map, so that adding an
    /// annotation later patches one key instead of replacing the server's whole map.
    #[test]
    fn an_emptied_annotation_map_stays_a_map() {
        let mut full = full_pod();
        full["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"});
        let before = slimmed(&full);
        assert_eq!(
            before.metadata.annotations.as_ref().map(|a| a.len()),
            Some(0)
        );
        let mut after = before.clone();
        after
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("k".into(), "v".into());
        let patch = json_patch::diff(
            &serde_json::to_value(&before).expect("json"),
            &serde_json::to_value(&after).expect("json"),
        );
        let mut server = full.clone();
        json_patch::patch(&mut server, &patch).expect("patch applies");
        assert_eq!(server["metadata"]["annotations"]["k"], "v");
        assert_eq!(
            server["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{}"
        );
    }
}
