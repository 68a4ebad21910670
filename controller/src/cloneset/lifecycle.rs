//! The lifecycle writes both sync halves make (upstream's `PatchPodLifecycle` and the lifecycle
//! hooks' `markPodNotReady`): the lifecycle state label with its timestamp and hook handlers,
//! and the readiness key that holds KruisePodReady False meanwhile.

use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{LifecycleHook, LifecycleStateType};
use kruise_api::keys;
use serde_json::{Value, json};

use super::context::{PodPart, patch_pod};
use super::error::Error;
use super::pod::rfc3339;
use super::podutil;
use super::sync::Syncer;

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
        let mut labels = serde_json::Map::new();
        labels.insert(
            keys::LIFECYCLE_STATE_LABEL.to_string(),
            Value::String(state.as_str().to_string()),
        );
        let mut meta = serde_json::Map::new();
        if let Some(h) = handler {
            for (k, v) in &h.labels_handler {
                labels.insert(k.clone(), Value::String(v.clone()));
            }
            if !h.finalizers_handler.is_empty() {
                meta.insert("finalizers".into(), json!(h.finalizers_handler));
            }
        }
        meta.insert("labels".into(), Value::Object(labels));
        meta.insert(
            "annotations".into(),
            json!({ keys::LIFECYCLE_TIMESTAMP_ANNOTATION: rfc3339(self.now) }),
        );
        let patch = json!({ "metadata": meta });
        let written = patch_pod(&self.api()?, pod, PodPart::Object, patch).await?;
        self.ctx.expect_written(&written);
        tracing::info!(cloneset = %self.key, pod = podutil::name(pod), state = %state, "pod lifecycle changed");
        Ok(true)
    }

    /// The lifecycle hooks' markPodNotReady: hold KruisePodReady False while a pod waits in
    /// PreparingDelete or PreparingUpdate, and let it go once Updated.
    async fn mark_not_ready_for(&self, pod: &Pod, state: LifecycleStateType) -> Result<(), Error> {
        let lc = self.cs.spec.lifecycle.as_ref();
        let marks = |h: Option<&LifecycleHook>| h.is_some_and(|h| h.mark_pod_not_ready);
        let (key, add) = match state {
            LifecycleStateType::PreparingDelete
                if marks(lc.and_then(|l| l.pre_delete.as_ref())) =>
            {
                (keys::READINESS_KEY_PRE_DELETE_HOOK, true)
            }
            LifecycleStateType::PreparingUpdate
                if marks(lc.and_then(|l| l.in_place_update.as_ref())) =>
            {
                (keys::READINESS_KEY_PRE_UPDATE_HOOK, true)
            }
            LifecycleStateType::Updated if marks(lc.and_then(|l| l.in_place_update.as_ref())) => {
                (keys::READINESS_KEY_PRE_UPDATE_HOOK, false)
            }
            _ => return Ok(()),
        };
        let msg = kruise_api::appspub::PodReadinessMessage::new(
            keys::READINESS_USER_AGENT_LIFECYCLE,
            key,
        );
        let cond = crate::podreadiness::condition_with_key(pod, &msg, add, self.now).map_err(
            |source| Error::Readiness {
                pod: podutil::name(pod).to_string(),
                source,
            },
        )?;
        let Some(cond) = cond else { return Ok(()) };
        let patch = json!({ "status": { "conditions": [cond] } });
        let written = patch_pod(&self.api()?, pod, PodPart::Status, patch).await?;
        self.ctx.expect_written(&written);
        tracing::info!(cloneset = %self.key, pod = podutil::name(pod), key, held = add, "lifecycle hook readiness key changed");
        Ok(())
    }
}
