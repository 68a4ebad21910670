//! The lifecycle writes both sync halves make (upstream's `PatchPodLifecycle` and the lifecycle
//! hooks' `markPodNotReady`): the lifecycle state label with its timestamp and hook handlers,
//! and the readiness key that holds KruisePodReady False meanwhile.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::appspub::{
    Lifecycle, LifecycleHook, LifecycleStateType, PodReadinessMessage, kruise_pod_ready_condition,
    set_lifecycle_state,
};
use kruise_api::keys;
use serde_json::{Value, json};

use super::context::{PodPart, patch_pod};
use super::error::Error;
use super::podutil;
use super::sync::Syncer;

/// The metadata patch of upstream's `PatchPodLifecycle`: the state label and its timestamp
/// ([`set_lifecycle_state`]), plus the hook's labels and finalizers. Only the fields set here are
/// serialized.
pub fn lifecycle_patch(
    state: LifecycleStateType,
    handler: Option<&LifecycleHook>,
    now: Timestamp,
) -> Value {
    let mut meta = ObjectMeta::default();
    set_lifecycle_state(&mut meta, state, now);
    if let Some(h) = handler {
        meta.labels
            .get_or_insert_default()
            .extend(h.labels_handler.clone());
        if !h.finalizers_handler.is_empty() {
            meta.finalizers = Some(h.finalizers_handler.clone());
        }
    }
    json!({ "metadata": meta })
}

/// The readiness key a move to `state` adds (`true`) or removes under `lifecycle`'s
/// markPodNotReady hooks (upstream's lifecycle `UpdatePodLifecycle`): PreparingDelete and
/// PreparingUpdate hold the Pod not-ready, Updated lets the update hook's key go.
pub fn not_ready_key(
    lifecycle: Option<&Lifecycle>,
    state: LifecycleStateType,
) -> Option<(&'static str, bool)> {
    let marks = |h: Option<&LifecycleHook>| h.is_some_and(|h| h.mark_pod_not_ready);
    match state {
        LifecycleStateType::PreparingDelete
            if marks(lifecycle.and_then(|l| l.pre_delete.as_ref())) =>
        {
            Some((keys::READINESS_KEY_PRE_DELETE_HOOK, true))
        }
        LifecycleStateType::PreparingUpdate
            if marks(lifecycle.and_then(|l| l.in_place_update.as_ref())) =>
        {
            Some((keys::READINESS_KEY_PRE_UPDATE_HOOK, true))
        }
        LifecycleStateType::Updated
            if marks(lifecycle.and_then(|l| l.in_place_update.as_ref())) =>
        {
            Some((keys::READINESS_KEY_PRE_UPDATE_HOOK, false))
        }
        _ => None,
    }
}

impl Syncer<'_> {
    /// Patch the lifecycle label (and, with a hook, its labels and finalizers). Returns whether
    /// the pod was written.
    pub(super) async fn set_lifecycle(
        &self,
        pod: &Pod,
        state: LifecycleStateType,
        handler: Option<&LifecycleHook>,
    ) -> Result<bool, Error> {
        self.mark_not_ready_for(pod, state).await?;
        if podutil::lifecycle_state(pod) == Some(state) && handler.is_none() {
            return Ok(false);
        }
        let patch = lifecycle_patch(state, handler, self.now);
        let written = patch_pod(&self.api()?, pod, PodPart::Object, patch).await?;
        self.ctx.expect_written(&written);
        tracing::info!(pod = podutil::name(pod), state = %state, "pod lifecycle changed");
        Ok(true)
    }

    /// The lifecycle hooks' markPodNotReady: hold KruisePodReady False while a pod waits in
    /// PreparingDelete or PreparingUpdate, and let it go once Updated (upstream's
    /// `addNotReadyKey` / `removeNotReadyKey`, see [`kruise_pod_ready_condition`]).
    async fn mark_not_ready_for(&self, pod: &Pod, state: LifecycleStateType) -> Result<(), Error> {
        let Some((key, add)) = not_ready_key(self.cs.spec.lifecycle.as_ref(), state) else {
            return Ok(());
        };
        let msg = PodReadinessMessage::new(keys::READINESS_USER_AGENT_LIFECYCLE, key);
        let cond = kruise_pod_ready_condition(pod, &msg, add, self.now).map_err(|source| {
            Error::Readiness {
                pod: podutil::name(pod).to_string(),
                source,
            }
        })?;
        let Some(cond) = cond else { return Ok(()) };
        let patch = json!({ "status": { "conditions": [cond] } });
        let written = patch_pod(&self.api()?, pod, PodPart::Status, patch).await?;
        self.ctx.expect_written(&written);
        tracing::info!(
            pod = podutil::name(pod),
            key,
            held = add,
            "lifecycle hook readiness key changed"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifecycle_patch_table() {
        let now = Timestamp::from_second(1_700_000_000).expect("ts");
        let hook = LifecycleHook {
            labels_handler: [("hold".to_string(), "true".to_string())].into(),
            finalizers_handler: vec!["example.com/wait".into()],
            ..Default::default()
        };
        let labels_only = LifecycleHook {
            labels_handler: [("hold".to_string(), "true".to_string())].into(),
            ..Default::default()
        };
        let rows = [
            (
                LifecycleStateType::PreparingDelete,
                None,
                json!({"metadata": {
                    "labels": {keys::LIFECYCLE_STATE_LABEL: "PreparingDelete"},
                    "annotations": {keys::LIFECYCLE_TIMESTAMP_ANNOTATION: "2023-11-14T22:13:20Z"},
                }}),
            ),
            (
                LifecycleStateType::PreparingUpdate,
                Some(&hook),
                json!({"metadata": {
                    "labels": {keys::LIFECYCLE_STATE_LABEL: "PreparingUpdate", "hold": "true"},
                    "annotations": {keys::LIFECYCLE_TIMESTAMP_ANNOTATION: "2023-11-14T22:13:20Z"},
                    "finalizers": ["example.com/wait"],
                }}),
            ),
            (
                LifecycleStateType::Normal,
                Some(&labels_only),
                json!({"metadata": {
                    "labels": {keys::LIFECYCLE_STATE_LABEL: "Normal", "hold": "true"},
                    "annotations": {keys::LIFECYCLE_TIMESTAMP_ANNOTATION: "2023-11-14T22:13:20Z"},
                }}),
            ),
        ];
        for (state, handler, want) in rows {
            assert_eq!(lifecycle_patch(state, handler, now), want, "{state}");
        }
    }
}
