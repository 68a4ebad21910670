//! The pure decisions of an in-place update (upstream `inplaceupdate.Interface` minus the I/O):
//! whether a revision change can be applied in place, the pod to write for Update, for the end
//! of a grace period and for each later batch, and when to flip InPlaceUpdateReady back. Every
//! workload difference goes through [`InPlaceHooks`]. Nothing here talks to the API or reads a
//! clock; `now` is always given. `apply` performs what these functions return.

use super::batches::{self, PreCheckPending};
use super::completion::{self, NotCompleted};
use super::conditions::{has_readiness_gate, with_inplace_condition};
use super::hooks::InPlaceHooks;
use super::patch::{EngineError, annotations_mut, remove_grace, resize_patch, write_state};
use super::spec::{NotInPlace, UpdateOptions};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::appspub::{InPlaceUpdateState, UpdateSpec, set_lifecycle_state};
use kruise_api::keys;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// A pod to write: the full desired object (only metadata and spec differ from what was read),
/// and, first, the resources to send to `pods/resize`.
#[derive(Clone, Debug, PartialEq)]
pub struct PodWrite {
    pub pod: Pod,
    pub resize: Option<Value>,
}

/// Whether `old` → `new` can be applied in place (upstream `CanUpdateInPlace`).
pub fn can_update_in_place(
    hooks: &dyn InPlaceHooks,
    old: Option<&ControllerRevision>,
    new: &ControllerRevision,
    opts: &UpdateOptions,
) -> Result<(), NotInPlace> {
    hooks.calculate_spec(old, new, opts).map(|_| ())
}

fn set_lifecycle(pod: &mut Pod, opts: &UpdateOptions, now: Timestamp) {
    if let Some(state) = opts.lifecycle_state {
        set_lifecycle_state(&mut pod.metadata, state, now);
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
