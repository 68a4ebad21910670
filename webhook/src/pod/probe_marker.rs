//! PodProbeMarker on serverless Pods (upstream `pkg/webhook/pod/mutating/pod_probe_marker.go`,
//! gate `EnablePodProbeMarkerOnServerless`), the last `/mutate-pod` slot: a new Pod that
//! PodProbeMarkers select gets their probes in `kruise.io/podprobe` (JSON, without
//! `markerPolicy`) and their names in `kruise.io/podprobemarker-list`. A serverless node's own
//! agent reads the first and reports each probe's result as the Pod condition it names; the
//! manager turns the conditions into the markers' labels and annotations. Upstream writes them
//! on every selected Pod, whatever node it lands on.
//!
//! A probe is written when it names a condition type and a container of the Pod (a regular
//! container or a native sidecar, an init container with `restartPolicy: Always`), and no
//! probe written before it names the same condition type or the same container and probe
//! name.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{PodContainerProbe, PodProbeMarker};
use kruise_api::{keys, selector};
use kube::ResourceExt;

/// The markers whose probes a new Pod gets, in the order their probes are taken (upstream
/// `GetPodProbeMarkerForPod`): those `kruise.io/podprobemarker-list` names, if the Pod carries
/// a non-empty one (unknown names skipped); otherwise those whose non-empty selector matches
/// the Pod's labels, by name (the order the API server lists them in).
pub fn markers_for<'a>(pod: &Pod, markers: &'a [PodProbeMarker]) -> Vec<&'a PodProbeMarker> {
    let listed = pod
        .annotations()
        .get(keys::POD_PROBE_MARKER_LIST_ANNOTATION)
        .filter(|s| !s.is_empty());
    if let Some(list) = listed {
        return list
            .split(',')
            .filter_map(|name| markers.iter().find(|m| m.name_any() == name))
            .collect();
    }
    let mut out: Vec<&PodProbeMarker> = markers
        .iter()
        .filter(|m| {
            !selector::is_empty(&m.spec.selector)
                && selector::matches(&m.spec.selector, pod.labels())
        })
        .collect();
    out.sort_by_key(|m| m.name_any());
    out
}

/// The containers a probe may name: the regular ones and the native sidecars.
fn probed_containers(pod: &Pod) -> BTreeSet<&str> {
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeSet::new();
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    spec.containers
        .iter()
        .chain(sidecars)
        .map(|c| c.name.as_str())
        .collect()
}

/// Writes the probes of `markers` (from [`markers_for`]) into the Pod's annotations; whether
/// the Pod changed. A Pod no probe applies to is left as it is.
pub fn inject(pod: &mut Pod, markers: &[&PodProbeMarker]) -> Result<bool, serde_json::Error> {
    let containers = probed_containers(pod);
    let mut conditions = BTreeSet::new();
    let mut keys_seen = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut probes: Vec<PodContainerProbe> = Vec::new();
    for m in markers {
        for p in &m.spec.probes {
            let key = (p.container_name.as_str(), p.name.as_str());
            if p.pod_condition_type.is_empty()
                || conditions.contains(p.pod_condition_type.as_str())
                || keys_seen.contains(&key)
                || !containers.contains(p.container_name.as_str())
            {
                continue;
            }
            conditions.insert(p.pod_condition_type.as_str());
            keys_seen.insert(key);
            names.insert(m.name_any());
            // The agent needs no marker policy: the manager applies it.
            probes.push(PodContainerProbe {
                marker_policy: Vec::new(),
                ..p.clone()
            });
        }
    }
    if probes.is_empty() {
        return Ok(false);
    }
    let body = serde_json::to_string(&probes)?;
    let list = names.into_iter().collect::<Vec<_>>().join(",");
    let annotations = pod.annotations_mut();
    annotations.insert(keys::POD_PROBE_MARKER_ANNOTATION.to_owned(), body);
    annotations.insert(keys::POD_PROBE_MARKER_LIST_ANNOTATION.to_owned(), list);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kruise_api::apps::v1alpha1::{PodProbeMarkerSpec, ProbeMarkerPolicy, ProbeState};
    use std::collections::BTreeMap;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn container(name: &str, always: bool) -> Container {
        Container {
            name: name.into(),
            restart_policy: always.then(|| "Always".to_owned()),
            ..Default::default()
        }
    }

    /// Upstream's test Pod: two containers, a plain init container and a native sidecar.
    fn pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("pod-1".into());
        p.metadata.namespace = Some("test".into());
        p.metadata.labels = Some(map(&[("app", "web")]));
        p.metadata.annotations = Some(map(&[("version", "test")]));
        p.spec = Some(PodSpec {
            init_containers: Some(vec![container("init-1", false), container("init-2", true)]),
            containers: vec![container("main", false), container("envoy", false)],
            ..Default::default()
        });
        p
    }

    fn probe(container: &str, name: &str, condition: &str) -> PodContainerProbe {
        PodContainerProbe {
            name: name.into(),
            container_name: container.into(),
            pod_condition_type: condition.into(),
            marker_policy: vec![ProbeMarkerPolicy {
                state: ProbeState::Succeeded,
                labels: map(&[("ok", "true")]),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn marker(name: &str, app: &str, probes: Vec<PodContainerProbe>) -> PodProbeMarker {
        let mut m = PodProbeMarker::new(
            name,
            PodProbeMarkerSpec {
                selector: LabelSelector {
                    match_labels: Some(map(&[("app", app)])),
                    ..Default::default()
                },
                probes,
            },
        );
        m.metadata.namespace = Some("test".into());
        m
    }

    fn run(pod: &mut Pod, markers: &[PodProbeMarker]) -> bool {
        let selected = markers_for(pod, markers);
        inject(pod, &selected).expect("encodes")
    }

    /// Upstream's "selector matched, but no conditionType": a probe without a condition type,
    /// one for a container the Pod lacks: nothing written.
    #[test]
    fn probes_without_condition_or_container_write_nothing() {
        let mut p = pod();
        let m = marker(
            "healthy",
            "web",
            vec![
                probe("main", "healthy", ""),
                probe("invalid", "healthy", "game.kruise.io/healthy"),
            ],
        );
        assert!(!run(&mut p, &[m]));
        assert_eq!(p.metadata.annotations, Some(map(&[("version", "test")])));
    }

    /// Upstream's "selector matched": one probe per condition type, a native sidecar counts as
    /// a container and a plain init container does not, the policy left out, names sorted.
    #[test]
    fn one_probe_per_condition_type_without_policy() {
        let mut p = pod();
        let markers = [
            marker(
                "init",
                "web",
                vec![
                    probe("init-1", "init", "game.kruise.io/init"),
                    probe("init-2", "init", "game.kruise.io/init"),
                ],
            ),
            marker(
                "healthy",
                "web",
                vec![
                    probe("main", "healthy", "game.kruise.io/healthy"),
                    probe("envoy", "healthy", "game.kruise.io/healthy"),
                ],
            ),
            marker("other", "db", vec![probe("main", "x", "game.kruise.io/x")]),
        ];
        assert!(run(&mut p, &markers));
        assert_eq!(
            p.metadata.annotations,
            Some(map(&[
                ("version", "test"),
                (
                    keys::POD_PROBE_MARKER_ANNOTATION,
                    r#"[{"name":"healthy","containerName":"main","probe":{},"podConditionType":"game.kruise.io/healthy"},{"name":"init","containerName":"init-2","probe":{},"podConditionType":"game.kruise.io/init"}]"#
                ),
                (keys::POD_PROBE_MARKER_LIST_ANNOTATION, "healthy,init"),
            ]))
        );
    }

    #[test]
    fn a_listed_pod_takes_the_named_markers_only() {
        let mut p = pod();
        p.annotations_mut().insert(
            keys::POD_PROBE_MARKER_LIST_ANNOTATION.to_owned(),
            "b,gone".to_owned(),
        );
        let markers = [
            marker("a", "web", vec![probe("main", "a", "x.io/a")]),
            marker("b", "db", vec![probe("main", "b", "x.io/b")]),
        ];
        let names: Vec<String> = markers_for(&p, &markers)
            .iter()
            .map(|m| m.name_any())
            .collect();
        assert_eq!(names, ["b"]);
    }

    #[test]
    fn an_empty_selector_selects_nothing() {
        let mut m = marker("a", "web", vec![probe("main", "a", "x.io/a")]);
        m.spec.selector = LabelSelector::default();
        assert!(markers_for(&pod(), &[m]).is_empty());
    }
}
