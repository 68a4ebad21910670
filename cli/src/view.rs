//! Version-agnostic view of a workload and its Pods.
//!
//! Everything is read from raw JSON (`DynamicObject`) rather than typed structs so that one code
//! path serves CloneSet v1beta1, CloneSet v1alpha1 and Deployment, and so a field the typed API
//! does not know yet never breaks the plugin.

use crate::error::CliError;
use crate::math::{self, IntOrPercent};
use crate::workload::Kind;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::appspub::{InPlaceUpdateState, UpdateSpec};
use kruise_api::keys::{self, k8s};
use kruise_api::{pod, revision, selector};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Where a workload keeps `paused` and `partition` in its spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `spec.updateStrategy.{partition,paused,maxUnavailable,...}` (CloneSet v1alpha1, SidecarSet).
    Flat,
    /// `spec.updateStrategy.rollingUpdate.{...}` (CloneSet v1beta1, StatefulSets, DaemonSets).
    Nested,
    /// apps/v1 Deployment: `spec.paused`, no partition.
    Deployment,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Condition {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RolloutView {
    pub kind: Kind,
    pub api_version: String,
    pub layout: Layout,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub generation: i64,
    pub observed_generation: i64,
    /// Desired Pods: spec.replicas, a DaemonSet's desiredNumberScheduled, a SidecarSet's matchedPods.
    pub replicas: i64,
    pub status_replicas: i64,
    pub ready_replicas: i64,
    pub available_replicas: i64,
    pub updated_replicas: i64,
    /// None for kinds that do not report it (Deployment, apps/v1 StatefulSet and DaemonSets).
    pub updated_ready_replicas: Option<i64>,
    pub partition: Option<IntOrPercent>,
    pub max_unavailable: Option<IntOrPercent>,
    pub max_surge: Option<IntOrPercent>,
    pub paused: bool,
    /// ReCreate, InPlaceIfPossible or InPlaceOnly (CloneSet, Advanced StatefulSet); the
    /// rollingUpdateType (Advanced DaemonSet); the strategy type (native kinds).
    pub pod_update_policy: String,
    /// OnDelete (or a SidecarSet's NotUpdate): running Pods are not updated by the controller.
    pub on_delete: bool,
    pub grace_period_seconds: i64,
    pub current_revision: String,
    pub update_revision: String,
    pub conditions: Vec<Condition>,
    /// A label selector string usable in list calls; `None` when the spec's selector has none
    /// (see [`selector_string`]). Read it with [`RolloutView::list_selector`].
    pub selector: Option<String>,
    /// (container name, image) from the pod template (a SidecarSet's own containers).
    pub images: Vec<(String, String)>,
    /// A SidecarSet's current hash (its `kruise.io/sidecarset-hash` annotation, else computed):
    /// what an upgraded Pod records for it. Empty for other kinds.
    pub sidecar_hash: String,
}

pub(crate) fn i(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

pub(crate) fn s(v: &Value, path: &[&str]) -> String {
    get(v, path)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

pub fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(*k))
}

/// Renders `spec.selector` as a list-call selector string, in Kubernetes' own form (upstream
/// `LabelSelectorAsSelector(...).String()`, via [`selector::to_selector_string`]). No selector
/// gives the empty string; a selector that does not parse, or names an operator Kubernetes does
/// not know, gives `None`: upstream has no selector for it, and dropping the requirement would
/// list Pods the workload does not select.
pub fn selector_string(sel: Option<&Value>) -> Option<String> {
    let Some(sel) = sel else {
        return Some(String::new());
    };
    match serde_json::from_value::<LabelSelector>(sel.clone()) {
        Ok(sel) => selector::to_selector_string(&sel),
        Err(e) => {
            tracing::debug!(error = %e, "unreadable spec.selector");
            None
        }
    }
}

/// The rolling-update knobs of a strategy in `layout`: the strategy itself when flat, its
/// `rollingUpdate` when nested.
pub(crate) fn knobs(strategy: &Value, layout: Layout) -> Value {
    match layout {
        Layout::Flat => strategy.clone(),
        Layout::Nested | Layout::Deployment => strategy
            .get("rollingUpdate")
            .cloned()
            .unwrap_or(Value::Null),
    }
}

/// An int-or-percent knob, absent when missing or unreadable.
pub(crate) fn int_or_percent(knobs: &Value, key: &str) -> Option<IntOrPercent> {
    knobs.get(key).and_then(IntOrPercent::from_json)
}

pub(crate) fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

impl RolloutView {
    /// Builds the view from a full object (`apiVersion`, `kind`, `metadata`, `spec`, `status`):
    /// the metadata, conditions, selector and images here, the rest by the kind's module.
    pub fn from_json(obj: &Value) -> Self {
        let api_version = s(obj, &["apiVersion"]);
        let kind = Kind::of_object(&api_version, &s(obj, &["kind"]));
        let spec = kind.spec();
        let status = obj.get("status").cloned().unwrap_or(Value::Null);
        let conditions = status
            .get("conditions")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| Condition {
                        type_: s(c, &["type"]),
                        status: s(c, &["status"]),
                        reason: s(c, &["reason"]),
                        message: s(c, &["message"]),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let images = obj
            .pointer(spec.containers_path)
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| (s(c, &["name"]), s(c, &["image"])))
                    .collect()
            })
            .unwrap_or_default();
        let status_selector = s(&status, &["labelSelector"]);
        let selector = if status_selector.is_empty() {
            selector_string(get(obj, &["spec", "selector"]))
        } else {
            Some(status_selector)
        };
        let mut view = RolloutView {
            kind,
            api_version,
            layout: Layout::Nested,
            namespace: s(obj, &["metadata", "namespace"]),
            name: s(obj, &["metadata", "name"]),
            uid: s(obj, &["metadata", "uid"]),
            generation: i(obj, &["metadata", "generation"]),
            observed_generation: i(&status, &["observedGeneration"]),
            replicas: 0,
            status_replicas: 0,
            ready_replicas: 0,
            available_replicas: 0,
            updated_replicas: 0,
            updated_ready_replicas: None,
            partition: None,
            max_unavailable: None,
            max_surge: None,
            paused: false,
            pod_update_policy: String::new(),
            on_delete: false,
            grace_period_seconds: 0,
            current_revision: String::new(),
            update_revision: String::new(),
            conditions,
            selector,
            images,
            sidecar_hash: String::new(),
        };
        (spec.read)(obj, &mut view);
        view
    }

    /// The counters every ReplicaSet-like workload reports under the same names.
    pub(crate) fn read_replica_counters(&mut self, obj: &Value) {
        let status = obj.get("status").cloned().unwrap_or(Value::Null);
        // The API server defaults replicas to 1.
        self.replicas = get(obj, &["spec", "replicas"])
            .and_then(Value::as_i64)
            .unwrap_or(1);
        self.status_replicas = i(&status, &["replicas"]);
        self.ready_replicas = i(&status, &["readyReplicas"]);
        self.available_replicas = i(&status, &["availableReplicas"]);
        self.updated_replicas = i(&status, &["updatedReplicas"]);
        self.current_revision = s(&status, &["currentRevision"]);
        self.update_revision = s(&status, &["updateRevision"]);
    }

    /// The selector to list the workload's Pods (and revisions) with, or an error a person can
    /// act on when the spec's selector cannot be expressed as one.
    pub fn list_selector(&self) -> Result<&str, CliError> {
        self.selector.as_deref().ok_or_else(|| {
            CliError::Failed(format!(
                "{} {:?}: spec.selector is not a label selector Kubernetes can list with (operators are In, NotIn, Exists, DoesNotExist), so its Pods cannot be listed",
                self.kind.type_name(),
                self.name
            ))
        })
    }

    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    pub fn expected_updated(&self) -> i64 {
        math::expected_updated(self.replicas, self.partition.as_ref())
    }

    pub fn max_unavailable_pods(&self) -> i64 {
        math::max_unavailable(
            self.max_unavailable.as_ref(),
            self.max_surge.as_ref(),
            self.replicas,
        )
    }

    /// A merge patch that sets the fields of the rolling-update knobs for this object's layout.
    pub fn strategy_patch(&self, fields: Value) -> Value {
        match self.layout {
            Layout::Flat => json!({"spec": {"updateStrategy": fields}}),
            Layout::Nested => {
                json!({"spec": {"updateStrategy": {"rollingUpdate": fields}}})
            }
            Layout::Deployment => json!({"spec": fields}),
        }
    }

    pub fn paused_patch(&self, paused: bool) -> Value {
        self.strategy_patch(json!({"paused": paused}))
    }
}

/// One container of a Pod as the live view and `set image` need it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContainerView {
    pub name: String,
    pub spec_image: String,
    pub status_image: String,
    pub ready: bool,
    pub restarts: i64,
}

impl ContainerView {
    /// Whether the runtime reports the image the spec asks for.
    pub fn runtime_has_spec_image(&self) -> bool {
        !self.status_image.is_empty()
            && normalize_image(&self.spec_image) == normalize_image(&self.status_image)
    }
}

/// A batch of containers in an in-place update.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InPlaceProgress {
    pub revision: String,
    pub update_timestamp: Option<jiff::Timestamp>,
    /// Batches already patched into the spec, in order.
    pub done_batches: Vec<Vec<String>>,
    /// Containers waiting for the current batch to become ready.
    pub next_batch: Vec<String>,
    /// Containers the current batch must have ready before the next one starts.
    pub waiting_on: Vec<String>,
    /// Seconds of grace configured before the spec gets patched (0 = none pending).
    pub grace_seconds: i64,
    /// Images not yet in the spec, by container: what the grace period or a later batch will
    /// patch in. Until then the runtime runs the old image, which is not the update's.
    pub pending_images: BTreeMap<String, String>,
}

impl InPlaceProgress {
    /// Seconds until the grace period ends, if one is pending.
    pub fn grace_left(&self, now: jiff::Timestamp) -> Option<i64> {
        if self.grace_seconds <= 0 {
            return None;
        }
        let start = self.update_timestamp?;
        let elapsed = now.duration_since(start).as_secs();
        Some((self.grace_seconds - elapsed).max(0))
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodView {
    pub name: String,
    pub node: String,
    pub phase: String,
    pub revision: String,
    pub lifecycle: String,
    pub ready: bool,
    /// None when the Pod has no InPlaceUpdateReady condition.
    pub inplace_ready: Option<bool>,
    pub restarts: i64,
    pub containers: Vec<ContainerView>,
    pub inplace: Option<InPlaceProgress>,
    pub terminating: bool,
    pub uid: String,
    /// The controlling owner as `Kind/name` (the workload a SidecarSet's Pod belongs to).
    pub owner: String,
    pub namespace: String,
    /// SidecarSet name → the hash of the sidecars the Pod was given or last upgraded to (the
    /// Pod annotation `kruise.io/sidecarset-hash`); empty when nothing was injected.
    pub sidecar_hashes: BTreeMap<String, String>,
}

/// The status of the pod's condition of `type_` as a bool, `None` when it is not reported.
fn pod_condition(p: &Pod, type_: &str) -> Option<bool> {
    pod::condition(p, type_).map(|c| c.status == k8s::CONDITION_TRUE)
}

fn parse_inplace(annotations: &BTreeMap<String, String>) -> Option<InPlaceProgress> {
    // Pods written by older controllers carry the un-prefixed keys; the api readers fall back
    // to them. A present but unreadable annotation still marks the Pod as mid-update.
    let present = InPlaceUpdateState::is_recorded(Some(annotations))
        || UpdateSpec::in_grace(Some(annotations));
    if !present {
        return None;
    }
    let state = InPlaceUpdateState::from_annotations(Some(annotations)).unwrap_or_else(|e| {
        tracing::debug!(error = %e, "unreadable in-place update state");
        None
    });
    let grace = UpdateSpec::from_grace_annotation(Some(annotations)).unwrap_or_default();
    // A later batch's images, then the grace spec's (the whole update, when one is pending).
    let mut pending_images: BTreeMap<String, String> = state
        .as_ref()
        .map(|s| s.next_container_images.clone())
        .unwrap_or_default();
    if let Some(g) = &grace {
        pending_images.extend(g.container_images.clone());
    }
    let mut next: Vec<String> = Vec::new();
    if let Some(st) = &state {
        let keys = st
            .next_container_images
            .keys()
            .chain(st.next_container_resources.keys())
            .chain(st.next_container_ref_metadata.keys());
        for k in keys {
            if !next.contains(k) {
                next.push(k.clone());
            }
        }
    }
    next.sort();
    Some(InPlaceProgress {
        revision: state
            .as_ref()
            .map(|s| s.revision.clone())
            .or_else(|| grace.as_ref().map(|g| g.revision.clone()))
            .unwrap_or_default(),
        update_timestamp: state.as_ref().map(|s| s.update_timestamp.0),
        done_batches: state
            .as_ref()
            .map(|s| {
                s.container_batches_record
                    .iter()
                    .map(|b| b.containers.clone())
                    .collect()
            })
            .unwrap_or_default(),
        next_batch: next,
        waiting_on: state
            .as_ref()
            .and_then(|s| s.pre_check_before_next.as_ref())
            .map(|p| p.containers_required_ready.clone())
            .unwrap_or_default(),
        grace_seconds: grace.map(|g| i64::from(g.grace_seconds)).unwrap_or(0),
        pending_images,
    })
}

/// The SidecarSet hashes a Pod records (upstream `GetPodSidecarSetRevision` for every set);
/// an unreadable annotation reads as none.
fn sidecar_hashes(annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let key = keys::SIDECARSET_HASH_ANNOTATION;
    let Some(value) = annotations.get(key) else {
        return BTreeMap::new();
    };
    match kruise_api::sidecarset::parse_hash_annotation(key, value) {
        Ok(m) => m
            .into_iter()
            .map(|(name, spec)| (name, spec.hash))
            .collect(),
        Err(e) => {
            tracing::debug!(error = %e, "unreadable sidecarset hash annotation");
            BTreeMap::new()
        }
    }
}

impl PodView {
    pub fn from_pod(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let labels = meta.labels.clone().unwrap_or_default();
        let annotations = meta.annotations.clone().unwrap_or_default();
        let status = pod.status.as_ref();
        let statuses = status
            .and_then(|s| s.container_statuses.clone())
            .unwrap_or_default();
        let containers: Vec<ContainerView> = pod
            .spec
            .as_ref()
            .map(|s| s.containers.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|c| {
                let st = statuses.iter().find(|s| s.name == c.name);
                ContainerView {
                    name: c.name.clone(),
                    spec_image: c.image.clone().unwrap_or_default(),
                    status_image: st.map(|s| s.image.clone()).unwrap_or_default(),
                    ready: st.map(|s| s.ready).unwrap_or(false),
                    restarts: st.map(|s| i64::from(s.restart_count)).unwrap_or(0),
                }
            })
            .collect();
        // Deployment pods carry only the short hash, in `pod-template-hash`.
        let revision = revision::pod_revision(Some(&labels))
            .or_else(|| {
                labels
                    .get(keys::POD_TEMPLATE_HASH_LABEL)
                    .map(String::as_str)
            })
            .unwrap_or_default()
            .to_owned();
        PodView {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            node: pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default(),
            phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
            revision,
            lifecycle: labels
                .get(keys::LIFECYCLE_STATE_LABEL)
                .cloned()
                .unwrap_or_default(),
            ready: pod::is_ready(pod),
            inplace_ready: pod_condition(pod, keys::INPLACE_UPDATE_READY),
            restarts: containers.iter().map(|c| c.restarts).sum(),
            containers,
            inplace: parse_inplace(&annotations),
            terminating: meta.deletion_timestamp.is_some(),
            owner: meta
                .owner_references
                .as_ref()
                .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)))
                .map(|r| format!("{}/{}", r.kind, r.name))
                .unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            sidecar_hashes: sidecar_hashes(&annotations),
        }
    }

    /// Whether the pod's revision is `update_revision` (upstream `EqualToRevisionHash`: equal,
    /// or equal short hashes). CloneSet pods carry the full ControllerRevision name, Deployment
    /// pods only the hash, so both spellings match. No update revision known: nothing is updated.
    pub fn is_updated(&self, update_revision: &str) -> bool {
        !update_revision.is_empty()
            && revision::equal_to_revision_hash(Some(&self.revision), update_revision)
    }

    /// True while an in-place update of this pod has not finished: grace pending, later batches
    /// pending, InPlaceUpdateReady not yet True, or the runtime still reporting an old image.
    pub fn in_place_in_progress(&self) -> bool {
        let Some(ip) = &self.inplace else {
            return false;
        };
        if ip.grace_seconds > 0 || !ip.next_batch.is_empty() {
            return true;
        }
        if self.inplace_ready == Some(false) {
            return true;
        }
        ip.revision == self.revision
            && !self.revision.is_empty()
            && self
                .containers
                .iter()
                .any(|c| !c.status_image.is_empty() && !c.runtime_has_spec_image())
    }
}

/// Canonical form of an image reference so `nginx:1` and `docker.io/library/nginx:1` compare equal.
pub fn normalize_image(image: &str) -> String {
    let (name, suffix) = match image.find('@') {
        Some(at) => (&image[..at], &image[at..]),
        None => {
            let last_slash = image.rfind('/').map(|p| p + 1).unwrap_or(0);
            match image[last_slash..].rfind(':') {
                Some(c) => (&image[..last_slash + c], &image[last_slash + c..]),
                None => (image, ":latest"),
            }
        }
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_registry =
        name.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let full = if has_registry {
        name.to_string()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    };
    format!("{full}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_normalisation() {
        assert_eq!(normalize_image("nginx"), "docker.io/library/nginx:latest");
        assert_eq!(
            normalize_image("nginx:1.25"),
            "docker.io/library/nginx:1.25"
        );
        assert_eq!(
            normalize_image("bitnami/nginx:1"),
            "docker.io/bitnami/nginx:1"
        );
        assert_eq!(
            normalize_image("127.0.0.1:5000/busybox"),
            "127.0.0.1:5000/busybox:latest"
        );
        assert_eq!(normalize_image("localhost/x:2"), "localhost/x:2");
        assert_eq!(
            normalize_image("ghcr.io/a/b@sha256:ab"),
            "ghcr.io/a/b@sha256:ab"
        );
    }

    #[test]
    fn v1alpha1_and_v1beta1_read_the_same() {
        let alpha = json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "ns", "generation": 3},
            "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
                     "updateStrategy": {"type": "InPlaceIfPossible", "partition": "30%", "paused": true, "maxUnavailable": 2}},
            "status": {"observedGeneration": 3, "updatedReplicas": 7, "updatedReadyReplicas": 6,
                       "updateRevision": "web-2", "currentRevision": "web-1"}
        });
        let beta = json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "ns", "generation": 3},
            "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible", "partition": "30%", "paused": true, "maxUnavailable": 2}}},
            "status": {"observedGeneration": 3, "updatedReplicas": 7, "updatedReadyReplicas": 6,
                       "updateRevision": "web-2", "currentRevision": "web-1"}
        });
        let a = RolloutView::from_json(&alpha);
        let b = RolloutView::from_json(&beta);
        assert_eq!(a.layout, Layout::Flat);
        assert_eq!(b.layout, Layout::Nested);
        for v in [&a, &b] {
            assert_eq!(v.pod_update_policy, "InPlaceIfPossible");
            assert!(v.paused);
            assert_eq!(v.expected_updated(), 7);
            assert_eq!(v.max_unavailable_pods(), 2);
            assert_eq!(v.list_selector().ok(), Some("app=web"));
        }
        assert_eq!(
            a.paused_patch(false),
            json!({"spec": {"updateStrategy": {"paused": false}}})
        );
        assert_eq!(
            b.paused_patch(false),
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"paused": false}}}})
        );
    }

    /// Kubernetes' string form (upstream `LabelSelectorAsSelector(...).String()`): every
    /// requirement sorted by key, values sorted; an unknown operator leaves no selector rather
    /// than a broader one (the copy this replaced dropped the requirement).
    #[test]
    fn selector_string_table() {
        let cases: Vec<(Value, Option<&str>)> = vec![
            (Value::Null, Some("")),
            (json!({}), Some("")),
            (
                json!({"matchLabels": {"tier": "1", "app": "web"}}),
                Some("app=web,tier=1"),
            ),
            (
                json!({"matchLabels": {"zone": "a"}, "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["2", "1"]},
                    {"key": "env", "operator": "NotIn", "values": ["prod"]},
                    {"key": "app", "operator": "Exists"},
                    {"key": "old", "operator": "DoesNotExist"},
                ]}),
                Some("app,env notin (prod),!old,tier in (1,2),zone=a"),
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [
                    {"key": "x", "operator": "Bogus", "values": ["1"]},
                ]}),
                None,
            ),
            (json!({"matchLabels": {"app": 1}}), None),
        ];
        for (sel, want) in cases {
            let got = selector_string((!sel.is_null()).then_some(&sel));
            assert_eq!(got.as_deref(), want, "{sel}");
        }
    }

    #[test]
    fn list_selector_prefers_status_and_refuses_unknown_operators() {
        let obj = |status: Value| {
            json!({
                "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
                "metadata": {"name": "web", "namespace": "ns"},
                "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Is"}]}},
                "status": status,
            })
        };
        let written = RolloutView::from_json(&obj(json!({"labelSelector": "app=web"})));
        assert_eq!(written.list_selector().ok(), Some("app=web"));
        let unwritten = RolloutView::from_json(&obj(json!({})));
        assert_eq!(unwritten.selector, None);
        let err = unwritten.list_selector().err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("cloneset \"web\"")),
            "{err:?}"
        );
    }

    /// Upstream `EqualToRevisionHash`: equal names, or equal short hashes.
    #[test]
    fn is_updated_table() {
        let cases = [
            ("web-2", "web-2", true),
            ("2", "web-2", true),
            ("web-2", "2", true),
            ("other-2", "web-2", true),
            ("web-1", "web-2", false),
            ("", "web-2", false),
            ("web-2", "", false),
            ("", "", false),
        ];
        for (pod_rev, update, want) in cases {
            let p = PodView {
                revision: pod_rev.into(),
                ..Default::default()
            };
            assert_eq!(p.is_updated(update), want, "{pod_rev:?} vs {update:?}");
        }
    }

    #[test]
    fn pod_revision_falls_back_to_the_template_hash() {
        let pod = |labels: Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels}}))
                .expect("pod")
        };
        let cases = [
            (
                json!({"controller-revision-hash": "web-2", "pod-template-hash": "2"}),
                "web-2",
            ),
            (json!({"pod-template-hash": "7d4f8b9c6"}), "7d4f8b9c6"),
            (json!({}), ""),
        ];
        for (labels, want) in cases {
            assert_eq!(
                PodView::from_pod(&pod(labels.clone())).revision,
                want,
                "{labels}"
            );
        }
    }

    /// Any of the four state and grace keys marks the pod as mid-update, readable or not.
    #[test]
    fn in_place_annotations_old_and_new_keys() {
        let state = json!({"revision": "web-2", "updateTimestamp": "2026-01-01T00:00:00Z",
            "lastContainerStatuses": null})
        .to_string();
        let cases = [
            (json!({}), None),
            (json!({"other": "x"}), None),
            (
                json!({"apps.kruise.io/inplace-update-state": state}),
                Some("web-2"),
            ),
            (json!({"inplace-update-state": state}), Some("web-2")),
            (
                json!({"apps.kruise.io/inplace-update-state": "{"}),
                Some(""),
            ),
            (
                json!({"apps.kruise.io/inplace-update-grace": "{"}),
                Some(""),
            ),
            (json!({"inplace-update-grace": "{"}), Some("")),
        ];
        for (annotations, want) in cases {
            let a: BTreeMap<String, String> =
                serde_json::from_value(annotations.clone()).expect("annotations");
            assert_eq!(
                parse_inplace(&a).map(|p| p.revision).as_deref(),
                want,
                "{annotations}"
            );
        }
    }

    #[test]
    fn grace_left_counts_down() {
        let p = InPlaceProgress {
            update_timestamp: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            grace_seconds: 30,
            ..Default::default()
        };
        assert_eq!(
            p.grace_left("2026-01-01T00:00:12Z".parse().unwrap()),
            Some(18)
        );
        assert_eq!(
            p.grace_left("2026-01-01T00:01:00Z".parse().unwrap()),
            Some(0)
        );
    }

    fn pod_json(annotations: Value, inplace_ready: &str, status_image: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-abcde", "uid": "p1",
                "labels": {"controller-revision-hash": "web-2", "lifecycle.apps.kruise.io/state": "Updating"},
                "annotations": annotations},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "nginx:1.27"}, {"name": "log", "image": "busybox:1"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}, {"type": "InPlaceUpdateReady", "status": inplace_ready}],
                "containerStatuses": [
                    {"name": "app", "image": status_image, "imageID": "x", "ready": true, "restartCount": 1},
                    {"name": "log", "image": "docker.io/library/busybox:1", "imageID": "y", "ready": true, "restartCount": 0}]}
        }))
        .unwrap()
    }

    #[test]
    fn pods_mid_in_place_update_are_detected() {
        let state = json!({"revision": "web-2", "updateTimestamp": "2026-01-01T00:00:00Z", "lastContainerStatuses": {"app": {"imageID": "old"}},
            "containerBatchesRecord": [{"timestamp": "2026-01-01T00:00:00Z", "containers": ["app"]}]}).to_string();
        let with_next = json!({"revision": "web-2", "updateTimestamp": "2026-01-01T00:00:00Z", "lastContainerStatuses": null,
            "nextContainerImages": {"log": "busybox:2"}, "preCheckBeforeNext": {"containersRequiredReady": ["app"]},
            "containerBatchesRecord": [{"timestamp": "2026-01-01T00:00:00Z", "containers": ["app"]}]}).to_string();
        let grace = json!({"revision": "web-2", "containerImages": {"app": "nginx:1.27"}, "graceSeconds": 30}).to_string();

        // Done: runtime reports the new image and InPlaceUpdateReady is True.
        let done = PodView::from_pod(&pod_json(
            json!({"apps.kruise.io/inplace-update-state": state}),
            "True",
            "docker.io/library/nginx:1.27",
        ));
        assert_eq!(
            done.inplace.as_ref().map(|i| i.done_batches.clone()),
            Some(vec![vec!["app".to_string()]])
        );
        assert!(!done.in_place_in_progress());
        assert!(done.is_updated("web-2"));
        assert_eq!(done.lifecycle, "Updating");
        assert_eq!(done.restarts, 1);

        // Runtime still on the old image.
        let old = PodView::from_pod(&pod_json(
            json!({"apps.kruise.io/inplace-update-state": state}),
            "True",
            "docker.io/library/nginx:1.25",
        ));
        assert!(old.in_place_in_progress());
        assert!(!old.containers[0].runtime_has_spec_image());

        // A later batch is pending.
        let next = PodView::from_pod(&pod_json(
            json!({"apps.kruise.io/inplace-update-state": with_next}),
            "True",
            "docker.io/library/nginx:1.27",
        ));
        let ip = next.inplace.clone().unwrap();
        assert_eq!(
            ip.pending_images,
            BTreeMap::from([("log".to_string(), "busybox:2".to_string())])
        );
        assert_eq!(
            (ip.next_batch, ip.waiting_on),
            (vec!["log".to_string()], vec!["app".to_string()])
        );
        assert!(next.in_place_in_progress());

        // Grace period pending (legacy un-prefixed key), and InPlaceUpdateReady False.
        let g = PodView::from_pod(&pod_json(
            json!({"inplace-update-grace": grace}),
            "True",
            "docker.io/library/nginx:1.27",
        ));
        assert_eq!(g.inplace.as_ref().map(|i| i.grace_seconds), Some(30));
        assert_eq!(
            g.inplace.as_ref().map(|i| i.pending_images.clone()),
            Some(BTreeMap::from([(
                "app".to_string(),
                "nginx:1.27".to_string()
            )]))
        );
        assert!(g.in_place_in_progress());
        let nr = PodView::from_pod(&pod_json(
            json!({"apps.kruise.io/inplace-update-state": state}),
            "False",
            "docker.io/library/nginx:1.27",
        ));
        assert!(nr.in_place_in_progress());

        // No annotations: never counted as in progress.
        let plain = PodView::from_pod(&pod_json(json!({}), "True", "docker.io/library/nginx:1.25"));
        assert!(plain.inplace.is_none() && !plain.in_place_in_progress());
    }
}
