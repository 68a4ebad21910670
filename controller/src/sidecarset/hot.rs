//! Hot upgrade of a sidecar pair (upstream `pkg/control/sidecarcontrol/hotupgrade.go` and the
//! flip in `pkg/controller/sidecarset/sidecarset_hotupgrade.go`), as pure decisions.
//!
//! A hot-upgrade sidecar lives in two containers, `NAME-1` and `NAME-2`; the working-container
//! annotation names the one serving, the other idles on `hotUpgradeEmptyImage`. On an image
//! change the idle one is given the new image first ([`Step::Start`]); once the kubelet runs it
//! and it is ready, the annotation moves to it and the old one goes back to the empty image
//! ([`Step::Flip`]), so one of the two always runs the sidecar.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::{keys, sidecarset as wire};

/// The next step for one hot-upgrade sidecar of one Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Give the idle container the new image (upstream `updateHotUpgradeContainerInPod`).
    Start {
        /// The idle container.
        container: String,
        /// The SidecarSet's image.
        image: String,
    },
    /// The idle container runs the new image and is ready: make it the working one and put the
    /// old one on the empty image (upstream `flipPodSidecarContainerDo`).
    Flip {
        /// The sidecar's name in the SidecarSet.
        sidecar: String,
        /// The container that becomes the working one.
        to: String,
        /// The container that goes to the empty image.
        from: String,
        /// `hotUpgradeEmptyImage`.
        empty: String,
    },
    /// The idle container still starts the new image.
    Wait,
}

/// The Pod's working-container map (sidecar name to container name).
pub fn working_containers(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION))
        .and_then(|v| wire::parse_working_containers(v).ok())
        .unwrap_or_default()
}

fn spec_image<'a>(pod: &'a Pod, container: &str) -> Option<&'a str> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == container)?
        .image
        .as_deref()
}

/// Whether the container runs, is ready, and no longer runs the image recorded before its
/// upgrade (the in-place state keeps that imageID).
fn runs_new_image(pod: &Pod, set_name: &str, container: &str) -> bool {
    let recorded = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION))
        .and_then(|v| wire::parse_inplace_states(v).ok())
        .and_then(|m| m.get(set_name).cloned())
        .and_then(|s| s.last_container_statuses.get(container).cloned())
        .map(|c| c.image_id);
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find(|s| s.name == container)
        .is_some_and(|s| {
            s.ready
                && s.state.as_ref().is_some_and(|st| st.running.is_some())
                && recorded.as_deref().is_none_or(|r| r != s.image_id)
        })
}

/// The next step of every hot-upgrade sidecar of the Pod whose working container does not run
/// the SidecarSet's image yet.
pub fn steps(set: &SidecarSet, pod: &Pod) -> Vec<Step> {
    let set_name = set.metadata.name.as_deref().unwrap_or_default();
    let working = working_containers(pod);
    let mut out = Vec::new();
    for sc in set.spec.containers.iter().filter(|c| c.is_hot_upgrade()) {
        let name = &sc.container.name;
        let (first, second) = wire::hot_upgrade_container_names(name);
        let work = working.get(name).cloned().unwrap_or(first.clone());
        let idle = if work == first { second } else { first };
        let want = sc.container.image.clone().unwrap_or_default();
        if spec_image(pod, &work).is_none() || spec_image(pod, &idle).is_none() {
            // Not injected as a pair (injected before the sidecar became hot): nothing to do.
            continue;
        }
        if spec_image(pod, &work) == Some(want.as_str()) {
            continue;
        }
        out.push(if spec_image(pod, &idle) != Some(want.as_str()) {
            Step::Start {
                container: idle,
                image: want,
            }
        } else if runs_new_image(pod, set_name, &idle) {
            Step::Flip {
                sidecar: name.clone(),
                to: idle,
                from: work,
                empty: sc.upgrade_strategy.hot_upgrade_empty_image.clone(),
            }
        } else {
            Step::Wait
        });
    }
    out
}

/// Whether a hot upgrade of the Pod is under way (started, not yet flipped): the Pod is not
/// consistent with the SidecarSet until the flip.
pub fn in_progress(set: &SidecarSet, pod: &Pod) -> bool {
    steps(set, pod)
        .iter()
        .any(|s| matches!(s, Step::Flip { .. } | Step::Wait))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(image: &str) -> SidecarSet {
        serde_json::from_value(json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "s"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": image,
                    "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]}}))
        .expect("set")
    }

    fn pod(working: &str, one: &str, two: &str, two_ready: bool, two_id: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "annotations": {
                keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION:
                    format!("{{\"proxy\":\"{working}\"}}"),
                keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION:
                    "{\"s\":{\"revision\":\"h\",\"updateTimestamp\":\"2026-01-01T00:00:00Z\",\"lastContainerStatuses\":{\"proxy-2\":{\"imageID\":\"id-empty\"}}}}"}},
            "spec": {"containers": [{"name": "app", "image": "a"},
                {"name": "proxy-1", "image": one}, {"name": "proxy-2", "image": two}]},
            "status": {"containerStatuses": [
                {"name": "proxy-1", "image": one, "imageID": "id-1", "ready": true, "restartCount": 0,
                 "state": {"running": {}}},
                {"name": "proxy-2", "image": two, "imageID": two_id, "ready": two_ready,
                 "restartCount": 0, "state": {"running": {}}}]}}))
        .expect("pod")
    }

    #[test]
    fn new_image_goes_to_the_idle_container_first() {
        let p = pod("proxy-1", "p:1", "empty:1", true, "id-empty");
        assert_eq!(
            steps(&set("p:2"), &p),
            vec![Step::Start {
                container: "proxy-2".into(),
                image: "p:2".into()
            }]
        );
        assert!(steps(&set("p:1"), &p).is_empty());
        assert!(!in_progress(&set("p:2"), &p));
    }

    #[test]
    fn flips_only_once_the_idle_container_runs_the_new_image_ready() {
        let s = set("p:2");
        // Patched but the kubelet still runs the empty image: wait.
        assert_eq!(
            steps(&s, &pod("proxy-1", "p:1", "p:2", true, "id-empty")),
            vec![Step::Wait]
        );
        // Runs the new image, not ready yet: wait.
        assert_eq!(
            steps(&s, &pod("proxy-1", "p:1", "p:2", false, "id-2")),
            vec![Step::Wait]
        );
        let ready = pod("proxy-1", "p:1", "p:2", true, "id-2");
        assert!(in_progress(&s, &ready));
        assert_eq!(
            steps(&s, &ready),
            vec![Step::Flip {
                sidecar: "proxy".into(),
                to: "proxy-2".into(),
                from: "proxy-1".into(),
                empty: "empty:1".into()
            }]
        );
        // After the flip the working container runs the SidecarSet's image: done.
        assert!(steps(&s, &pod("proxy-2", "empty:1", "p:2", true, "id-2")).is_empty());
    }
}
