use k8s_openapi::api::core::v1::{
    Container, ContainerPort, ExecAction, Pod, PodSpec, PodStatus, Probe, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_api::apps::v1alpha1::{PodContainerProbe, PodProbeMarker, PodProbeMarkerSpec};

use super::*;

fn pod(name: &str, node: &str, containers: &[&str]) -> Pod {
    let mut p = Pod::default();
    p.metadata.name = Some(name.into());
    p.metadata.namespace = Some("ns".into());
    p.metadata.uid = Some(format!("uid-{name}"));
    p.metadata.labels = Some([("app".to_owned(), "a".to_owned())].into());
    p.spec = Some(PodSpec {
        node_name: Some(node.into()),
        containers: containers
            .iter()
            .map(|c| Container {
                name: (*c).into(),
                ports: Some(vec![ContainerPort {
                    name: Some("web".into()),
                    container_port: 8080,
                    ..Default::default()
                }]),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    p.status = Some(PodStatus {
        phase: Some("Running".into()),
        pod_ip: Some("10.0.0.9".into()),
        ..Default::default()
    });
    p
}

fn marker(name: &str, probes: &[(&str, &str)]) -> PodProbeMarker {
    let mut m = PodProbeMarker::new(
        name,
        PodProbeMarkerSpec {
            selector: LabelSelector {
                match_labels: Some([("app".to_owned(), "a".to_owned())].into()),
                ..Default::default()
            },
            probes: probes
                .iter()
                .map(|(n, c)| PodContainerProbe {
                    name: (*n).into(),
                    container_name: (*c).into(),
                    probe: Probe {
                        exec: (*n == "exec").then(|| ExecAction {
                            command: Some(vec!["true".into()]),
                        }),
                        tcp_socket: (*n != "exec").then(|| TCPSocketAction {
                            port: IntOrString::String("web".into()),
                            host: None,
                        }),
                        ..Default::default()
                    },
                    ..Default::default()
                })
                .collect(),
        },
    );
    m.metadata.namespace = Some("ns".into());
    m.metadata.generation = Some(2);
    m
}

#[test]
fn a_node_lists_its_pods_probes_named_marker_hash_probe() {
    let pods = [
        pod("b", "n1", &["main"]),
        pod("a", "n1", &["main"]),
        pod("c", "n2", &["main"]),
    ];
    let (m2, m1) = (
        marker("m2", &[("exec", "main")]),
        marker("m1", &[("tcp", "main")]),
    );
    let got = node_pod_probes("n1", pods.iter(), &[&m2, &m1]);
    assert_eq!(
        got.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    let names: Vec<&str> = got[0].probes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["m1#tcp", "m2#exec"]);
    assert_eq!(got[0].ip, "10.0.0.9");
    assert_eq!(got[0].uid, "uid-a");
    // The named port is resolved from the container.
    let port = &got[0].probes[0]
        .probe
        .tcp_socket
        .as_ref()
        .expect("tcp")
        .port;
    assert_eq!(port, &IntOrString::Int(8080));
}

#[test]
fn finished_terminating_unmatched_or_containerless_pods_are_left_out() {
    let mut done = pod("done", "n1", &["main"]);
    done.status.as_mut().expect("status").phase = Some("Succeeded".into());
    let mut gone = pod("gone", "n1", &["main"]);
    gone.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    let mut other = pod("other", "n1", &["main"]);
    other.metadata.labels = None;
    let nocontainer = pod("noc", "n1", &["side"]);
    let m = marker("m", &[("exec", "main")]);
    let pods = [done, gone, other, nocontainer.clone()];
    assert!(node_pod_probes("n1", pods.iter(), &[&m]).is_empty());
    assert_eq!(missing_containers(&m, &nocontainer), ["exec"]);
    assert!(node_pod_probes("n1", pods.iter(), &[]).is_empty());
    let st = status(&m, pods.iter());
    assert_eq!((st.observed_generation, st.matched_pods), (2, 1));
}
