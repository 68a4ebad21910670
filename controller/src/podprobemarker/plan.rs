//! The pure half of the PodProbeMarker controller (upstream `syncPodProbeMarker` and
//! `updateNodePodProbes`): which Pods a marker probes, the probes a node's NodePodProbe must
//! list, the marker's status, and the containers a Pod lacks.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::podprobemarker::node_probe_name;
use kruise_api::apps::v1alpha1::{
    ContainerProbe, NodePodProbe, PodProbe, PodProbeMarker, PodProbeMarkerStatus,
};
use kruise_api::selector;
use kube::ResourceExt;

/// Whether the marker's selector picks `pod` (same namespace; an empty selector picks nothing,
/// the webhook refuses one).
pub fn selects(ppm: &PodProbeMarker, pod: &Pod) -> bool {
    pod.namespace() == ppm.namespace()
        && !selector::is_empty(&ppm.spec.selector)
        && selector::matches(&ppm.spec.selector, pod.labels())
}

/// The node of a Pod that can be probed: active (not terminating, not finished) and bound.
pub fn probed_node(pod: &Pod) -> Option<&str> {
    if pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return None;
    }
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

fn container<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == name)
}

/// The marker's probes naming a container `pod` does not have (reported as Events).
pub fn missing_containers<'a>(ppm: &'a PodProbeMarker, pod: &Pod) -> Vec<&'a str> {
    ppm.spec
        .probes
        .iter()
        .filter(|p| container(pod, &p.container_name).is_none())
        .map(|p| p.name.as_str())
        .collect()
}

/// A named port resolved to the container's number, so the daemon (which reads only its
/// NodePodProbe) can connect; an unknown name stays for the daemon to report.
fn resolve_ports(mut probe: Probe, c: &Container) -> Probe {
    let lookup = |port: &mut IntOrString| {
        if let IntOrString::String(name) = port
            && let Some(n) = c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
        {
            *port = IntOrString::Int(n.container_port);
        }
    };
    if let Some(h) = probe.http_get.as_mut() {
        lookup(&mut h.port);
    }
    if let Some(t) = probe.tcp_socket.as_mut() {
        lookup(&mut t.port);
    }
    probe
}

/// The `spec.podProbes` of node `node`'s NodePodProbe: every probed Pod on it with the probes of
/// every marker that selects it (markers by name, probes in marker order), Pods by
/// namespace/name. Pods no marker concerns are left out.
pub fn node_pod_probes<'a>(
    node: &str,
    pods: impl IntoIterator<Item = &'a Pod>,
    markers: &[&PodProbeMarker],
) -> Vec<PodProbe> {
    // A marker being deleted takes its probes off first; its finalizer goes once they are.
    let mut markers: Vec<&PodProbeMarker> = markers
        .iter()
        .copied()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .collect();
    markers.sort_by_key(|m| m.name_any());
    let mut out = BTreeMap::new();
    for pod in pods {
        if probed_node(pod) != Some(node) {
            continue;
        }
        let probes: Vec<ContainerProbe> = markers
            .iter()
            .filter(|m| selects(m, pod))
            .flat_map(|m| {
                m.spec.probes.iter().filter_map(move |p| {
                    let c = container(pod, &p.container_name)?;
                    Some(ContainerProbe {
                        name: node_probe_name(&m.name_any(), &p.name),
                        container_name: p.container_name.clone(),
                        probe: resolve_ports(p.probe.clone(), c),
                        pod_probe_marker_name: m.name_any(),
                    })
                })
            })
            .collect();
        if probes.is_empty() {
            continue;
        }
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        let key = (pod.namespace().unwrap_or_default(), pod.name_any());
        out.insert(
            key.clone(),
            PodProbe {
                name: key.1,
                namespace: key.0,
                uid: pod.uid().unwrap_or_default(),
                ip,
                probes,
            },
        );
    }
    out.into_values().collect()
}

/// Whether a NodePodProbe still lists a probe of marker `ppm` (for a Pod of its namespace):
/// its finalizer stays until none does.
pub fn still_listed(ppm: &PodProbeMarker, npp: &NodePodProbe) -> bool {
    let (ns, name) = (ppm.namespace().unwrap_or_default(), ppm.name_any());
    npp.spec
        .pod_probes
        .iter()
        .any(|p| p.namespace == ns && p.probes.iter().any(|c| c.pod_probe_marker_name == name))
}

/// The marker's status: the generation seen and the active Pods it matches.
pub fn status<'a>(
    ppm: &PodProbeMarker,
    pods: impl IntoIterator<Item = &'a Pod>,
) -> PodProbeMarkerStatus {
    PodProbeMarkerStatus {
        observed_generation: ppm.metadata.generation.unwrap_or_default(),
        matched_pods: pods
            .into_iter()
            .filter(|p| selects(ppm, p) && probed_node(p).is_some())
            .count() as i64,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
