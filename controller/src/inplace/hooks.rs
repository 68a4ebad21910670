//! The workload-specific half of the engine: upstream's `UpdateOptions` function fields plus the
//! revision adapter, as one trait.
//!
//! This is the seam a new workload plugs into. Advanced StatefulSet and Advanced DaemonSet
//! implement [`InPlaceHooks`] (overriding what differs, mostly the revision label and its
//! comparison) and reuse the whole engine through `plan` and `apply`; they never
//! copy it. The defaults are the pure building blocks below this module (spec, patch,
//! conditions, completion), so the trait depends on them and `plan` depends on the
//! trait, never the reverse.

use super::completion::{self, NotCompleted};
use super::conditions;
use super::patch::{self, EngineError, ExpectedResources};
use super::spec::{self, NotInPlace, UpdateOptions};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{InPlaceUpdateState, UpdateSpec};
use kruise_api::revision;

/// What a workload tells the engine (upstream `UpdateOptions` hooks + `revisionadapter`). Every
/// method has CloneSet's behaviour by default; an implementation overrides only what its
/// workload does differently. Implementations must stay pure: the engine calls them while
/// planning, before and after conflicts, and from tests.
pub trait InPlaceHooks: Send + Sync {
    /// The revision name pods carry for `revision` (upstream `GetRevision`).
    fn revision_name(&self, revision: &ControllerRevision) -> String {
        revision.metadata.name.clone().unwrap_or_default()
    }

    /// What an in-place update from `old` to `new` changes (upstream `CalculateSpec`).
    fn calculate_spec(
        &self,
        old: Option<&ControllerRevision>,
        new: &ControllerRevision,
        opts: &UpdateOptions,
    ) -> Result<UpdateSpec, NotInPlace> {
        spec::calculate(old, new, self.revision_name(new), opts)
    }

    /// Writes the next batch of `spec` into `pod` and records it in `state`; returns the
    /// resources to send through `pods/resize` (upstream `PatchSpecToPod`).
    fn patch_spec_to_pod(
        &self,
        pod: &mut Pod,
        spec: &UpdateSpec,
        state: &mut InPlaceUpdateState,
        opts: &UpdateOptions,
        now: Timestamp,
    ) -> Result<ExpectedResources, EngineError> {
        patch::patch_spec_to_pod(pod, spec, state, opts, now)
    }

    /// Whether the pod must leave service during the update (upstream `CheckPodNeedsBeUnready`).
    fn pod_needs_be_unready(&self, pod: &Pod, spec: &UpdateSpec, opts: &UpdateOptions) -> bool {
        conditions::default_pod_needs_be_unready(pod, spec, opts)
    }

    /// Whether the containers of the current batch run their new spec (upstream
    /// `CheckContainersUpdateCompleted`).
    fn containers_update_completed(
        &self,
        pod: &Pod,
        state: &InPlaceUpdateState,
    ) -> Result<(), NotCompleted> {
        completion::containers_update_completed(pod, state)
    }

    /// Whether the whole update is over (upstream `CheckPodUpdateCompleted`); CloneSet uses it
    /// to move the lifecycle from Updating to Normal.
    fn pod_update_completed(&self, pod: &Pod) -> Result<(), NotCompleted> {
        completion::pod_update_completed(pod, |p, s| self.containers_update_completed(p, s))
    }

    /// Marks the pod as belonging to `revision` (upstream `WriteRevisionHash`).
    fn write_revision(&self, pod: &mut Pod, revision: &str) {
        revision::write_revision_labels(
            pod.metadata.labels.get_or_insert_with(Default::default),
            revision,
        );
    }

    /// Whether the pod belongs to `revision` (upstream `EqualToRevisionHash`); the short hash
    /// also matches, for pods labelled by the short-hash form.
    fn equals_revision(&self, pod: &Pod, revision: &str) -> bool {
        revision::labels_match_revision(pod.metadata.labels.as_ref(), revision)
    }
}

/// The hooks CloneSet uses: every default.
#[derive(Clone, Copy, Debug, Default)]
pub struct CloneSetHooks;

impl InPlaceHooks for CloneSetHooks {}
