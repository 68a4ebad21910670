//! The kubelet's view of a container, recovered from the labels and annotations it stamps on
//! every CRI container. These names belong to the kubelet (k8s.io/kubelet/pkg/types and
//! pkg/kubelet/kuberuntime/labels.go), not to Kruise, which is why they are defined here.

use std::collections::HashMap;

use k8s_cri::v1 as cri;
use k8s_openapi::api::core::v1::{ContainerPort, LifecycleHandler};

pub const POD_NAME_LABEL: &str = "io.kubernetes.pod.name";
pub const POD_NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
pub const POD_UID_LABEL: &str = "io.kubernetes.pod.uid";
pub const CONTAINER_NAME_LABEL: &str = "io.kubernetes.container.name";
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";
pub const CONTAINER_RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
pub const POD_TERMINATION_GRACE_PERIOD_ANNOTATION: &str =
    "io.kubernetes.pod.terminationGracePeriod";
pub const POD_DELETION_GRACE_PERIOD_ANNOTATION: &str = "io.kubernetes.pod.deletionGracePeriod";
pub const CONTAINER_PRESTOP_HANDLER_ANNOTATION: &str = "io.kubernetes.container.preStopHandler";
pub const CONTAINER_PORTS_ANNOTATION: &str = "io.kubernetes.container.ports";

/// Runtime name the kubelet prefixes container IDs with (`containerd://<id>`); containerd and
/// CRI-O report their own name through CRI Version.
pub fn container_id_with_runtime(runtime_name: &str, id: &str) -> String {
    format!("{runtime_name}://{id}")
}

/// Splits `containerd://abc` into (`containerd`, `abc`).
pub fn split_container_id(full: &str) -> Option<(&str, &str)> {
    let (t, id) = full.split_once("://")?;
    if t.is_empty() || id.is_empty() {
        None
    } else {
        Some((t, id))
    }
}

/// Container state, as the CRI enumerates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Created,
    Running,
    Exited,
    Unknown,
}

impl From<i32> for State {
    fn from(v: i32) -> Self {
        match cri::ContainerState::try_from(v) {
            Ok(cri::ContainerState::ContainerCreated) => State::Created,
            Ok(cri::ContainerState::ContainerRunning) => State::Running,
            Ok(cri::ContainerState::ContainerExited) => State::Exited,
            _ => State::Unknown,
        }
    }
}

/// One container of a pod as the runtime sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerInfo {
    /// Bare runtime id (no `runtime://` prefix).
    pub id: String,
    pub name: String,
    pub pod_uid: String,
    pub pod_name: String,
    pub pod_namespace: String,
    /// The kubelet's container hash (`io.kubernetes.container.hash`, hex in the annotation).
    pub hash: u64,
    pub restart_count: i32,
    pub state: State,
    /// Nanoseconds since the epoch, as the CRI reports them.
    pub created_at: i64,
    pub started_at: i64,
    pub image_ref: String,
    pub pod_sandbox_id: String,
    /// Grace period the kubelet would use (deletion grace, else termination grace), seconds.
    pub grace_seconds: Option<i64>,
    /// The container's preStop hook, as the kubelet recorded it.
    pub pre_stop: Option<LifecycleHandler>,
    pub ports: Vec<ContainerPort>,
}

/// Parses the kubelet hash annotation. The kubelet writes it with `strconv.FormatUint(h, 16)`.
pub fn parse_hash(annotations: &HashMap<String, String>) -> u64 {
    annotations
        .get(CONTAINER_HASH_ANNOTATION)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

fn parse_restart_count(annotations: &HashMap<String, String>) -> i32 {
    annotations
        .get(CONTAINER_RESTART_COUNT_ANNOTATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl ContainerInfo {
    /// Builds the view from a CRI ContainerStatus plus the sandbox id from ListContainers (the
    /// status message does not carry it).
    pub fn from_status(status: &cri::ContainerStatus, pod_sandbox_id: &str) -> Self {
        let label = |k: &str| status.labels.get(k).cloned().unwrap_or_default();
        ContainerInfo {
            id: status.id.clone(),
            name: label(CONTAINER_NAME_LABEL),
            pod_uid: label(POD_UID_LABEL),
            pod_name: label(POD_NAME_LABEL),
            pod_namespace: label(POD_NAMESPACE_LABEL),
            hash: parse_hash(&status.annotations),
            restart_count: parse_restart_count(&status.annotations),
            state: State::from(status.state),
            created_at: status.created_at,
            started_at: status.started_at,
            image_ref: status.image_ref.clone(),
            pod_sandbox_id: pod_sandbox_id.to_string(),
            grace_seconds: [
                POD_DELETION_GRACE_PERIOD_ANNOTATION,
                POD_TERMINATION_GRACE_PERIOD_ANNOTATION,
            ]
            .iter()
            .find_map(|k| status.annotations.get(*k).and_then(|v| v.parse().ok())),
            pre_stop: status
                .annotations
                .get(CONTAINER_PRESTOP_HANDLER_ANNOTATION)
                .and_then(|v| serde_json::from_str(v).ok()),
            ports: status
                .annotations
                .get(CONTAINER_PORTS_ANNOTATION)
                .and_then(|v| serde_json::from_str(v).ok())
                .unwrap_or_default(),
        }
    }
}

/// The newest container with this name, which is what the kubelet reports for the pod (older
/// attempts may still exist as exited containers).
pub fn newest_by_name<'a>(
    containers: &'a [ContainerInfo],
    name: &str,
) -> Option<&'a ContainerInfo> {
    containers
        .iter()
        .filter(|c| c.name == name)
        .max_by_key(|c| c.created_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(id: &str, name: &str, created: i64, hash: &str) -> cri::ContainerStatus {
        let mut s = cri::ContainerStatus {
            id: id.into(),
            created_at: created,
            state: cri::ContainerState::ContainerRunning as i32,
            ..Default::default()
        };
        s.labels.insert(CONTAINER_NAME_LABEL.into(), name.into());
        s.labels.insert(POD_UID_LABEL.into(), "uid-1".into());
        s.annotations
            .insert(CONTAINER_HASH_ANNOTATION.into(), hash.into());
        s.annotations
            .insert(CONTAINER_RESTART_COUNT_ANNOTATION.into(), "2".into());
        s.annotations
            .insert(POD_TERMINATION_GRACE_PERIOD_ANNOTATION.into(), "45".into());
        s.annotations.insert(
            CONTAINER_PRESTOP_HANDLER_ANNOTATION.into(),
            r#"{"exec":{"command":["sh","-c","sleep 1"]}}"#.into(),
        );
        s.annotations.insert(
            CONTAINER_PORTS_ANNOTATION.into(),
            r#"[{"name":"http","containerPort":80,"protocol":"TCP"}]"#.into(),
        );
        s
    }

    #[test]
    fn hash_is_hex_like_the_kubelet_writes_it() {
        let info = ContainerInfo::from_status(&status("a", "main", 1, "1f2e3d4c"), "sb");
        assert_eq!(info.hash, 0x1f2e_3d4c);
        assert_eq!(info.restart_count, 2);
        assert_eq!(info.state, State::Running);
        assert_eq!(info.pod_uid, "uid-1");
        assert_eq!(info.pod_sandbox_id, "sb");
        assert_eq!(info.grace_seconds, Some(45));
        let cmd = info.pre_stop.and_then(|h| h.exec).and_then(|e| e.command);
        assert_eq!(cmd.map(|c| c.len()), Some(3));
        assert_eq!(info.ports[0].container_port, 80);
        let bad = ContainerInfo::from_status(&status("a", "main", 1, "zz"), "sb");
        assert_eq!(bad.hash, 0);
    }

    #[test]
    fn newest_attempt_wins() {
        let cs = vec![
            ContainerInfo::from_status(&status("old", "main", 1, "1"), ""),
            ContainerInfo::from_status(&status("new", "main", 5, "1"), ""),
            ContainerInfo::from_status(&status("side", "sidecar", 9, "1"), ""),
        ];
        assert_eq!(
            newest_by_name(&cs, "main").map(|c| c.id.as_str()),
            Some("new")
        );
        assert!(newest_by_name(&cs, "nope").is_none());
    }

    #[test]
    fn container_ids_round_trip() {
        let full = container_id_with_runtime("containerd", "abc");
        assert_eq!(split_container_id(&full), Some(("containerd", "abc")));
        assert_eq!(split_container_id("abc"), None);
        assert_eq!(split_container_id("containerd://"), None);
    }
}
