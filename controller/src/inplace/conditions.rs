//! The InPlaceUpdateReady condition and readiness: whether a pod must leave service for an
//! update, the condition to write when it starts and ends, and the kubelet's Ready recomputation
//! so traffic stops at once. Pure: `now` is given.

use super::spec::UpdateOptions;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::appspub::UpdateSpec;
use kruise_api::keys::{self, k8s};
use kruise_api::pod::{condition, set_condition};

/// Whether the pod declares the InPlaceUpdateReady readiness gate.
pub fn has_readiness_gate(pod: &Pod) -> bool {
    kruise_api::pod::has_readiness_gate(pod, keys::INPLACE_UPDATE_READY)
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
        k8s::CONDITION_TRUE
    } else {
        k8s::CONDITION_FALSE
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
    if condition(pod, k8s::POD_READY).is_none()
        || condition(pod, k8s::CONTAINERS_READY).is_none_or(|c| c.status != k8s::CONDITION_TRUE)
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
            Some(c) if c.status != k8s::CONDITION_TRUE => Some(format!(
                "the status of pod readiness gate \"{gate}\" is not \"True\", but {}",
                c.status
            )),
            Some(_) => None,
        })
        .collect();
    let ready = if unready.is_empty() {
        PodCondition {
            type_: k8s::POD_READY.to_string(),
            status: k8s::CONDITION_TRUE.to_string(),
            last_transition_time: Some(Time(now)),
            ..Default::default()
        }
    } else {
        PodCondition {
            type_: k8s::POD_READY.to_string(),
            status: k8s::CONDITION_FALSE.to_string(),
            reason: Some(k8s::REASON_READINESS_GATES_NOT_READY.to_string()),
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
            .any(|p| p.restart_policy == k8s::RESIZE_RESTART_CONTAINER && touches(&p.resource_name))
    });
    restarts && has_readiness_gate(pod)
}
