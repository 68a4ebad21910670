//! The pure admission of a ContainerRecreateRequest against its Pod ([`admit`]), after
//! upstream's `pkg/webhook/containerrecreaterequest` mutating handler: defaults the strategy,
//! stamps the `crr.apps.kruise.io/{active,node-name,pod-uid}` labels and copies each container's
//! preStop, ports and current status (`statusContext`) from the Pod. The manager's CRR
//! controller applies [`admit`] itself to requests created while the webhook was off
//! (`--disable-webhook`), which is why it is pure and public.
//!
//! Every problem found is reported, not just the first, each naming the field and the value.

use std::collections::BTreeSet;
use std::fmt;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainerContext,
    ContainerRecreateRequestFailurePolicyType, ContainerRecreateRequestSpec, ProbeHandler,
};
use kruise_api::keys;

/// Smallest accepted `activeDeadlineSeconds`.
pub const MIN_DEADLINE_SECONDS: i64 = 3;

/// One reason a request cannot be admitted; the text is what a person sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdmitError {
    /// `spec.podName` is empty.
    #[error("spec.podName: Required value: podName can not be empty")]
    NoPodName,
    /// `spec.containers` is empty.
    #[error("spec.containers: Required value: containers list can not be empty")]
    NoContainers,
    /// A container entry without a name.
    #[error("spec.containers[{index}].name: Required value: container name can not be empty")]
    NoContainerName {
        /// Index in `spec.containers`.
        index: usize,
    },
    /// `activeDeadlineSeconds` below [`MIN_DEADLINE_SECONDS`].
    #[error(
        "spec.activeDeadlineSeconds: Invalid value: {0}: can not be less than {MIN_DEADLINE_SECONDS}s"
    )]
    DeadlineTooShort(i64),
    /// A negative grace period.
    #[error("spec.strategy.{field}: Invalid value: {value}: must be a non-negative integer")]
    Negative {
        /// Field under `spec.strategy`.
        field: &'static str,
        /// The value given.
        value: i64,
    },
    /// A failure policy other than Fail or Ignore.
    #[error(
        "spec.strategy.failurePolicy: Unsupported value: {0}: supported values: \"Fail\", \"Ignore\""
    )]
    UnknownFailurePolicy(String),
    /// The same container listed twice.
    #[error(
        "spec.containers[{index}].name: Duplicate value: {name:?}: can not recreate a container more than once"
    )]
    Duplicate {
        /// Index of the second occurrence.
        index: usize,
        /// Container name.
        name: String,
    },
    /// preStop, ports or statusContext given by the user.
    #[error(
        "spec.containers[{index}]: Forbidden: preStop, ports and statusContext of container {name:?} are read-only (copied from the Pod)"
    )]
    ReadOnlyFields {
        /// Index in `spec.containers`.
        index: usize,
        /// Container name.
        name: String,
    },
    /// The Pod does not exist.
    #[error("spec.podName: Not found: Pod {pod:?} not found in namespace {namespace:?}")]
    PodNotFound {
        /// Namespace of the request.
        namespace: String,
        /// `spec.podName`.
        pod: String,
    },
    /// The Pod has finished or is being deleted.
    #[error(
        "Pod {pod:?} is not active ({why}): not allowed to recreate containers in an inactive Pod"
    )]
    InactivePod {
        /// Pod name.
        pod: String,
        /// Its phase, or that it is being deleted.
        why: String,
    },
    /// The Pod is not on a node yet.
    #[error(
        "Pod {pod:?} is pending (not scheduled to a node yet): not allowed to recreate containers in a pending Pod"
    )]
    PendingPod {
        /// Pod name.
        pod: String,
    },
    /// The Pod has no container of that name.
    #[error(
        "spec.containers[{index}].name: Not found: container {name:?} not found in Pod {pod:?} (its containers: {available})"
    )]
    NoContainer {
        /// Index in `spec.containers`.
        index: usize,
        /// Container name.
        name: String,
        /// Pod name.
        pod: String,
        /// The Pod's container names, comma separated.
        available: String,
    },
    /// The kubelet has not reported the container yet.
    #[error(
        "spec.containers[{index}].name: container {name:?} has no status in Pod {pod:?} yet (not reported by the kubelet)"
    )]
    NoStatus {
        /// Index in `spec.containers`.
        index: usize,
        /// Container name.
        name: String,
        /// Pod name.
        pod: String,
    },
    /// The container has not been created yet.
    #[error(
        "spec.containers[{index}].name: container {name:?} of Pod {pod:?} has no containerID yet (not started)"
    )]
    NoContainerId {
        /// Index in `spec.containers`.
        index: usize,
        /// Container name.
        name: String,
        /// Pod name.
        pod: String,
    },
}

/// Every reason a request was refused (never empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection(pub Vec<AdmitError>);

impl fmt::Display for Rejection {
    /// Like apimachinery's aggregate: one error as is, several in brackets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                let parts: Vec<String> = many.iter().map(ToString::to_string).collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

impl std::error::Error for Rejection {}

/// Whether the request already carries what [`admit`] adds (so neither the webhook nor the
/// controller has to do it again).
pub fn is_admitted(crr: &ContainerRecreateRequest) -> bool {
    let labels = crr.metadata.labels.as_ref();
    let has = |k: &str| labels.is_some_and(|l| l.contains_key(k));
    has(keys::CRR_POD_UID_LABEL)
        && has(keys::CRR_NODE_NAME_LABEL)
        && crr
            .spec
            .containers
            .iter()
            .all(|c| c.status_context.is_some())
}

/// What is wrong with the spec alone (no Pod needed).
pub fn spec_errors(spec: &ContainerRecreateRequestSpec) -> Vec<AdmitError> {
    let mut errs = Vec::new();
    if spec.pod_name.is_empty() {
        errs.push(AdmitError::NoPodName);
    }
    if spec.containers.is_empty() {
        errs.push(AdmitError::NoContainers);
    }
    if let Some(d) = spec
        .active_deadline_seconds
        .filter(|d| *d < MIN_DEADLINE_SECONDS)
    {
        errs.push(AdmitError::DeadlineTooShort(d));
    }
    if let Some(s) = &spec.strategy {
        let graces = [
            (
                "terminationGracePeriodSeconds",
                s.termination_grace_period_seconds,
            ),
            ("unreadyGracePeriodSeconds", s.unready_grace_period_seconds),
        ];
        for (field, v) in graces {
            if let Some(value) = v.filter(|v| *v < 0) {
                errs.push(AdmitError::Negative { field, value });
            }
        }
    }
    let mut seen = BTreeSet::new();
    for (index, c) in spec.containers.iter().enumerate() {
        if c.name.is_empty() {
            errs.push(AdmitError::NoContainerName { index });
        } else if !seen.insert(c.name.as_str()) {
            errs.push(AdmitError::Duplicate {
                index,
                name: c.name.clone(),
            });
        }
    }
    errs
}

fn inactive_reason(pod: &Pod) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Some("it is being deleted".to_owned());
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    match phase {
        // The SidecarTerminator ends a job Pod (phase and condition SidecarTerminated) before
        // it asks for the Pod's sidecars to be killed (upstream `isTerminatedBySidecarTerminator`).
        Some("Succeeded" | "Failed") if terminated_by_sidecar_terminator(pod) => None,
        Some(p @ ("Succeeded" | "Failed")) => Some(format!("phase {p}")),
        _ => None,
    }
}

/// The Pod has condition SidecarTerminated (whatever its status, as upstream).
fn terminated_by_sidecar_terminator(pod: &Pod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == keys::SIDECAR_TERMINATED_CONDITION)
}

/// The request as the webhook stores it, or every reason it cannot be admitted.
pub fn admit(
    crr: &ContainerRecreateRequest,
    pod: &Pod,
) -> Result<ContainerRecreateRequest, Rejection> {
    let mut errs = spec_errors(&crr.spec);
    let mut out = crr.clone();
    let pod_name = crr.spec.pod_name.clone();
    let spec = pod.spec.clone().unwrap_or_default();
    let node = spec.node_name.clone().unwrap_or_default();
    if let Some(why) = inactive_reason(pod) {
        errs.push(AdmitError::InactivePod {
            pod: pod_name.clone(),
            why,
        });
    } else if node.is_empty() {
        errs.push(AdmitError::PendingPod {
            pod: pod_name.clone(),
        });
    }
    let strategy = out.spec.strategy.get_or_insert_with(Default::default);
    strategy
        .failure_policy
        .get_or_insert(ContainerRecreateRequestFailurePolicyType::Fail);
    if strategy.termination_grace_period_seconds.is_none() {
        strategy.termination_grace_period_seconds = spec.termination_grace_period_seconds;
    }
    let labels = out.metadata.labels.get_or_insert_with(Default::default);
    labels.insert(keys::CRR_ACTIVE_LABEL.into(), "true".into());
    labels.insert(keys::CRR_NODE_NAME_LABEL.into(), node);
    labels.insert(
        keys::CRR_POD_UID_LABEL.into(),
        pod.metadata.uid.clone().unwrap_or_default(),
    );
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    let available = || {
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        names.join(", ")
    };
    for (index, c) in out.spec.containers.iter_mut().enumerate() {
        if c.pre_stop.is_some() || !c.ports.is_empty() || c.status_context.is_some() {
            errs.push(AdmitError::ReadOnlyFields {
                index,
                name: c.name.clone(),
            });
            continue;
        }
        if c.name.is_empty() {
            continue;
        }
        let Some(pc) = spec.containers.iter().find(|p| p.name == c.name) else {
            errs.push(AdmitError::NoContainer {
                index,
                name: c.name.clone(),
                pod: pod_name.clone(),
                available: available(),
            });
            continue;
        };
        let Some(st) = statuses.iter().find(|s| s.name == c.name) else {
            errs.push(AdmitError::NoStatus {
                index,
                name: c.name.clone(),
                pod: pod_name.clone(),
            });
            continue;
        };
        let id = st.container_id.clone().unwrap_or_default();
        if id.is_empty() {
            errs.push(AdmitError::NoContainerId {
                index,
                name: c.name.clone(),
                pod: pod_name.clone(),
            });
            continue;
        }
        if let Some(h) = pc.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()) {
            c.pre_stop = Some(ProbeHandler {
                exec: h.exec.clone(),
                http_get: h.http_get.clone(),
                tcp_socket: h.tcp_socket.clone(),
            });
            // Named ports of an httpGet hook resolve against the container's ports.
            if h.http_get.is_some() {
                c.ports = pc.ports.clone().unwrap_or_default();
            }
        }
        c.status_context = Some(ContainerRecreateRequestContainerContext {
            container_id: id,
            restart_count: st.restart_count,
        });
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(Rejection(errs))
    }
}
