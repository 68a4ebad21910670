//! `podprobemarker status NAME` (`ppm`): what a PodProbeMarker's probes say about each Pod it
//! matches — the state kruise-daemon last reported in the node's NodePodProbe, since when, and
//! the Pod condition the manager set from it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::podprobemarker::node_probe_name;
use kruise_api::apps::v1alpha1::{NodePodProbe, PodProbeMarker};
use kruise_api::selector;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::ctx::Ctx;
use crate::error::{Result, exit, kube_err};

/// One line of the table.
#[derive(Debug, PartialEq)]
pub struct Row {
    pub pod: String,
    pub probe: String,
    pub state: String,
    pub since: String,
    pub condition: String,
    pub message: String,
}

/// The rows for `ppm` over its Pods and their nodes' NodePodProbes (by node name).
pub fn rows(ppm: &PodProbeMarker, pods: &[Pod], npps: &BTreeMap<String, NodePodProbe>) -> Vec<Row> {
    let mut out = Vec::new();
    for pod in pods {
        let uid = pod.uid().unwrap_or_default();
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let states = npps
            .get(&node)
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.pod_probe_statuses.iter().find(|p| p.uid == uid));
        for probe in &ppm.spec.probes {
            let full = node_probe_name(&ppm.name_any(), &probe.name);
            let st = states.and_then(|s| s.probe_states.iter().find(|p| p.name == full));
            let cond = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == probe.pod_condition_type))
                .map(|c| format!("{}={}", c.type_, c.status));
            out.push(Row {
                pod: pod.name_any(),
                probe: probe.name.clone(),
                state: st.map_or("-".into(), |s| s.state.as_str().to_owned()),
                since: st
                    .and_then(|s| s.last_transition_time.as_ref())
                    .map_or("-".into(), |t| t.0.to_string()),
                condition: cond.unwrap_or_else(|| "-".into()),
                message: st.map(|s| s.message.replace('\n', " ")).unwrap_or_default(),
            });
        }
    }
    out
}

/// The table as printed.
pub fn render(rows: &[Row]) -> String {
    let head = ["POD", "PROBE", "STATE", "SINCE", "CONDITION", "MESSAGE"];
    let cells: Vec<[&str; 6]> = rows
        .iter()
        .map(|r| {
            [
                &*r.pod,
                &*r.probe,
                &*r.state,
                &*r.since,
                &*r.condition,
                &*r.message,
            ]
        })
        .collect();
    let mut width = head.map(str::len);
    for c in &cells {
        for (w, v) in width.iter_mut().zip(c) {
            *w = (*w).max(v.chars().count());
        }
    }
    let line = |c: [&str; 6]| {
        let parts: Vec<String> = c
            .iter()
            .zip(width)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect();
        parts.join("  ").trim_end().to_owned()
    };
    let mut out = line(head);
    for c in cells {
        out.push('\n');
        out.push_str(&line(c));
    }
    out
}

pub async fn status(ctx: &Ctx, name: &str) -> Result<i32> {
    let api: Api<PodProbeMarker> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let ppm = api.get(name).await.map_err(kube_err)?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let sel = selector::to_selector_string(&ppm.spec.selector).unwrap_or_default();
    let pods = pods
        .list(&ListParams::default().labels(&sel))
        .await
        .map_err(kube_err)?
        .items;
    let npp_api: Api<NodePodProbe> = Api::all(ctx.client.clone());
    let mut npps = BTreeMap::new();
    for node in pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
    {
        if !npps.contains_key(&node)
            && let Some(n) = npp_api.get_opt(&node).await.map_err(kube_err)?
        {
            npps.insert(node, n);
        }
    }
    let matched = ppm.status.as_ref().map_or(0, |s| s.matched_pods);
    println!("podprobemarker/{name}: {matched} matched Pods");
    println!("{}", render(&rows(&ppm, &pods, &npps)));
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use kruise_api::apps::v1alpha1::{
        ContainerProbeState, NodePodProbeStatus, PodContainerProbe, PodProbeMarkerSpec,
        PodProbeStatus, ProbeState,
    };

    #[test]
    fn a_pod_row_shows_the_reported_state_and_its_condition() {
        let ppm = PodProbeMarker::new(
            "m",
            PodProbeMarkerSpec {
                probes: vec![PodContainerProbe {
                    name: "healthy".into(),
                    pod_condition_type: "x.io/ok".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.uid = Some("u".into());
        pod.spec = Some(PodSpec {
            node_name: Some("n".into()),
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
                type_: "x.io/ok".into(),
                status: "False".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let mut npp = NodePodProbe::new("n", Default::default());
        npp.status = Some(NodePodProbeStatus {
            pod_probe_statuses: vec![PodProbeStatus {
                uid: "u".into(),
                probe_states: vec![ContainerProbeState {
                    name: "m#healthy".into(),
                    state: ProbeState::Failed,
                    message: "exit code 1".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        });
        let r = rows(&ppm, &[pod.clone()], &[("n".to_owned(), npp)].into());
        assert_eq!(
            render(&r),
            "POD  PROBE    STATE   SINCE  CONDITION      MESSAGE\np    healthy  Failed  -      x.io/ok=False  exit code 1"
        );
        assert_eq!(rows(&ppm, &[pod], &BTreeMap::new())[0].state, "-");
    }
}
