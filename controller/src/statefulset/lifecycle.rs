//! Lifecycle hooks of an Advanced StatefulSet (upstream `deletePod`, `inPlaceUpdatePod` and
//! `refreshPodState` in `stateful_set_control.go`): `lifecycle.preDelete` holds a Pod in
//! PreparingDelete instead of deleting it, `lifecycle.inPlaceUpdate` holds it in PreparingUpdate
//! before its in-place update, both while the hook's labels or finalizers are on the Pod.
//!
//! The decisions and the writer are the shared workload layer's
//! ([`crate::workload::update_step`], [`crate::workload::lifecycle`]); this module only applies
//! them to this set's Pods.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{CloneSetPodUpdateStrategyType, PodUpdateStrategyType};
use kruise_api::appspub::{LifecycleHook, LifecycleStateType};
use kube::Api;

use super::context::Context;
use super::error::Error;
use crate::workload::lifecycle::{WriteError, write_lifecycle};
use crate::workload::podutil;

/// The CloneSet policy of the same name: the update-step decision is shared.
pub(super) fn as_cloneset_policy(p: PodUpdateStrategyType) -> CloneSetPodUpdateStrategyType {
    match p {
        PodUpdateStrategyType::ReCreate => CloneSetPodUpdateStrategyType::ReCreate,
        PodUpdateStrategyType::InPlaceIfPossible => {
            CloneSetPodUpdateStrategyType::InPlaceIfPossible
        }
        PodUpdateStrategyType::InPlaceOnly => CloneSetPodUpdateStrategyType::InPlaceOnly,
    }
}

/// Whether `pod` carries a label or finalizer of `hook` (upstream `IsPodHooked`).
pub(super) fn is_hooked(hook: Option<&LifecycleHook>, pod: &Pod) -> bool {
    podutil::is_hooked(hook, pod)
}

/// Moves `pod` to `state` through the shared writer ([`write_lifecycle`]), expecting the
/// versions it writes. Returns whether the state label was written.
pub(super) async fn set_lifecycle(
    ctx: &Context,
    api: &Api<Pod>,
    lifecycle: Option<&kruise_api::appspub::Lifecycle>,
    pod: &Pod,
    state: LifecycleStateType,
    handler: Option<&LifecycleHook>,
    now: Timestamp,
) -> Result<bool, Error> {
    let expect = |p: &Pod| {
        ctx.expect_version(
            p.metadata.uid.as_deref(),
            p.metadata.resource_version.as_deref(),
        )
    };
    write_lifecycle(api, lifecycle, pod, state, handler, now, &expect)
        .await
        .map_err(|e| match e {
            WriteError::Kube(e) => Error::from(e),
            WriteError::Readiness { pod, source } => Error::Readiness { pod, source },
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::lifecycle::next_lifecycle_state;
    use crate::workload::update_step::{Refusal, UpdateStep, update_step};
    use kruise_api::appspub::Lifecycle;
    use kruise_api::keys;

    fn pod(state: LifecycleStateType, labels: &[(&str, &str)]) -> Pod {
        let mut p = Pod::default();
        let mut l: std::collections::BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.insert(keys::LIFECYCLE_STATE_LABEL.into(), state.to_string());
        l.insert(
            keys::CONTROLLER_REVISION_HASH_LABEL.into(),
            "web-old".into(),
        );
        p.metadata.labels = Some(l);
        p
    }

    fn hook() -> LifecycleHook {
        LifecycleHook {
            labels_handler: [("hold".to_string(), "true".to_string())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_hooked_pod_waits_in_preparing_update_until_released() {
        let h = hook();
        let policy = as_cloneset_policy(PodUpdateStrategyType::InPlaceIfPossible);
        let held = pod(LifecycleStateType::Normal, &[("hold", "true")]);
        assert_eq!(
            update_step(policy, &held, Some(&h), || Ok(())),
            UpdateStep::PrepareUpdateHook { handler: None }
        );
        let waiting = pod(LifecycleStateType::PreparingUpdate, &[("hold", "true")]);
        assert_eq!(
            update_step(policy, &waiting, Some(&h), || Ok(())),
            UpdateStep::Wait
        );
        let released = pod(LifecycleStateType::PreparingUpdate, &[]);
        assert_eq!(
            update_step(policy, &released, Some(&h), || Ok(())),
            UpdateStep::InPlace
        );
        let deleting = pod(LifecycleStateType::PreparingDelete, &[]);
        assert_eq!(
            update_step(policy, &deleting, Some(&h), || Ok(())),
            UpdateStep::Refuse(Refusal::BadLifecycle(LifecycleStateType::PreparingDelete))
        );
    }

    #[test]
    fn recreate_policy_never_waits_for_the_update_hook() {
        let h = hook();
        let held = pod(LifecycleStateType::Normal, &[("hold", "true")]);
        assert_eq!(
            update_step(
                as_cloneset_policy(PodUpdateStrategyType::ReCreate),
                &held,
                Some(&h),
                || Ok(())
            ),
            UpdateStep::Recreate { reason: None }
        );
    }

    #[test]
    fn an_updating_pod_goes_back_to_normal_once_complete() {
        let updating = pod(LifecycleStateType::Updating, &[]);
        assert_eq!(
            next_lifecycle_state(None, &updating, "web-new", true),
            Some(LifecycleStateType::Normal)
        );
        assert_eq!(
            next_lifecycle_state(None, &updating, "web-new", false),
            None
        );
        // With an inPlaceUpdate hook whose label is gone, the Pod waits in Updated.
        let lc = Lifecycle {
            in_place_update: Some(hook()),
            ..Default::default()
        };
        assert_eq!(
            next_lifecycle_state(Some(&lc), &updating, "web-new", true),
            Some(LifecycleStateType::Updated)
        );
    }

    #[test]
    fn pre_delete_hook_is_seen_by_label_or_finalizer() {
        let h = hook();
        assert!(is_hooked(
            Some(&h),
            &pod(LifecycleStateType::Normal, &[("hold", "true")])
        ));
        assert!(!is_hooked(Some(&h), &pod(LifecycleStateType::Normal, &[])));
        let fin = LifecycleHook {
            finalizers_handler: vec!["example.com/hold".into()],
            ..Default::default()
        };
        let mut p = pod(LifecycleStateType::Normal, &[]);
        p.metadata.finalizers = Some(vec!["example.com/hold".into()]);
        assert!(is_hooked(Some(&fin), &p));
        assert!(!is_hooked(None, &p));
    }
}
