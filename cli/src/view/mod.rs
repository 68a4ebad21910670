//! Version-agnostic view of a workload and its Pods.
//!
//! Everything is read from raw JSON (`DynamicObject`) rather than typed structs so that one code
//! path serves CloneSet v1beta1, CloneSet v1alpha1 and Deployment, and so a field the typed API
//! does not know yet never breaks the plugin.
//!
//! The kinds that read into the view live below it (`workload`), so `RolloutView::from_json` can
//! hand an object to its kind; `verdict` holds what a rollout's state comes to, which the kinds'
//! hooks and the status module's `decide` both speak.

pub mod describe;
pub mod events;
pub mod migrate;
pub mod verdict;
pub mod workload;

use crate::error::CliError;
use crate::math::{self, IntOrPercent};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::apps::v1alpha1::MatchedWorkloadSpread;
use kruise_api::appspub::{InPlaceUpdateState, UpdateSpec};
use kruise_api::keys::{self, k8s};
use kruise_api::{pod, revision, selector};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use workload::Kind;
pub use workload::asts::VolumeClaims;

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
    /// An Advanced DaemonSet's `scaleStrategy.partitionedScaling`: the partition also holds
    /// back the nodes' Pods (only desired - partition exist).
    pub partitioned_scaling: bool,
    /// An Advanced StatefulSet's `status.volumeClaims` (claims resized to their templates).
    pub volume_claims: Vec<VolumeClaims>,
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
            partitioned_scaling: false,
            volume_claims: Vec::new(),
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
    /// Why the container is waiting (`ImagePullBackOff`, `CrashLoopBackOff`, …) and the
    /// kubelet's message, when it is.
    pub waiting: Option<(String, String)>,
    /// The spec's requests and limits (`requests cpu=75m,memory=150Mi limits cpu=300m`), empty
    /// when it has none: what a SidecarSet's resourcesPolicy computed for a sidecar.
    pub resources: String,
}

/// [`ContainerView::resources`] of a container spec.
fn resources_text(r: Option<&k8s_openapi::api::core::v1::ResourceRequirements>) -> String {
    let r = r.cloned().unwrap_or_default();
    [("requests", r.requests), ("limits", r.limits)]
        .into_iter()
        .filter_map(|(name, l)| {
            let items: Vec<String> = l?.iter().map(|(k, v)| format!("{k}={}", v.0)).collect();
            (!items.is_empty()).then(|| format!("{name} {}", items.join(",")))
        })
        .collect::<Vec<_>>()
        .join(" ")
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
    /// The PodUnavailableBudget the Pod is charged to (`kruise.io/related-pub`), if any.
    pub budget: Option<String>,
    /// The Pod's labels (which PodProbeMarkers select it, and their marker labels).
    pub labels: BTreeMap<String, String>,
    /// The Pod's conditions by type (a PodProbeMarker's probe records its state in one).
    pub conditions: BTreeMap<String, PodConditionView>,
    /// The WorkloadSpread and subset the Pod was placed in (its annotation
    /// `apps.kruise.io/matched-workloadspread`), if any.
    pub spread: Option<MatchedWorkloadSpread>,
}

/// One Pod condition: its status and when it last changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodConditionView {
    pub status: String,
    pub since: Option<jiff::Timestamp>,
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
                    waiting: st
                        .and_then(|s| s.state.as_ref())
                        .and_then(|s| s.waiting.as_ref())
                        .and_then(|w| {
                            let reason = w.reason.clone()?;
                            Some((reason, w.message.clone().unwrap_or_default()))
                        }),
                    resources: resources_text(c.resources.as_ref()),
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
            budget: kruise_api::policy::v1alpha1::pubcontrol::related_budget_name(pod)
                .map(str::to_owned),
            spread: MatchedWorkloadSpread::of(Some(&annotations)),
            conditions: status
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .map(|c| {
                    let since = c.last_transition_time.as_ref().map(|t| t.0);
                    (
                        c.type_.clone(),
                        PodConditionView {
                            status: c.status.clone(),
                            since,
                        },
                    )
                })
                .collect(),
            labels,
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
    kruise_api::image::ImageReference::split(image).to_string()
}

#[cfg(test)]
mod tests;
