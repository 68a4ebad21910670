//! What upstream's ContainerRecreateRequest mutating webhook does on CREATE, as a pure function
//! of the request and its pod: default the strategy, stamp the active/pod-uid/node-name labels,
//! and copy each container's preStop, ports and current status (`statusContext`) from the pod.
//!
//! Kruise-rs has no CRR webhook yet, so the CRR controller applies this at the first reconcile of
//! a request that lacks it (the daemon ignores requests until the labels are there). It only
//! depends on kruise-api and k8s-openapi so the webhook can adopt it unchanged (it cannot call
//! into kruise-manager, which depends on the webhook crate).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::{
    ContainerRecreateRequest, ContainerRecreateRequestContainerContext,
    ContainerRecreateRequestFailurePolicyType, ProbeHandler,
};
use kruise_api::keys;

/// Smallest accepted `activeDeadlineSeconds`.
pub const MIN_DEADLINE_SECONDS: i64 = 3;

/// Why a request cannot be admitted; the text is what a person sees.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AdmitError {
    #[error("podName can not be empty")]
    NoPodName,
    #[error("containers list can not be null")]
    NoContainers,
    #[error("activeDeadlineSeconds can not be less than {MIN_DEADLINE_SECONDS}s")]
    DeadlineTooShort,
    #[error("{0} must be non-negative integer")]
    Negative(&'static str),
    #[error("not allowed to recreate containers in an inactive Pod")]
    InactivePod,
    #[error("not allowed to recreate containers in a pending Pod")]
    PendingPod,
    #[error("can not recreate {0} multi times")]
    Duplicate(String),
    #[error("preStop, ports, statusContext in container are ready-only fields")]
    ReadOnlyFields,
    #[error("container {0} not found in Pod")]
    NoContainer(String),
    #[error("not found {0} containerStatus in Pod Status")]
    NoStatus(String),
    #[error("no containerID in {0} containerStatus, maybe the container has not been initialized")]
    NoContainerId(String),
}

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

fn pod_is_active(pod: &Pod) -> bool {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default();
    pod.metadata.deletion_timestamp.is_none() && phase != "Succeeded" && phase != "Failed"
}

/// The request as the webhook would have stored it.
pub fn admit(
    crr: &ContainerRecreateRequest,
    pod: &Pod,
) -> Result<ContainerRecreateRequest, AdmitError> {
    let mut out = crr.clone();
    if out.spec.pod_name.is_empty() {
        return Err(AdmitError::NoPodName);
    }
    if out.spec.containers.is_empty() {
        return Err(AdmitError::NoContainers);
    }
    if out
        .spec
        .active_deadline_seconds
        .is_some_and(|d| d < MIN_DEADLINE_SECONDS)
    {
        return Err(AdmitError::DeadlineTooShort);
    }
    let strategy = out.spec.strategy.get_or_insert_with(Default::default);
    if strategy
        .termination_grace_period_seconds
        .is_some_and(|s| s < 0)
    {
        return Err(AdmitError::Negative("terminationGracePeriodSeconds"));
    }
    if strategy.unready_grace_period_seconds.is_some_and(|s| s < 0) {
        return Err(AdmitError::Negative("unreadyGracePeriodSeconds"));
    }
    strategy
        .failure_policy
        .get_or_insert(ContainerRecreateRequestFailurePolicyType::Fail);
    if !pod_is_active(pod) {
        return Err(AdmitError::InactivePod);
    }
    let spec = pod.spec.clone().unwrap_or_default();
    let node = spec.node_name.clone().unwrap_or_default();
    if node.is_empty() {
        return Err(AdmitError::PendingPod);
    }
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
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    let mut seen = BTreeSet::new();
    for c in &mut out.spec.containers {
        if !seen.insert(c.name.clone()) {
            return Err(AdmitError::Duplicate(c.name.clone()));
        }
        if c.pre_stop.is_some() || !c.ports.is_empty() || c.status_context.is_some() {
            return Err(AdmitError::ReadOnlyFields);
        }
        let pc = spec
            .containers
            .iter()
            .find(|p| p.name == c.name)
            .ok_or_else(|| AdmitError::NoContainer(c.name.clone()))?;
        let st = statuses
            .iter()
            .find(|s| s.name == c.name)
            .ok_or_else(|| AdmitError::NoStatus(c.name.clone()))?;
        let id = st.container_id.clone().unwrap_or_default();
        if id.is_empty() {
            return Err(AdmitError::NoContainerId(c.name.clone()));
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
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, ContainerStatus, ExecAction, HTTPGetAction, Lifecycle,
        LifecycleHandler, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use kruise_api::apps::v1beta1::{
        ContainerRecreateRequestContainer, ContainerRecreateRequestSpec,
    };

    fn pod() -> Pod {
        let mut p = Pod {
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                termination_grace_period_seconds: Some(20),
                containers: vec![
                    Container {
                        name: "a".into(),
                        lifecycle: Some(Lifecycle {
                            pre_stop: Some(LifecycleHandler {
                                http_get: Some(HTTPGetAction {
                                    port: IntOrString::String("http".into()),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ports: Some(vec![ContainerPort {
                            name: Some("http".into()),
                            container_port: 8080,
                            ..Default::default()
                        }]),
                        ..Default::default()
                    },
                    Container {
                        name: "b".into(),
                        lifecycle: Some(Lifecycle {
                            pre_stop: Some(LifecycleHandler {
                                exec: Some(ExecAction {
                                    command: Some(vec!["sleep".into(), "1".into()]),
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                container_statuses: Some(vec![
                    ContainerStatus {
                        name: "a".into(),
                        container_id: Some("containerd://a1".into()),
                        restart_count: 2,
                        ..Default::default()
                    },
                    ContainerStatus {
                        name: "b".into(),
                        container_id: None,
                        ..Default::default()
                    },
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        p.metadata.uid = Some("pod-uid".into());
        p
    }

    fn crr(names: &[&str]) -> ContainerRecreateRequest {
        ContainerRecreateRequest::new(
            "r",
            ContainerRecreateRequestSpec {
                pod_name: "p".into(),
                containers: names
                    .iter()
                    .map(|n| ContainerRecreateRequestContainer {
                        name: n.to_string(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
        )
    }

    #[test]
    fn fills_labels_strategy_and_context() {
        let c = crr(&["a"]);
        assert!(!is_admitted(&c));
        let out = admit(&c, &pod()).expect("admitted");
        assert!(is_admitted(&out));
        let l = out.metadata.labels.as_ref().expect("labels");
        assert_eq!(l[keys::CRR_ACTIVE_LABEL], "true");
        assert_eq!(l[keys::CRR_NODE_NAME_LABEL], "n1");
        assert_eq!(l[keys::CRR_POD_UID_LABEL], "pod-uid");
        let s = out.spec.strategy.as_ref().expect("strategy");
        assert_eq!(
            s.failure_policy,
            Some(ContainerRecreateRequestFailurePolicyType::Fail)
        );
        assert_eq!(s.termination_grace_period_seconds, Some(20));
        let c0 = &out.spec.containers[0];
        assert_eq!(
            c0.status_context,
            Some(ContainerRecreateRequestContainerContext {
                container_id: "containerd://a1".into(),
                restart_count: 2
            })
        );
        assert!(c0.pre_stop.as_ref().is_some_and(|p| p.http_get.is_some()));
        assert_eq!(c0.ports.len(), 1);
    }

    #[test]
    fn rejections() {
        let mut p = pod();
        let cases: Vec<(ContainerRecreateRequest, Pod, AdmitError)> = vec![
            (crr(&[]), p.clone(), AdmitError::NoContainers),
            (
                crr(&["a", "a"]),
                p.clone(),
                AdmitError::Duplicate("a".into()),
            ),
            (crr(&["x"]), p.clone(), AdmitError::NoContainer("x".into())),
            (
                crr(&["b"]),
                p.clone(),
                AdmitError::NoContainerId("b".into()),
            ),
            (
                {
                    let mut c = crr(&["a"]);
                    c.spec.active_deadline_seconds = Some(1);
                    c
                },
                p.clone(),
                AdmitError::DeadlineTooShort,
            ),
        ];
        for (c, pod, want) in cases {
            assert_eq!(admit(&c, &pod), Err(want));
        }
        p.spec.as_mut().expect("spec").node_name = None;
        assert_eq!(admit(&crr(&["a"]), &p), Err(AdmitError::PendingPod));
        p.status.as_mut().expect("status").phase = Some("Failed".into());
        assert_eq!(admit(&crr(&["a"]), &p), Err(AdmitError::InactivePod));
    }
}
