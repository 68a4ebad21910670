//! The pure transitions of an in-place update: the pod to write for Update, for the end of a
//! grace period and for each later batch, and the InPlaceUpdateReady condition. Nothing here
//! talks to the API or reads a clock; `now` is always given.

use super::batches::{self, PreCheckPending};
use super::completion::{self, NotCompleted};
use super::hooks::InPlaceHooks;
use super::quantity;
use super::spec::{self, UpdateOptions};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Pod, PodCondition, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::appspub::{
    InPlaceUpdateContainerBatch, InPlaceUpdateContainerStatus, InPlaceUpdatePreCheckBeforeNext,
    InPlaceUpdateState, UpdateSpec,
};
use kruise_api::keys;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use thiserror::Error;

/// Resources to apply through `pods/resize`, by container name.
pub type ExpectedResources = BTreeMap<String, ResourceRequirements>;

/// Kubernetes' own pod condition types (not Kruise names, so not in `kruise_api::keys`).
const POD_READY: &str = "Ready";
const CONTAINERS_READY: &str = "ContainersReady";
const CONDITION_TRUE: &str = "True";
const CONDITION_FALSE: &str = "False";
const RESTART_CONTAINER: &str = "RestartContainer";

#[derive(Debug, Error)]
pub enum EngineError {
    #[error(transparent)]
    Annotation(#[from] kruise_api::Error),
    #[error("invalid metadata patch in the in-place update spec: {0}")]
    MetadataPatch(#[source] serde_json::Error),
    #[error("pod has {grace} but no {state}", grace = keys::INPLACE_UPDATE_GRACE_ANNOTATION, state = keys::INPLACE_UPDATE_STATE_ANNOTATION)]
    GraceWithoutState,
    #[error("pod has no spec")]
    NoPodSpec,
}

/// A pod to write: the full desired object (only metadata and spec differ from what was read),
/// and, first, the resources to send to `pods/resize`.
#[derive(Clone, Debug, PartialEq)]
pub struct PodWrite {
    pub pod: Pod,
    pub resize: Option<Value>,
}

fn annotations_mut(pod: &mut Pod) -> &mut BTreeMap<String, String> {
    pod.metadata.annotations.get_or_insert_with(BTreeMap::new)
}

fn write_state(pod: &mut Pod, state: &InPlaceUpdateState) -> Result<(), EngineError> {
    let value = state.to_annotation_value()?;
    let annotations = annotations_mut(pod);
    annotations.insert(keys::INPLACE_UPDATE_STATE_ANNOTATION.to_string(), value);
    annotations.remove(keys::INPLACE_UPDATE_STATE_ANNOTATION_OLD);
    Ok(())
}

fn remove_grace(pod: &mut Pod) {
    if let Some(a) = pod.metadata.annotations.as_mut() {
        a.remove(keys::INPLACE_UPDATE_GRACE_ANNOTATION);
        a.remove(keys::INPLACE_UPDATE_GRACE_ANNOTATION_OLD);
    }
}

/// Writes this batch of `spec` into `pod` (upstream's default `PatchSpecToPod`): images and
/// env-referenced metadata of the containers in this batch, the metadata patch, and the state
/// with the rest staged in `next*`. Resources are returned for `pods/resize`, or written into
/// the spec when the resize subresource is not used.
pub fn patch_spec_to_pod(
    pod: &mut Pod,
    spec: &UpdateSpec,
    state: &mut InPlaceUpdateState,
    opts: &UpdateOptions,
    now: Timestamp,
) -> Result<ExpectedResources, EngineError> {
    state.next_container_images.clear();
    state.next_container_ref_metadata.clear();
    state.next_container_resources.clear();

    if let Some(patch) = spec.meta_data_patch.as_ref() {
        spec::apply_metadata_patch(&mut pod.metadata, &patch.0)
            .map_err(EngineError::MetadataPatch)?;
    }

    let changed: BTreeSet<String> = spec
        .container_images
        .keys()
        .chain(spec.container_ref_metadata.keys())
        .chain(spec.container_resources.keys())
        .cloned()
        .collect();
    let batch = batches::plan(pod, &changed, &spec.container_ref_metadata);

    let pod_spec = pod.spec.as_mut().ok_or(EngineError::NoPodSpec)?;
    let mut image_changed = BTreeSet::new();
    let mut expected = ExpectedResources::new();
    for c in pod_spec.containers.iter_mut() {
        if let Some(image) = spec.container_images.get(&c.name) {
            if batch.now.contains(&c.name) {
                c.image = Some(image.clone());
                image_changed.insert(c.name.clone());
            } else {
                state
                    .next_container_images
                    .insert(c.name.clone(), image.clone());
            }
        }
        if let Some(resources) = spec.container_resources.get(&c.name) {
            if batch.now.contains(&c.name) {
                if opts.use_resize_subresource {
                    expected.insert(c.name.clone(), resources.clone());
                } else {
                    set_resizable(c.resources.get_or_insert_with(Default::default), resources);
                }
            } else {
                state
                    .next_container_resources
                    .insert(c.name.clone(), resources.clone());
            }
        }
    }

    // Baseline for completion: the image each restarted container ran before. A container
    // already recorded by an earlier batch keeps its first baseline.
    for status in pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
    {
        if image_changed.contains(&status.name) {
            state
                .last_container_statuses
                .entry(status.name.clone())
                .or_insert_with(|| InPlaceUpdateContainerStatus {
                    image_id: status.image_id.clone(),
                });
        }
    }

    for (name, meta) in &spec.container_ref_metadata {
        if batch.now.contains(name) {
            for (k, v) in meta.labels.iter().flatten() {
                pod.metadata
                    .labels
                    .get_or_insert_with(BTreeMap::new)
                    .insert(k.clone(), v.clone());
            }
            for (k, v) in meta.annotations.iter().flatten() {
                annotations_mut(pod).insert(k.clone(), v.clone());
            }
        } else {
            state
                .next_container_ref_metadata
                .insert(name.clone(), meta.clone());
        }
    }

    let this_batch: Vec<String> = batch.now.iter().cloned().collect();
    state.pre_check_before_next =
        completion::has_next_batch(state).then(|| InPlaceUpdatePreCheckBeforeNext {
            containers_required_ready: this_batch.clone(),
        });
    state
        .container_batches_record
        .push(InPlaceUpdateContainerBatch {
            timestamp: Time(now),
            containers: this_batch,
        });
    tracing::debug!(
        pod = pod.metadata.name.as_deref().unwrap_or(""),
        batch = ?batch.now,
        later = ?batch.later,
        "in-place update batch decided"
    );
    write_state(pod, state)?;
    Ok(expected)
}

fn resizable(name: &str) -> bool {
    name == "cpu" || name == "memory"
}

fn set_resizable(target: &mut ResourceRequirements, wanted: &ResourceRequirements) {
    for (from, to) in [
        (&wanted.limits, &mut target.limits),
        (&wanted.requests, &mut target.requests),
    ] {
        for (k, q) in from.iter().flatten().filter(|(k, _)| resizable(k)) {
            to.get_or_insert_with(BTreeMap::new)
                .insert(k.clone(), q.clone());
        }
    }
}

/// The strategic merge patch for `pods/resize` carrying the quantities that differ from the
/// pod's spec; `None` when there is nothing to resize (already applied, e.g. on a retry).
pub fn resize_patch(pod: &Pod, expected: &ExpectedResources) -> Option<Value> {
    let containers = pod.spec.as_ref()?.containers.as_slice();
    let mut patches = Vec::new();
    for c in containers {
        let Some(wanted) = expected.get(&c.name) else {
            continue;
        };
        let current = c.resources.clone().unwrap_or_default();
        let mut body = Map::new();
        for (field, from, have) in [
            ("limits", &wanted.limits, &current.limits),
            ("requests", &wanted.requests, &current.requests),
        ] {
            let diff: Map<String, Value> = from
                .iter()
                .flatten()
                .filter(|(k, _)| resizable(k))
                .filter(|(k, q)| {
                    !have
                        .as_ref()
                        .and_then(|h| h.get(*k))
                        .is_some_and(|h: &Quantity| quantity::equal(h, q))
                })
                .map(|(k, q)| (k.clone(), Value::String(q.0.clone())))
                .collect();
            if !diff.is_empty() {
                body.insert(field.to_string(), Value::Object(diff));
            }
        }
        if !body.is_empty() {
            patches.push(json!({"name": c.name, "resources": body}));
        }
    }
    (!patches.is_empty()).then(|| json!({"spec": {"containers": patches}}))
}

fn set_lifecycle(pod: &mut Pod, opts: &UpdateOptions, now: Timestamp) {
    if let Some(state) = opts.lifecycle_state {
        pod.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(
                keys::LIFECYCLE_STATE_LABEL.to_string(),
                state.as_str().to_string(),
            );
        annotations_mut(pod).insert(
            keys::LIFECYCLE_TIMESTAMP_ANNOTATION.to_string(),
            now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        );
    }
}

/// The pod to write for an in-place update to `spec` (upstream's `updatePodInPlace`): new
/// revision, lifecycle, fresh state; then either the first batch, or, with a grace period,
/// the spec parked in the grace annotation.
pub fn plan_update(
    current: &Pod,
    spec: &UpdateSpec,
    hooks: &dyn InPlaceHooks,
    opts: &UpdateOptions,
    now: Timestamp,
) -> Result<PodWrite, EngineError> {
    let mut pod = current.clone();
    hooks.write_revision(&mut pod, &spec.revision);
    set_lifecycle(&mut pod, opts, now);
    let mut state = InPlaceUpdateState {
        revision: spec.revision.clone(),
        update_timestamp: Time(now),
        last_container_statuses: BTreeMap::new(),
        update_env_from_metadata: spec.update_env_from_metadata,
        update_resources: !spec.container_resources.is_empty(),
        update_images: !spec.container_images.is_empty(),
        next_container_images: BTreeMap::new(),
        next_container_ref_metadata: BTreeMap::new(),
        next_container_resources: BTreeMap::new(),
        pre_check_before_next: None,
        container_batches_record: Vec::new(),
    };
    write_state(&mut pod, &state)?;

    if spec.grace_seconds > 0 {
        let parked = spec.to_annotation_value()?;
        annotations_mut(&mut pod).insert(keys::INPLACE_UPDATE_GRACE_ANNOTATION.to_string(), parked);
        return Ok(PodWrite { pod, resize: None });
    }
    let expected = hooks.patch_spec_to_pod(&mut pod, spec, &mut state, opts, now)?;
    remove_grace(&mut pod);
    let resize = resize_patch(&pod, &expected);
    Ok(PodWrite { pod, resize })
}

/// What to do about a pod carrying the grace annotation.
#[derive(Clone, Debug, PartialEq)]
pub enum GraceStep {
    /// Not in a grace period.
    NotInGrace,
    /// Come back after this long.
    Wait(Duration),
    /// The pod moved to another revision meanwhile: drop the parked spec.
    Drop(PodWrite),
    /// The grace period is over: apply the parked spec.
    Apply(PodWrite),
}

/// Whole seconds, rounded up, so a requeue never fires a moment too early.
fn round_up_seconds(d: SignedDuration) -> Duration {
    let secs = d.as_secs() + i64::from(d.subsec_nanos() > 0);
    Duration::from_secs(u64::try_from(secs).unwrap_or(0))
}

/// Ends a grace period once `now >= updateTimestamp + graceSeconds`.
pub fn plan_finish_grace(
    current: &Pod,
    hooks: &dyn InPlaceHooks,
    opts: &UpdateOptions,
    now: Timestamp,
) -> Result<GraceStep, EngineError> {
    let annotations = current.metadata.annotations.as_ref();
    let Some(spec) = UpdateSpec::from_grace_annotation(annotations)? else {
        return Ok(GraceStep::NotInGrace);
    };
    let mut state =
        InPlaceUpdateState::from_annotations(annotations)?.ok_or(EngineError::GraceWithoutState)?;
    let mut pod = current.clone();
    if !hooks.equals_revision(current, &spec.revision) {
        remove_grace(&mut pod);
        return Ok(GraceStep::Drop(PodWrite { pod, resize: None }));
    }
    let grace = SignedDuration::from_secs(i64::from(spec.grace_seconds));
    let elapsed = now.duration_since(state.update_timestamp.0);
    if elapsed < grace {
        return Ok(GraceStep::Wait(round_up_seconds(grace - elapsed)));
    }
    let expected = hooks.patch_spec_to_pod(&mut pod, &spec, &mut state, opts, now)?;
    remove_grace(&mut pod);
    let resize = resize_patch(&pod, &expected);
    Ok(GraceStep::Apply(PodWrite { pod, resize }))
}

/// The next thing Refresh should do for a pod.
#[derive(Clone, Debug, PartialEq)]
pub enum RefreshStep {
    /// Grace period handling (waiting, dropping or applying the parked spec).
    Grace(GraceStep),
    /// The current batch has not finished.
    InProgress(NotCompleted),
    /// The current batch finished but is not ready; the next batch waits.
    WaitingForBatch(PreCheckPending),
    /// Patch the next launch-priority batch.
    NextBatch(PodWrite),
    /// Flip InPlaceUpdateReady to True: write this pod's status.
    MarkReady(Pod),
    /// Nothing to do.
    Idle,
}

/// Upstream's Refresh as a decision: grace first; then, for a recorded update, wait for the
/// batch to complete, start the next batch once the previous one is ready, and finally set
/// InPlaceUpdateReady back to True.
pub fn plan_refresh(
    current: &Pod,
    hooks: &dyn InPlaceHooks,
    opts: &UpdateOptions,
    now: Timestamp,
) -> Result<RefreshStep, EngineError> {
    match plan_finish_grace(current, hooks, opts, now)? {
        GraceStep::NotInGrace => {}
        step => return Ok(RefreshStep::Grace(step)),
    }
    if let Some(mut state) =
        InPlaceUpdateState::from_annotations(current.metadata.annotations.as_ref())?
    {
        if let Err(pending) = hooks.containers_update_completed(current, &state) {
            return Ok(RefreshStep::InProgress(pending));
        }
        if completion::has_next_batch(&state) {
            let required = state
                .pre_check_before_next
                .as_ref()
                .map(|p| p.containers_required_ready.as_slice())
                .unwrap_or_default();
            if let Err(pending) = batches::pre_check_before_next(current, required) {
                return Ok(RefreshStep::WaitingForBatch(pending));
            }
            let next = UpdateSpec {
                revision: state.revision.clone(),
                container_images: state.next_container_images.clone(),
                container_ref_metadata: state.next_container_ref_metadata.clone(),
                container_resources: state.next_container_resources.clone(),
                update_env_from_metadata: state.update_env_from_metadata,
                ..Default::default()
            };
            let mut pod = current.clone();
            let expected = hooks.patch_spec_to_pod(&mut pod, &next, &mut state, opts, now)?;
            let resize = resize_patch(&pod, &expected);
            return Ok(RefreshStep::NextBatch(PodWrite { pod, resize }));
        }
    }
    if !has_readiness_gate(current) {
        return Ok(RefreshStep::Idle);
    }
    Ok(match with_inplace_condition(current, true, None, now) {
        Some(pod) => RefreshStep::MarkReady(pod),
        None => RefreshStep::Idle,
    })
}

/// Whether the pod declares the InPlaceUpdateReady readiness gate.
pub fn has_readiness_gate(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .is_some_and(|g| {
            g.iter()
                .any(|g| g.condition_type == keys::INPLACE_UPDATE_READY)
        })
}

fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Sets a condition; the transition time moves only when the status does.
fn set_condition(pod: &mut Pod, new: PodCondition) {
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(c) if c.status == new.status => {
            c.reason = new.reason;
            c.message = new.message;
        }
        Some(c) => *c = new,
        None => conditions.push(new),
    }
}

/// The pod with InPlaceUpdateReady set (True, or False with `reason`), or `None` when it already
/// says so. Going False also drops the Ready condition at once, as the kubelet would on its next
/// sync, so endpoints stop sending traffic before containers restart.
pub fn with_inplace_condition(
    pod: &Pod,
    ready: bool,
    reason: Option<&str>,
    now: Timestamp,
) -> Option<Pod> {
    let status = if ready {
        CONDITION_TRUE
    } else {
        CONDITION_FALSE
    };
    if let Some(c) = condition(pod, keys::INPLACE_UPDATE_READY)
        && c.status == status
        && c.reason.as_deref() == reason
        && c.message.is_none()
    {
        return None;
    }
    let mut out = pod.clone();
    set_condition(
        &mut out,
        PodCondition {
            type_: keys::INPLACE_UPDATE_READY.to_string(),
            status: status.to_string(),
            reason: reason.map(str::to_string),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        },
    );
    if !ready {
        recompute_ready(&mut out, now);
    }
    Some(out)
}

/// Recomputes the Ready condition from readiness gates, like the kubelet does; only when the
/// pod is Ready-tracked and its containers are ready.
fn recompute_ready(pod: &mut Pod, now: Timestamp) {
    if condition(pod, POD_READY).is_none()
        || condition(pod, CONTAINERS_READY).is_none_or(|c| c.status != CONDITION_TRUE)
    {
        return;
    }
    let gates: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.as_ref())
        .map(|g| g.iter().map(|g| g.condition_type.clone()).collect())
        .unwrap_or_default();
    let unready: Vec<String> = gates
        .iter()
        .filter_map(|gate| match condition(pod, gate) {
            None => Some(format!(
                "corresponding condition of pod readiness gate \"{gate}\" does not exist."
            )),
            Some(c) if c.status != CONDITION_TRUE => Some(format!(
                "the status of pod readiness gate \"{gate}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => None,
        })
        .collect();
    let ready = if unready.is_empty() {
        PodCondition {
            type_: POD_READY.to_string(),
            status: CONDITION_TRUE.to_string(),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        }
    } else {
        PodCondition {
            type_: POD_READY.to_string(),
            status: CONDITION_FALSE.to_string(),
            reason: Some("ReadinessGatesNotReady".to_string()),
            message: Some(unready.join(", ")),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        }
    };
    set_condition(pod, ready);
}

/// Upstream's default `CheckPodNeedsBeUnready`: a pod with the readiness gate leaves service,
/// except for a resources-only change whose resize policies restart no container.
pub fn default_pod_needs_be_unready(pod: &Pod, spec: &UpdateSpec, opts: &UpdateOptions) -> bool {
    if !opts.features.vertical_scaling || !spec.vertical_update_only() {
        return has_readiness_gate(pod);
    }
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let restarts = spec.container_resources.iter().any(|(name, wanted)| {
        let touches = |resource: &str| {
            wanted
                .limits
                .as_ref()
                .is_some_and(|l| l.contains_key(resource))
                || wanted
                    .requests
                    .as_ref()
                    .is_some_and(|r| r.contains_key(resource))
        };
        containers
            .iter()
            .filter(|c| &c.name == name)
            .flat_map(|c| c.resize_policy.iter().flatten())
            .any(|p| p.restart_policy == RESTART_CONTAINER && touches(&p.resource_name))
    });
    restarts && has_readiness_gate(pod)
}
