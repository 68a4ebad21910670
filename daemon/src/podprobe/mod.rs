//! The podprobe duty (upstream `pkg/daemon/podprobe`): runs the custom probes that the manager
//! lists in this node's NodePodProbe, one task per (Pod, probe), and writes their states back
//! into its status ([`writer`]). It watches only its own node's object (by name), so it never
//! probes another node's Pods; a Pod or probe that leaves the spec has its task stopped.

pub mod prober;
pub mod thresholds;
mod tls;
pub mod writer;

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::Probe;
use kruise_api::apps::v1alpha1::{NodePodProbe, PodProbe};
use kruise_runtime::runner;
use kube::Api;
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::criruntime::CriClient;
use prober::Target;
use thresholds::Thresholds;
use writer::Msg;

/// What a task runs; a change restarts the task.
#[derive(Clone, Debug, PartialEq)]
struct Spec {
    target: Target,
    probe: Probe,
}

struct Task {
    spec: Spec,
    stop: CancellationToken,
}

/// The tasks the spec asks for, by (Pod UID, probe name).
fn wanted(pods: &[PodProbe]) -> HashMap<(String, String), Spec> {
    let mut out = HashMap::new();
    for pod in pods {
        for p in &pod.probes {
            out.insert(
                (pod.uid.clone(), p.name.clone()),
                Spec {
                    target: Target {
                        pod_uid: pod.uid.clone(),
                        pod_ip: pod.ip.clone(),
                        container: p.container_name.clone(),
                    },
                    probe: p.probe.clone(),
                },
            );
        }
    }
    out
}

/// Runs the duty until `shutdown`.
pub async fn run(client: kube::Client, cri: CriClient, node: String, shutdown: CancellationToken) {
    let api: Api<NodePodProbe> = Api::all(client);
    let (tx, rx) = futures::channel::mpsc::unbounded();
    let writer = tokio::spawn(writer::run(api.clone(), node.clone(), rx, shutdown.clone()));
    let cfg = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut events = std::pin::pin!(runner::watch_with(api, cfg));
    let mut tasks: HashMap<(String, String), Task> = HashMap::new();
    loop {
        let ev = tokio::select! {
            _ = shutdown.cancelled() => break,
            ev = events.next() => match ev { Some(ev) => ev, None => break },
        };
        let spec = match ev {
            Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => n.spec.pod_probes,
            Ok(watcher::Event::Delete(_)) => Vec::new(),
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "NodePodProbe watch");
                continue;
            }
        };
        sync(&mut tasks, wanted(&spec), &cri, &tx, &shutdown);
        let _ = tx.unbounded_send(Msg::Prune);
    }
    for t in tasks.values() {
        t.stop.cancel();
    }
    let _ = writer.await;
}

/// Stops the tasks no longer wanted or changed, starts the missing ones.
fn sync(
    tasks: &mut HashMap<(String, String), Task>,
    want: HashMap<(String, String), Spec>,
    cri: &CriClient,
    tx: &UnboundedSender<Msg>,
    shutdown: &CancellationToken,
) {
    tasks.retain(|k, t| {
        let keep = want.get(k) == Some(&t.spec);
        if !keep {
            t.stop.cancel();
            tracing::info!(pod_uid = k.0, probe = k.1, "probe stopped");
        }
        keep
    });
    for (key, spec) in want {
        if tasks.contains_key(&key) {
            continue;
        }
        let stop = shutdown.child_token();
        tracing::info!(pod_uid = key.0, probe = key.1, "probe started");
        tokio::spawn(probe_loop(
            key.1.clone(),
            spec.clone(),
            cri.clone(),
            tx.clone(),
            stop.clone(),
        ));
        tasks.insert(key, Task { spec, stop });
    }
}

/// One probe's schedule: `initialDelaySeconds`, then one run every `periodSeconds` (10 s by
/// default), the states filtered by the thresholds.
async fn probe_loop(
    name: String,
    spec: Spec,
    cri: CriClient,
    tx: UnboundedSender<Msg>,
    stop: CancellationToken,
) {
    let p = &spec.probe;
    let delay = Duration::from_secs(p.initial_delay_seconds.unwrap_or(0).max(0) as u64);
    let period = Duration::from_secs(p.period_seconds.unwrap_or(10).max(1) as u64);
    let mut th = Thresholds::new(
        p.success_threshold.unwrap_or(1),
        p.failure_threshold.unwrap_or(3),
    );
    let mut container = None;
    tokio::select! {
        _ = stop.cancelled() => return,
        _ = tokio::time::sleep(delay) => {}
    }
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let (ok, message) = tokio::select! {
            _ = stop.cancelled() => return,
            r = prober::run_once(&cri, &spec.target, p, &mut container) => r,
        };
        if let Some(state) = th.observe(ok) {
            tracing::info!(
                probe = name,
                pod_uid = spec.target.pod_uid,
                state = state.as_str(),
                "probe state"
            );
            let _ = tx.unbounded_send(Msg::Result {
                pod_uid: spec.target.pod_uid.clone(),
                probe: name.clone(),
                state,
                message,
                at: jiff::Timestamp::now(),
            });
        }
    }
}
