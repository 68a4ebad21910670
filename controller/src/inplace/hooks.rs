//! The workload-specific half of the engine: upstream's `UpdateOptions` function fields plus the
//! revision adapter, as one trait. Every method has the behaviour CloneSet uses; Advanced
//! StatefulSet and DaemonSet override what differs (the revision label, mostly).

use super::completion::{self, NotCompleted};
use super::spec::{self, NotInPlace, UpdateOptions};
use super::state::{self, EngineError, ExpectedResources};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{InPlaceUpdateState, UpdateSpec};
use kruise_api::keys;

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
        state::patch_spec_to_pod(pod, spec, state, opts, now)
    }

    /// Whether the pod must leave service during the update (upstream `CheckPodNeedsBeUnready`).
    fn pod_needs_be_unready(&self, pod: &Pod, spec: &UpdateSpec, opts: &UpdateOptions) -> bool {
        state::default_pod_needs_be_unready(pod, spec, opts)
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

    /// Marks the pod as belonging to `revision`.
    fn write_revision(&self, pod: &mut Pod, revision: &str) {
        let labels = pod.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(
            keys::CONTROLLER_REVISION_HASH_LABEL.to_string(),
            revision.to_string(),
        );
        labels.insert(
            keys::POD_TEMPLATE_HASH_LABEL.to_string(),
            short_hash(revision).to_string(),
        );
    }

    /// Whether the pod belongs to `revision`; the short hash also matches, for pods labelled by
    /// the short-hash form.
    fn equals_revision(&self, pod: &Pod, revision: &str) -> bool {
        let current = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH_LABEL))
            .map(String::as_str)
            .unwrap_or("");
        current == revision || (!current.is_empty() && short_hash(current) == short_hash(revision))
    }
}

/// The hash part of a revision name `{workload}-{hash}`.
pub fn short_hash(revision: &str) -> &str {
    revision.rsplit('-').next().unwrap_or(revision)
}

/// The hooks CloneSet uses: every default.
#[derive(Clone, Copy, Debug, Default)]
pub struct CloneSetHooks;

impl InPlaceHooks for CloneSetHooks {}
