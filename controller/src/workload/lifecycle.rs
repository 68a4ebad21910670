//! The Pod lifecycle state machine the workloads share (upstream `pkg/util/lifecycle`): the
//! refresh transitions ([`next_lifecycle_state`]), and the one writer of the lifecycle label with
//! its timestamp and hook handlers, plus the readiness key that holds KruisePodReady False
//! meanwhile (upstream's `PatchPodLifecycle` and the lifecycle hooks' `markPodNotReady`).

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::appspub::{
    Lifecycle, LifecycleHook, LifecycleStateType, PodReadinessMessage, kruise_pod_ready_condition,
    set_lifecycle_state,
};
use kruise_api::keys;
use kube::Api;
use serde_json::{Value, json};

use super::podpatch::{PodPart, patch_pod};
use super::podutil;

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

/// Why a lifecycle write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("KruisePodReady condition of pod {pod}: {source}")]
    Readiness {
        pod: String,
        source: kruise_api::Error,
    },
}

/// Moves `pod` to `state` (upstream `UpdatePodLifecycle` / `UpdatePodLifecycleWithHandler`),
/// the one writer every workload with lifecycle hooks uses: first the markPodNotReady
/// readiness key ([`not_ready_key`]), then the state label with the hook's handlers
/// ([`lifecycle_patch`]). `written` sees every Pod the API server returns, so the caller can
/// expect its resource version. Returns whether the state patch was sent.
pub async fn write_lifecycle(
    api: &Api<Pod>,
    lifecycle: Option<&Lifecycle>,
    pod: &Pod,
    state: LifecycleStateType,
    handler: Option<&LifecycleHook>,
    now: Timestamp,
    written: &(dyn Fn(&Pod) + Send + Sync),
) -> Result<bool, WriteError> {
    let name = podutil::name(pod);
    if let Some((key, add)) = not_ready_key(lifecycle, state) {
        let msg = PodReadinessMessage::new(keys::READINESS_USER_AGENT_LIFECYCLE, key);
        let cond = kruise_pod_ready_condition(pod, &msg, add, now).map_err(|source| {
            WriteError::Readiness {
                pod: name.to_string(),
                source,
            }
        })?;
        if let Some(cond) = cond {
            let patch = json!({ "status": { "conditions": [cond] } });
            written(&patch_pod(api, pod, PodPart::Status, patch).await?);
            tracing::info!(
                pod = name,
                key,
                held = add,
                "lifecycle hook readiness key changed"
            );
        }
    }
    if podutil::lifecycle_state(pod) == Some(state) && handler.is_none() {
        return Ok(false);
    }
    let patch = lifecycle_patch(state, handler, now);
    written(&patch_pod(api, pod, PodPart::Object, patch).await?);
    tracing::info!(pod = name, state = %state, "pod lifecycle changed");
    Ok(true)
}

/// The lifecycle state a pod moves to on refresh, if any (upstream `refreshPodState`):
/// PreparingNormal → Normal once scheduled (or once the preNormal hook is all set);
/// PreparingUpdate at the update revision and finished Updating → Updated while the inPlaceUpdate
/// hook is not all set, else Normal; Updated → Normal once the hook is all set.
pub fn next_lifecycle_state(
    lifecycle: Option<&Lifecycle>,
    pod: &Pod,
    update_revision: &str,
    update_completed: bool,
) -> Option<LifecycleStateType> {
    let in_place_hook = lifecycle.and_then(|l| l.in_place_update.as_ref());
    let after_update = || {
        if lifecycle.is_some() && !podutil::is_all_hooked(in_place_hook, pod) {
            LifecycleStateType::Updated
        } else {
            LifecycleStateType::Normal
        }
    };
    match podutil::lifecycle_state(pod)? {
        LifecycleStateType::PreparingNormal => {
            let ready = match lifecycle.and_then(|l| l.pre_normal.as_ref()) {
                None => podutil::is_scheduled(pod),
                Some(hook) => podutil::is_all_hooked(Some(hook), pod),
            };
            ready.then_some(LifecycleStateType::Normal)
        }
        LifecycleStateType::PreparingUpdate => {
            podutil::is_at_revision(pod, update_revision).then(after_update)
        }
        LifecycleStateType::Updating => update_completed.then(after_update),
        LifecycleStateType::Updated => (in_place_hook.is_none()
            || podutil::is_all_hooked(in_place_hook, pod))
        .then_some(LifecycleStateType::Normal),
        LifecycleStateType::Normal | LifecycleStateType::PreparingDelete => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::podutil::testpod::*;

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

    #[test]
    fn lifecycle_refresh_transitions() {
        use LifecycleStateType::*;
        use kruise_api::appspub::LifecycleHook;
        let unscheduled = pod("a").state(PreparingNormal).build();
        assert_eq!(next_lifecycle_state(None, &unscheduled, "new", false), None);
        let scheduled = pod("a").state(PreparingNormal).running_ready(0).build();
        assert_eq!(
            next_lifecycle_state(None, &scheduled, "new", false),
            Some(Normal)
        );

        let updating = pod("a").rev("new").state(Updating).build();
        assert_eq!(next_lifecycle_state(None, &updating, "new", false), None);
        assert_eq!(
            next_lifecycle_state(None, &updating, "new", true),
            Some(Normal)
        );

        let hook = Lifecycle {
            in_place_update: Some(LifecycleHook {
                labels_handler: [("hold".to_string(), "true".to_string())].into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        // The hook label was removed during the update: wait in Updated until it is back.
        assert_eq!(
            next_lifecycle_state(Some(&hook), &updating, "new", true),
            Some(Updated)
        );
        let updated = pod("a").rev("new").state(Updated).build();
        assert_eq!(
            next_lifecycle_state(Some(&hook), &updated, "new", true),
            None
        );
        let rehooked = pod("a")
            .rev("new")
            .state(Updated)
            .label("hold", "true")
            .build();
        assert_eq!(
            next_lifecycle_state(Some(&hook), &rehooked, "new", true),
            Some(Normal)
        );

        // PreparingUpdate only resolves by itself when the pod is already at the update revision
        // (a rollback while waiting for the hook).
        let prep_old = pod("a").rev("old").state(PreparingUpdate).build();
        assert_eq!(next_lifecycle_state(None, &prep_old, "new", false), None);
        let prep_new = pod("a").rev("new").state(PreparingUpdate).build();
        assert_eq!(
            next_lifecycle_state(None, &prep_new, "new", false),
            Some(Normal)
        );
        assert_eq!(
            next_lifecycle_state(None, &pod("a").state(Normal).build(), "new", true),
            None
        );
    }
}
