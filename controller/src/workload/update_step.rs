//! The per-Pod update decision (upstream `updatePod` in `cloneset_update.go`): given the pod
//! update policy, the Pod's lifecycle state and the in-place-update hook, what to do with one Pod
//! chosen for update. Pure; each workload performs the step (CloneSet in `sync_update`, Advanced
//! StatefulSet and DaemonSet in their reconcile).

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::CloneSetPodUpdateStrategyType;
use kruise_api::appspub::{LifecycleHook, LifecycleStateType};

use super::podutil;
use crate::inplace::NotInPlace;

/// What to do with one Pod chosen for update.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateStep<'a> {
    /// Move the Pod to PreparingUpdate so the in-place-update hook runs before the update.
    /// `handler` is the hook whose labels and finalizers the write puts back (a Pod that
    /// finished an earlier update in place); `None` when the Pod is still hooked.
    PrepareUpdateHook { handler: Option<&'a LifecycleHook> },
    /// Nothing now: the hook still holds the Pod in PreparingUpdate, or it is Updated and there
    /// is no hook to prepare.
    Wait,
    /// Update in place (lifecycle Updating while it runs). The engine may still find it cannot;
    /// [`fallback`] then says what to do.
    InPlace,
    /// Recreate: mark the Pod specified-delete so the scale half replaces it. `reason` is why
    /// not in place; `None` under the ReCreate policy.
    Recreate { reason: Option<NotInPlace> },
    /// Leave the Pod alone and report the refusal as the sync's error.
    Refuse(Refusal),
}

/// Why an update refuses to touch a Pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// The Pod is in a lifecycle state an in-place update must not start from (PreparingDelete).
    BadLifecycle(LifecycleStateType),
    /// The policy is InPlaceOnly and the Pod cannot be updated in place.
    InPlaceOnly(NotInPlace),
}

/// What to do once an in-place update turned out impossible.
#[derive(Debug, Clone, PartialEq)]
pub enum Fallback {
    Recreate(NotInPlace),
    Refuse(Refusal),
}

fn in_place_policy(policy: CloneSetPodUpdateStrategyType) -> bool {
    matches!(
        policy,
        CloneSetPodUpdateStrategyType::InPlaceIfPossible
            | CloneSetPodUpdateStrategyType::InPlaceOnly
    )
}

/// Never recreate under InPlaceOnly; otherwise recreate.
pub fn fallback(policy: CloneSetPodUpdateStrategyType, reason: NotInPlace) -> Fallback {
    if policy == CloneSetPodUpdateStrategyType::InPlaceOnly {
        Fallback::Refuse(Refusal::InPlaceOnly(reason))
    } else {
        Fallback::Recreate(reason)
    }
}

/// The step for `pod` under `policy`, with `hook` the CloneSet's `lifecycle.inPlaceUpdate`.
/// `can_in_place` (upstream `CanUpdateInPlace` between the Pod's revision and the update
/// revision) is only evaluated under an in-place policy.
pub fn update_step<'a>(
    policy: CloneSetPodUpdateStrategyType,
    pod: &Pod,
    hook: Option<&'a LifecycleHook>,
    can_in_place: impl FnOnce() -> Result<(), NotInPlace>,
) -> UpdateStep<'a> {
    if !in_place_policy(policy) {
        return UpdateStep::Recreate { reason: None };
    }
    if let Err(reason) = can_in_place() {
        return match fallback(policy, reason) {
            Fallback::Recreate(r) => UpdateStep::Recreate { reason: Some(r) },
            Fallback::Refuse(r) => UpdateStep::Refuse(r),
        };
    }
    match podutil::lifecycle_state(pod) {
        None | Some(LifecycleStateType::PreparingNormal) | Some(LifecycleStateType::Normal) => {
            if podutil::is_hooked(hook, pod) {
                return UpdateStep::PrepareUpdateHook { handler: None };
            }
        }
        Some(LifecycleStateType::Updated) => {
            return match hook {
                Some(h) => UpdateStep::PrepareUpdateHook { handler: Some(h) },
                None => UpdateStep::Wait,
            };
        }
        Some(LifecycleStateType::PreparingUpdate) => {
            if podutil::is_hooked(hook, pod) {
                return UpdateStep::Wait;
            }
        }
        Some(LifecycleStateType::Updating) => {}
        Some(s @ LifecycleStateType::PreparingDelete) => {
            return UpdateStep::Refuse(Refusal::BadLifecycle(s));
        }
    }
    UpdateStep::InPlace
}

#[cfg(test)]
mod tests;
