//! Writes results into the node's NodePodProbe status, batched and conflict-safe: updates that
//! arrive within [`BATCH`] go in one write, read-modify-write with the object's
//! resourceVersion, retried on conflict. A write also drops the results of Pods and probes the
//! spec no longer lists.

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::apps::v1alpha1::{
    ContainerProbeState, NodePodProbe, NodePodProbeStatus, PodProbeStatus, ProbeState,
};
use kube::Api;
use kube::api::PostParams;
use tokio_util::sync::CancellationToken;

/// Updates gathered into one write.
const BATCH: Duration = Duration::from_millis(500);
/// Conflict retries of one write before the batch waits for the next update.
const RETRIES: usize = 5;

/// A message to the writer.
#[derive(Debug)]
pub enum Msg {
    /// A probe's new state.
    Result {
        pod_uid: String,
        probe: String,
        state: ProbeState,
        message: String,
        at: jiff::Timestamp,
    },
    /// The spec changed: drop results of what it no longer lists.
    Prune,
}

type Pending = HashMap<(String, String), (ProbeState, String, jiff::Timestamp)>;

/// The status `npp` should have: the pending states merged into its current one (a transition
/// time only when the state changes), limited to the Pods and probes of its spec.
pub fn merged_status(npp: &NodePodProbe, pending: &Pending) -> NodePodProbeStatus {
    let current = npp.status.clone().unwrap_or_default();
    let mut out = Vec::new();
    for pod in &npp.spec.pod_probes {
        let old = current.pod_probe_statuses.iter().find(|s| s.uid == pod.uid);
        let mut states = Vec::new();
        for probe in &pod.probes {
            let prev = old.and_then(|o| o.probe_states.iter().find(|s| s.name == probe.name));
            match pending.get(&(pod.uid.clone(), probe.name.clone())) {
                Some((state, message, at)) => {
                    let changed = prev.is_none_or(|p| p.state != *state);
                    let t = Time(*at);
                    states.push(ContainerProbeState {
                        name: probe.name.clone(),
                        state: *state,
                        last_probe_time: Some(t.clone()),
                        last_transition_time: if changed {
                            Some(t)
                        } else {
                            prev.and_then(|p| p.last_transition_time.clone())
                        },
                        message: message.clone(),
                    });
                }
                None => states.extend(prev.cloned()),
            }
        }
        if !states.is_empty() {
            out.push(PodProbeStatus {
                name: pod.name.clone(),
                namespace: pod.namespace.clone(),
                uid: pod.uid.clone(),
                probe_states: states,
            });
        }
    }
    NodePodProbeStatus {
        pod_probe_statuses: out,
    }
}

/// Whether a result only repeats what the status already says (no write needed).
fn unchanged(npp: &NodePodProbe, new: &NodePodProbeStatus) -> bool {
    let cur = npp.status.clone().unwrap_or_default();
    let key = |s: &NodePodProbeStatus| -> Vec<(String, String, ProbeState, String)> {
        s.pod_probe_statuses
            .iter()
            .flat_map(|p| {
                p.probe_states
                    .iter()
                    .map(|x| (p.uid.clone(), x.name.clone(), x.state, x.message.clone()))
            })
            .collect()
    };
    key(&cur) == key(new)
}

/// Runs the writer until shutdown or until the senders are gone.
pub async fn run(
    api: Api<NodePodProbe>,
    node: String,
    mut rx: UnboundedReceiver<Msg>,
    shutdown: CancellationToken,
) {
    let mut pending: Pending = HashMap::new();
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => return,
            m = rx.next() => match m { Some(m) => m, None => return },
        };
        let mut batch = vec![first];
        let deadline = tokio::time::sleep(BATCH);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                m = rx.next() => match m { Some(m) => batch.push(m), None => break },
            }
        }
        for m in batch {
            if let Msg::Result {
                pod_uid,
                probe,
                state,
                message,
                at,
            } = m
            {
                pending.insert((pod_uid, probe), (state, message, at));
            }
        }
        match write(&api, &node, &pending).await {
            Ok(()) => pending.clear(),
            // Kept for the next batch (a result is never lost to a failed write).
            Err(e) => tracing::warn!(error = %e, "cannot write NodePodProbe status"),
        }
    }
}

async fn write(api: &Api<NodePodProbe>, node: &str, pending: &Pending) -> Result<(), kube::Error> {
    for _ in 0..RETRIES {
        let Some(mut npp) = api.get_opt(node).await? else {
            return Ok(());
        };
        let status = merged_status(&npp, pending);
        if unchanged(&npp, &status) {
            return Ok(());
        }
        npp.status = Some(status);
        match api.replace_status(node, &PostParams::default(), &npp).await {
            Ok(_) => {
                tracing::info!(results = pending.len(), "NodePodProbe status written");
                return Ok(());
            }
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps::v1alpha1::{ContainerProbe, PodProbe};

    fn npp(probes: &[(&str, &[&str])]) -> NodePodProbe {
        let mut n = NodePodProbe::new("n1", Default::default());
        n.spec.pod_probes = probes
            .iter()
            .map(|(uid, ps)| PodProbe {
                name: format!("pod-{uid}"),
                namespace: "ns".into(),
                uid: (*uid).into(),
                ip: String::new(),
                probes: ps
                    .iter()
                    .map(|p| ContainerProbe {
                        name: (*p).into(),
                        ..Default::default()
                    })
                    .collect(),
            })
            .collect();
        n
    }

    fn ts(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).expect("valid")
    }

    #[test]
    fn a_transition_time_moves_only_when_the_state_changes_and_gone_pods_are_dropped() {
        let mut n = npp(&[("u1", &["m#a", "m#b"])]);
        let mut p: Pending = HashMap::new();
        p.insert(
            ("u1".into(), "m#a".into()),
            (ProbeState::Succeeded, "ok".into(), ts(10)),
        );
        p.insert(
            ("gone".into(), "m#a".into()),
            (ProbeState::Failed, String::new(), ts(10)),
        );
        let s = merged_status(&n, &p);
        assert_eq!(s.pod_probe_statuses.len(), 1);
        assert_eq!(s.pod_probe_statuses[0].probe_states.len(), 1);
        n.status = Some(s);
        // Same state later (a daemon restart re-reports it): the transition time stays.
        let mut p2: Pending = HashMap::new();
        p2.insert(
            ("u1".into(), "m#a".into()),
            (ProbeState::Succeeded, "ok".into(), ts(20)),
        );
        let s2 = merged_status(&n, &p2);
        assert!(unchanged(&n, &s2));
        let st = &s2.pod_probe_statuses[0].probe_states[0];
        assert_eq!(st.last_transition_time, Some(Time(ts(10))));
        p2.insert(
            ("u1".into(), "m#a".into()),
            (ProbeState::Failed, "no".into(), ts(30)),
        );
        let s3 = merged_status(&n, &p2);
        assert_eq!(
            s3.pod_probe_statuses[0].probe_states[0].last_transition_time,
            Some(Time(ts(30)))
        );
        // The Pod leaves the spec: its results go.
        n.spec.pod_probes.clear();
        assert!(
            merged_status(&n, &HashMap::new())
                .pod_probe_statuses
                .is_empty()
        );
    }
}
