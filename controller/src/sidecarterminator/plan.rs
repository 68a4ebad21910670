//! Pure decisions of the SidecarTerminator: which containers of a job Pod are sidecars, whether
//! the Pod's main containers are done, and what to do about its sidecars. No client, no clock.
//!
//! Ported from upstream `pkg/controller/sidecarterminator`: `utils.go` (`isInterestingPod`,
//! `groupMainSidecarContainers`, `getSidecarContainerNames`), the sequence of `doReconcile` in
//! `sidecar_terminator_controller.go` (`containersCompleted`, `containersSucceeded`, the phase
//! `markJobPodTerminated` writes), `kill_container_action.go` (`filterUncompletedSidecars`, the
//! request `executeKillContainerAction` creates) and `inplace_update_action.go`
//! (`updateSidecarsForInPlaceUpdate`).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::apps::v1beta1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainer,
    ContainerRecreateRequestFailurePolicyType, ContainerRecreateRequestSpec,
    ContainerRecreateRequestStrategy,
};
use kruise_api::keys::{self, k8s};

/// Container names, sorted (so that requests and Events are the same from run to run).
pub type Names = BTreeSet<String>;

const RESTART_NEVER: &str = "Never";
const RESTART_ON_FAILURE: &str = "OnFailure";

fn env<'a>(c: &'a Container, name: &str) -> impl Iterator<Item = &'a str> {
    c.env
        .iter()
        .flatten()
        .filter(move |e| e.name == name)
        .map(|e| e.value.as_deref().unwrap_or_default())
}

/// `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true` (any case), upstream `isNormalSidecar`.
pub fn is_normal_sidecar(c: &Container) -> bool {
    env(c, keys::ENV_TERMINATE_SIDECAR_WHEN_JOB_EXIT).any(|v| v.eq_ignore_ascii_case("true"))
}

/// A normal sidecar that also has `KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true` (any case),
/// upstream `isIgnoreExitCodeSidecar`.
pub fn is_ignore_exit_code_sidecar(c: &Container) -> bool {
    is_normal_sidecar(c)
        && env(c, keys::ENV_TERMINATE_SIDECAR_IGNORE_EXIT_CODE)
            .any(|v| v.eq_ignore_ascii_case("true"))
}

/// The image of the first non-empty `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE`
/// (upstream `isInplaceUpdateSidecar` and `getImageFromEnv`).
pub fn replacement_image(c: &Container) -> Option<&str> {
    env(c, keys::ENV_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE).find(|v| !v.is_empty())
}

/// Either kind of sidecar (upstream `isSidecarContainer`). Only `spec.containers` count:
/// native sidecars (init containers with `restartPolicy: Always`) are the kubelet's business.
pub fn is_sidecar(c: &Container) -> bool {
    is_normal_sidecar(c) || replacement_image(c).is_some()
}

fn containers(pod: &Pod) -> &[Container] {
    pod.spec.as_ref().map_or(&[], |s| s.containers.as_slice())
}

fn statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
}

fn terminated_exit_code(s: &ContainerStatus) -> Option<i32> {
    s.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code)
}

/// (main, sidecars) names (upstream `groupMainSidecarContainers`).
pub fn group(pod: &Pod) -> (Names, Names) {
    let (side, main): (Vec<&Container>, Vec<&Container>) =
        containers(pod).iter().partition(|c| is_sidecar(c));
    let names = |v: Vec<&Container>| -> Names { v.into_iter().map(|c| c.name.clone()).collect() };
    (names(main), names(side))
}

/// Every status is reported and each named container has terminated (upstream
/// `containersCompleted`; with a status missing, nothing counts as completed).
pub fn completed(pod: &Pod, names: &Names) -> bool {
    containers(pod).len() == statuses(pod).len()
        && statuses(pod)
            .iter()
            .filter(|s| names.contains(&s.name))
            .all(|s| terminated_exit_code(s).is_some())
}

/// Every status is reported and each named container has terminated with exit code 0 (upstream
/// `containersSucceeded`).
pub fn succeeded(pod: &Pod, names: &Names) -> bool {
    containers(pod).len() == statuses(pod).len()
        && statuses(pod)
            .iter()
            .filter(|s| names.contains(&s.name))
            .all(|s| terminated_exit_code(s) == Some(0))
}

/// The named containers that have not terminated (upstream `filterUncompletedSidecars`).
pub fn uncompleted(pod: &Pod, names: &Names) -> Names {
    let done: BTreeSet<&str> = statuses(pod)
        .iter()
        .filter(|s| terminated_exit_code(s).is_some())
        .map(|s| s.name.as_str())
        .collect();
    names
        .iter()
        .filter(|n| !done.contains(n.as_str()))
        .cloned()
        .collect()
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// Whether the Pod concerns the SidecarTerminator (upstream `isInterestingPod`): not being
/// deleted, not Pending, restartPolicy Never or OnFailure, with a sidecar still running, and
/// its main containers done — all terminated (Never) or all succeeded (OnFailure, where a
/// failed main container is restarted by the kubelet).
pub fn is_interesting(pod: &Pod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() || phase(pod) == k8s::POD_PENDING {
        return false;
    }
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    let (main, sidecars) = group(pod);
    if sidecars.is_empty() || completed(pod, &sidecars) {
        return false;
    }
    match policy {
        RESTART_NEVER => completed(pod, &main),
        RESTART_ON_FAILURE => succeeded(pod, &main),
        _ => false,
    }
}

/// The sidecars by how they are stopped (upstream `getSidecarContainerNames`). On a
/// virtual-kubelet node only the `_WITH_IMAGE` ones are stopped (by image replacement); on any
/// other node only the `WHEN_JOB_EXIT=true` ones (by a ContainerRecreateRequest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sidecars {
    /// Killed by a request; their exit code counts.
    pub normal: Names,
    /// Killed after the Pod's phase was set from its main containers.
    pub ignore_exit_code: Names,
    /// Image replaced in place (virtual-kubelet nodes).
    pub in_place: Names,
}

impl Sidecars {
    pub fn of(pod: &Pod, virtual_kubelet: bool) -> Self {
        let mut out = Self::default();
        for c in containers(pod) {
            let name = c.name.clone();
            if virtual_kubelet && replacement_image(c).is_some() {
                out.in_place.insert(name);
            } else if !virtual_kubelet && is_ignore_exit_code_sidecar(c) {
                out.ignore_exit_code.insert(name);
            } else if !virtual_kubelet && is_normal_sidecar(c) {
                out.normal.insert(name);
            }
        }
        out
    }
}

/// One thing to do, in order; the shell stops at the first that fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Set these containers' images (name, image) by updating the Pod.
    ReplaceImages(Vec<(String, String)>),
    /// Create the Pod's request killing these containers, unless it already has one.
    Kill(Names),
    /// Set the Pod's phase (Succeeded or Failed, from its main containers) with condition
    /// SidecarTerminated, before its ignored sidecars are killed.
    MarkTerminated { phase: &'static str },
}

/// What to do for `pod` (upstream `doReconcile`), given whether its node is a virtual-kubelet.
pub fn plan(pod: &Pod, virtual_kubelet: bool) -> Vec<Action> {
    if !is_interesting(pod) {
        return Vec::new();
    }
    let sets = Sidecars::of(pod, virtual_kubelet);
    let mut out = Vec::new();
    let in_place = uncompleted(pod, &sets.in_place);
    let replace: Vec<(String, String)> = containers(pod)
        .iter()
        .filter(|c| in_place.contains(&c.name))
        .filter_map(|c| {
            let image = replacement_image(c)?;
            (c.image.as_deref() != Some(image)).then(|| (c.name.clone(), image.to_owned()))
        })
        .collect();
    if !replace.is_empty() {
        out.push(Action::ReplaceImages(replace));
    }
    let normal = uncompleted(pod, &sets.normal);
    if !normal.is_empty() {
        out.push(Action::Kill(normal));
    }
    if sets.ignore_exit_code.is_empty()
        || !completed(pod, &sets.normal)
        || !completed(pod, &sets.in_place)
    {
        return out;
    }
    if !matches!(phase(pod), k8s::POD_SUCCEEDED | k8s::POD_FAILED) {
        let (main, _) = group(pod);
        let phase = if succeeded(pod, &main) {
            k8s::POD_SUCCEEDED
        } else {
            k8s::POD_FAILED
        };
        out.push(Action::MarkTerminated { phase });
    }
    let ignored = uncompleted(pod, &sets.ignore_exit_code);
    if !ignored.is_empty() {
        out.push(Action::Kill(ignored));
    }
    out
}

/// The name of the Pod's request: one per Pod UID, so a second reconcile finds the first's.
pub fn request_name(pod_uid: &str) -> String {
    format!("{}{pod_uid}", keys::SIDECAR_TERMINATION_CRR_PREFIX)
}

/// The request that kills `names` in `pod` (upstream `executeKillContainerAction`): owned by
/// the Pod (so it goes with it), `forceRecreate` (kill even a container that looks fine) and
/// failurePolicy Ignore (carry on past a container that cannot be killed); no deadline and no
/// TTL. The webhook fills in the rest (labels, statusContext, grace period).
pub fn request(pod: &Pod, names: &Names) -> ContainerRecreateRequest {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut crr = ContainerRecreateRequest::new(
        &request_name(&uid),
        ContainerRecreateRequestSpec {
            pod_name: pod_name.clone(),
            containers: names
                .iter()
                .map(|n| ContainerRecreateRequestContainer {
                    name: n.clone(),
                    ..Default::default()
                })
                .collect(),
            strategy: Some(ContainerRecreateRequestStrategy {
                force_recreate: true,
                failure_policy: Some(ContainerRecreateRequestFailurePolicyType::Ignore),
                ..Default::default()
            }),
            active_deadline_seconds: None,
            ttl_seconds_after_finished: None,
        },
    );
    crr.metadata.namespace = pod.metadata.namespace.clone();
    crr.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Pod".to_owned(),
        name: pod_name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    crr
}

/// The status patch of [`Action::MarkTerminated`] (upstream `markJobPodTerminated`): the phase
/// and condition SidecarTerminated; strategic merge keys conditions by type, so the others stay.
pub fn terminated_patch(phase: &str, now: jiff::Timestamp) -> serde_json::Value {
    serde_json::json!({
        "status": {
            "phase": phase,
            "conditions": [{
                "type": keys::SIDECAR_TERMINATED_CONDITION,
                "status": k8s::CONDITION_TRUE,
                "lastTransitionTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
                "message": keys::SIDECAR_TERMINATED_MESSAGE,
            }]
        }
    })
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
