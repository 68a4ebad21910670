//! Hot upgrade of a sidecar pair (upstream `pkg/control/sidecarcontrol/util_hotupgrade.go`,
//! `UpgradeSidecarContainer`, and the reset in `pkg/controller/sidecarset/sidecarset_hotupgrade.go`),
//! as pure decisions.
//!
//! A hot-upgrade sidecar lives in two containers, `NAME-1` and `NAME-2`; the working-container
//! annotation names the one serving, the other idles on `hotUpgradeEmptyImage`. On an image
//! change, one update gives the idle container the new image and makes it the working one, with
//! the version annotations its `SIDECARSET_VERSION`/`_ALT` environment reads at start
//! ([`Step::Start`]): the new container knows it has an older one to take over from. Once it
//! runs the new image and the Pod is ready, the older one goes back to the empty image
//! ([`Step::Reset`]), so one of the two always runs the sidecar.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::policy::v1alpha1::pubcontrol;
use kruise_api::{keys, sidecarset as wire};

/// The next step for one hot-upgrade sidecar of one Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Give `container` the new image and make it the working one (upstream
    /// `UpgradeSidecarContainer` and `updateHotUpgradeContainerInPod`).
    Start {
        /// The sidecar's name in the SidecarSet.
        sidecar: String,
        /// The container that gets the new image and becomes the working one.
        container: String,
        /// The other container of the pair, still running the old version.
        older: String,
        /// The SidecarSet's image.
        image: String,
    },
    /// The working container runs the new image and the Pod is ready: put the older one on the
    /// empty image (upstream `flipPodSidecarContainerDo`).
    Reset {
        /// The container that goes to the empty image.
        older: String,
        /// The working container.
        working: String,
        /// `hotUpgradeEmptyImage`.
        empty: String,
    },
    /// Started: the working container still starts the new image, or the Pod is not ready.
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

/// The working container of a sidecar and the other one (upstream `GetPodHotUpgradeContainers`:
/// `NAME-1` only when the annotation says so, otherwise `NAME-2`).
pub fn pair(pod: &Pod, sidecar: &str) -> (String, String) {
    let (first, second) = wire::hot_upgrade_container_names(sidecar);
    if working_containers(pod).get(sidecar) == Some(&first) {
        (first, second)
    } else {
        (second, first)
    }
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

fn status<'a>(
    pod: &'a Pod,
    container: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == container)
}

/// Whether a container whose image was changed in place, from `before_image_id`, runs the
/// change (upstream `IsSidecarContainerUpdateCompleted`): its imageID moved, or its status
/// already shows the spec's image (the kubelet never restarted it because the spec came back
/// to what it ran, as when a hot upgrade returns to the first image before the emptied
/// container was stopped).
pub fn restarted_since(pod: &Pod, container: &str, before_image_id: &str) -> bool {
    let spec = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == container))
        .and_then(|c| c.image.as_deref());
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|l| l.iter().find(|s| s.name == container))
        .is_some_and(|s| {
            s.image_id != before_image_id
                || spec.is_some_and(|i| pubcontrol::same_image(i, &s.image))
        })
}

/// Whether the container runs, is ready, and has restarted since its upgrade was recorded
/// (the in-place state keeps the imageID it ran before; [`restarted_since`]).
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
    status(pod, container).is_some_and(|s| {
        s.ready
            && s.state.as_ref().is_some_and(|st| st.running.is_some())
            && recorded
                .as_deref()
                .is_none_or(|r| restarted_since(pod, container, r))
    })
}

/// Upstream `isHotUpgradingReady`: the Pod is Ready, or every container but the pairs' idle
/// ones is.
fn hot_upgrading_ready(set: &SidecarSet, pod: &Pod) -> bool {
    let pod_ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if pod_ready {
        return true;
    }
    let idle: Vec<String> = set
        .spec
        .containers
        .iter()
        .filter(|c| c.is_hot_upgrade())
        .map(|c| pair(pod, &c.container.name).1)
        .collect();
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|s| !idle.contains(&s.name))
        .all(|s| s.ready)
}

/// Upstream `findContainerToHotUpgrade`: the container on the empty image first, else the one
/// that is not ready, else the older one. Returns (to upgrade, the other).
fn container_to_upgrade(pod: &Pod, set_name: &str, sidecar: &str, empty: &str) -> (String, String) {
    let (first, second) = wire::hot_upgrade_container_names(sidecar);
    if spec_image(pod, &first) == Some(empty) {
        return (first, second);
    }
    if spec_image(pod, &second) == Some(empty) {
        return (second, first);
    }
    let ready =
        |c: &str| status(pod, c).is_some_and(|s| s.ready) && runs_new_image(pod, set_name, c);
    match (ready(&first), ready(&second)) {
        (true, false) => (second, first),
        (false, true) => (first, second),
        _ => {
            let (working, older) = pair(pod, sidecar);
            (older, working)
        }
    }
}

/// The next step of every hot-upgrade sidecar of the Pod that is not done: not yet on the
/// SidecarSet's image, or upgraded with the older container not yet reset.
pub fn steps(set: &SidecarSet, pod: &Pod) -> Vec<Step> {
    let set_name = set.metadata.name.as_deref().unwrap_or_default();
    let mut out = Vec::new();
    for sc in set.spec.containers.iter().filter(|c| c.is_hot_upgrade()) {
        let name = &sc.container.name;
        let empty = sc.upgrade_strategy.hot_upgrade_empty_image.as_str();
        let (working, older) = pair(pod, name);
        let want = sc.container.image.clone().unwrap_or_default();
        let (Some(work_image), Some(older_image)) =
            (spec_image(pod, &working), spec_image(pod, &older))
        else {
            // Not injected as a pair (injected before the sidecar became hot): nothing to do.
            continue;
        };
        if work_image != want {
            let (container, other) = container_to_upgrade(pod, set_name, name, empty);
            // Upstream changes nothing when the container kept is on the image already.
            if spec_image(pod, &other) != Some(want.as_str()) {
                out.push(Step::Start {
                    sidecar: name.clone(),
                    container,
                    older: other,
                    image: want,
                });
            }
        } else if older_image != empty {
            out.push(
                if runs_new_image(pod, set_name, &working) && hot_upgrading_ready(set, pod) {
                    Step::Reset {
                        older,
                        working,
                        empty: empty.to_owned(),
                    }
                } else {
                    Step::Wait
                },
            );
        }
    }
    out
}

/// Whether a hot upgrade of the Pod is under way (started, the older container not reset yet):
/// the Pod is not consistent with the SidecarSet until then.
pub fn in_progress(set: &SidecarSet, pod: &Pod) -> bool {
    steps(set, pod)
        .iter()
        .any(|s| matches!(s, Step::Reset { .. } | Step::Wait))
}

/// The annotations a [`Step::Start`] writes with the new image (upstream
/// `updateHotUpgradeContainerInPod`): the new container's version is the SidecarSet's
/// resourceVersion and its alternate the older one's version; the older one's alternate is the
/// new version. The working-container annotation is written by the caller, whole.
pub fn start_versions(
    pod: &Pod,
    set_version: &str,
    container: &str,
    older: &str,
) -> BTreeMap<String, String> {
    let version = |c: &str| format!("{}{c}", keys::SIDECARSET_VERSION_ANNOTATION_PREFIX);
    let alt = |c: &str| format!("{}{c}", keys::SIDECARSET_VERSION_ALT_ANNOTATION_PREFIX);
    let older_version = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&version(older)).cloned())
        .unwrap_or_default();
    BTreeMap::from([
        (version(container), set_version.to_owned()),
        (alt(container), older_version),
        (alt(older), set_version.to_owned()),
    ])
}

/// The annotations a [`Step::Reset`] writes (upstream: the emptied container's version and the
/// working one's alternate go to "0").
pub fn reset_versions(older: &str, working: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            format!("{}{older}", keys::SIDECARSET_VERSION_ANNOTATION_PREFIX),
            "0".to_owned(),
        ),
        (
            format!(
                "{}{working}",
                keys::SIDECARSET_VERSION_ALT_ANNOTATION_PREFIX
            ),
            "0".to_owned(),
        ),
    ])
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
        // What the kubelet reports runs: the empty image until proxy-2's imageID moved.
        let two_runs = if two_id == "id-empty" { "empty:1" } else { two };
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
                {"name": "proxy-2", "image": two_runs, "imageID": two_id, "ready": two_ready,
                 "restartCount": 0, "state": {"running": {}}}]}}))
        .expect("pod")
    }

    /// The Pod as just injected: proxy-1 works, proxy-2 idles.
    fn injected() -> Pod {
        let mut p = pod("proxy-1", "p:1", "empty:1", true, "id-empty");
        p.metadata.annotations.get_or_insert_default().extend([
            (
                "version.sidecarset.kruise.io/proxy-1".to_owned(),
                "1".to_owned(),
            ),
            (
                "versionalt.sidecarset.kruise.io/proxy-1".to_owned(),
                "0".to_owned(),
            ),
            (
                "version.sidecarset.kruise.io/proxy-2".to_owned(),
                "0".to_owned(),
            ),
            (
                "versionalt.sidecarset.kruise.io/proxy-2".to_owned(),
                "1".to_owned(),
            ),
        ]);
        p
    }

    #[test]
    fn the_new_image_goes_to_the_idle_container_which_becomes_the_working_one() {
        let p = injected();
        assert_eq!(
            steps(&set("p:2"), &p),
            vec![Step::Start {
                sidecar: "proxy".into(),
                container: "proxy-2".into(),
                older: "proxy-1".into(),
                image: "p:2".into()
            }]
        );
        assert!(steps(&set("p:1"), &p).is_empty());
        assert!(!in_progress(&set("p:2"), &p));
        // Upstream's versions: the new container gets the SidecarSet's resourceVersion and,
        // as its alternate, the older one's version; the older one's alternate is the new one.
        assert_eq!(
            start_versions(&p, "4711", "proxy-2", "proxy-1"),
            BTreeMap::from([
                (
                    "version.sidecarset.kruise.io/proxy-2".to_owned(),
                    "4711".to_owned()
                ),
                (
                    "versionalt.sidecarset.kruise.io/proxy-2".to_owned(),
                    "1".to_owned()
                ),
                (
                    "versionalt.sidecarset.kruise.io/proxy-1".to_owned(),
                    "4711".to_owned()
                ),
            ])
        );
    }

    #[test]
    fn the_older_container_is_reset_once_the_new_one_serves_and_the_pod_is_ready() {
        let s = set("p:2");
        // Started (proxy-2 works on p:2) but the kubelet still runs the empty image: wait.
        assert_eq!(
            steps(&s, &pod("proxy-2", "p:1", "p:2", true, "id-empty")),
            vec![Step::Wait]
        );
        // Runs the new image, not ready yet: wait.
        assert_eq!(
            steps(&s, &pod("proxy-2", "p:1", "p:2", false, "id-2")),
            vec![Step::Wait]
        );
        let ready = pod("proxy-2", "p:1", "p:2", true, "id-2");
        assert!(in_progress(&s, &ready));
        assert_eq!(
            steps(&s, &ready),
            vec![Step::Reset {
                older: "proxy-1".into(),
                working: "proxy-2".into(),
                empty: "empty:1".into()
            }]
        );
        assert_eq!(
            reset_versions("proxy-1", "proxy-2"),
            BTreeMap::from([
                (
                    "version.sidecarset.kruise.io/proxy-1".to_owned(),
                    "0".to_owned()
                ),
                (
                    "versionalt.sidecarset.kruise.io/proxy-2".to_owned(),
                    "0".to_owned()
                ),
            ])
        );
        // After the reset: done.
        let done = pod("proxy-2", "empty:1", "p:2", true, "id-2");
        assert!(steps(&s, &done).is_empty());
        assert!(!in_progress(&s, &done));
        // The next image goes to proxy-1, the one on the empty image.
        assert_eq!(
            steps(&set("p:3"), &done),
            vec![Step::Start {
                sidecar: "proxy".into(),
                container: "proxy-1".into(),
                older: "proxy-2".into(),
                image: "p:3".into()
            }]
        );
    }

    #[test]
    fn back_to_the_first_image_before_the_kubelet_emptied_it_the_pair_flips_back() {
        // v1 → v2 started on proxy-2 and proxy-1 was set to the empty image, but the spec
        // went back to v1 (recording the v1 imageID proxy-1 still ran) before the kubelet
        // stopped it: proxy-1 never restarts, and serves the version the spec names.
        let mut p = pod("proxy-1", "p:1", "p:2", true, "id-2");
        p.metadata.annotations.get_or_insert_default().insert(
            keys::SIDECARSET_INPLACE_UPDATE_STATE_ANNOTATION.to_owned(),
            "{\"s\":{\"revision\":\"h\",\"updateTimestamp\":\"2026-01-01T00:00:00Z\",\"lastContainerStatuses\":{\"proxy-1\":{\"imageID\":\"id-1\"}}}}".to_owned(),
        );
        assert_eq!(
            steps(&set("p:1"), &p),
            vec![Step::Reset {
                older: "proxy-2".into(),
                working: "proxy-1".into(),
                empty: "empty:1".into()
            }]
        );
    }

    #[test]
    fn without_an_annotation_the_second_container_is_the_working_one_as_upstream() {
        let mut p = injected();
        p.metadata
            .annotations
            .get_or_insert_default()
            .remove(keys::SIDECARSET_WORKING_HOT_UPGRADE_CONTAINER_ANNOTATION);
        assert_eq!(
            pair(&p, "proxy"),
            ("proxy-2".to_owned(), "proxy-1".to_owned())
        );
    }
}
