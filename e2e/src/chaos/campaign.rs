//! One campaign: the workloads made, then round after round of rollouts with the plan's
//! faults injected while they run, then the invariants checked over the recorded history.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use super::faults;
use super::history::{History, Recorder};
use super::invariants::{self, ROLLOUT, Violation};
use super::schedule::{self, Fault, Step};
use super::workloads;
use crate::TestNamespace;

/// How long a round's rollouts may take after its last fault was repaired.
pub const ROUND_TIMEOUT: Duration = Duration::from_secs(240);

/// What to run.
#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub kills: usize,
    pub per_round: usize,
    pub faults: Vec<Fault>,
    /// The longest pause before a fault (ms).
    pub max_delay_ms: u64,
    /// Break an expectation on purpose: in the first round the campaign itself creates a
    /// second Pod for a slot of the in-place CloneSet, which the invariants must catch.
    pub fake_duplicate: bool,
}

/// One fault as injected.
#[derive(Clone, Debug, Serialize)]
pub struct Injection {
    pub round: usize,
    pub fault: Fault,
    pub t_ms: u64,
    /// What was done, or why the fault was not injected or not repaired.
    pub outcome: Result<String, String>,
    /// When the cluster was healthy again (ms), if it was.
    pub repaired_ms: Option<u64>,
}

/// One round of rollouts.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    pub start_ms: u64,
    pub end_ms: u64,
    /// The workloads whose rollout (or request) did not complete in time.
    pub incomplete: Vec<&'static str>,
}

/// Everything a campaign did and saw.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub seed: u64,
    pub kills: usize,
    pub namespace: String,
    pub plan: Vec<Step>,
    pub injections: Vec<Injection>,
    pub rounds: Vec<Round>,
    pub violations: Vec<Violation>,
    pub history: History,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
            && self.injections.iter().all(|i| i.repaired_ms.is_some())
            && self.injections.len() == self.plan.len()
    }
}

fn ms(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Runs the campaign on the cluster of `client` (Kruise-rs installed from deploy/).
pub async fn run(client: &Client, opts: &Options) -> Result<Outcome, String> {
    let t0 = Instant::now();
    let plan = schedule::plan(
        opts.seed,
        opts.kills,
        opts.per_round,
        &opts.faults,
        opts.max_delay_ms,
    );
    faults::wait_healthy(client).await?;
    let ns = TestNamespace::create(client, "chaos")
        .await
        .map_err(|e| format!("namespace: {e}"))?;
    let sidecar = format!("{}-sidecar", ns.name);
    tracing::info!(namespace = %ns.name, seed = opts.seed, kills = opts.kills, "campaign starts");
    let recorder = Recorder::start(client, &ns.name, &workloads::kinds(), t0);
    let result = rounds(client, opts, &ns.name, &sidecar, &plan, &recorder, t0).await;
    let _ = crate::sidecarset::api(client)
        .delete(&sidecar, &DeleteParams::default())
        .await;
    let (injections, rounds, mut violations) = result?;
    // The watches catch up with the last changes before the history is closed.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let history = recorder.stop();
    let mut expect = workloads::expect();
    expect.kubelet_kills_ms = injections
        .iter()
        .filter(|i| i.fault == Fault::Kubelet && i.outcome.is_ok())
        .map(|i| i.t_ms)
        .collect();
    violations.extend(invariants::check(&history, &expect));
    let last_fault = injections
        .iter()
        .filter_map(|i| i.repaired_ms)
        .max()
        .unwrap_or(0);
    let end = rounds.last().map_or(0, |r| r.end_ms);
    let unix_now = jiff::Timestamp::now().as_second();
    let last_fault_unix =
        unix_now - i64::try_from((ms(t0).saturating_sub(last_fault)) / 1000).unwrap_or(0);
    for (subject, invariant, detail) in
        workloads::final_checks(client, &ns.name, &history, rounds.len(), last_fault_unix).await?
    {
        violations.push(Violation {
            invariant,
            subject,
            t_ms: end,
            detail,
        });
    }
    violations.sort_by_key(|v| v.t_ms);
    let namespace = ns.name.clone();
    let outcome = Outcome {
        seed: opts.seed,
        kills: opts.kills,
        namespace,
        plan,
        injections,
        rounds,
        violations,
        history,
    };
    // A failed campaign leaves its namespace for inspection.
    if outcome.passed() {
        let _ = ns.delete().await;
    }
    Ok(outcome)
}

/// The history's invariants again over a campaign's saved `--history` file (its final checks
/// read the live cluster and are not repeated): what a changed check says of a past run.
pub fn recheck(saved: &serde_json::Value) -> Result<Vec<Violation>, String> {
    let history: History = serde_json::from_value(saved["history"].clone())
        .map_err(|e| format!("the saved history: {e}"))?;
    let mut expect = workloads::expect();
    expect.kubelet_kills_ms = saved["injections"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["fault"] == Fault::Kubelet.name() && i["outcome"].get("Ok").is_some())
        .filter_map(|i| i["t_ms"].as_u64())
        .collect();
    Ok(invariants::check(&history, &expect))
}

type RoundsResult = (Vec<Injection>, Vec<Round>, Vec<Violation>);

async fn rounds(
    client: &Client,
    opts: &Options,
    ns: &str,
    sidecar: &str,
    plan: &[Step],
    recorder: &Recorder,
    t0: Instant,
) -> Result<RoundsResult, String> {
    workloads::create_all(client, ns, sidecar).await?;
    let initial = settle(client, ns, sidecar, None).await;
    if !initial.is_empty() {
        return Err(format!("the workloads never came up: {initial:?}"));
    }
    let mut injections = Vec::new();
    let mut rounds = Vec::new();
    let mut violations = Vec::new();
    for r in 0..schedule::rounds(plan) {
        let start_ms = recorder.now_ms();
        tracing::info!(round = r, "round starts");
        // A fault of the round before can leave a request in flight when the API server went
        // away: once healthy again, the round's start is retried (its steps are idempotent).
        if let Err(e) = workloads::start_round(client, ns, sidecar, r).await {
            tracing::warn!(round = r, error = %e, "starting the round failed; retrying once healthy");
            faults::wait_healthy(client).await?;
            workloads::start_round(client, ns, sidecar, r).await?;
        }
        for step in plan.iter().filter(|s| s.round == r) {
            tokio::time::sleep(Duration::from_millis(step.delay_ms)).await;
            injections.push(inject(client, step, t0).await);
        }
        if opts.fake_duplicate && r == 0 {
            fake_duplicate(client, ns).await?;
        }
        let incomplete = settle(client, ns, sidecar, Some(r)).await;
        let end_ms = recorder.now_ms();
        for w in &incomplete {
            violations.push(Violation {
                invariant: ROLLOUT,
                subject: workloads::prefix_of(w).to_owned(),
                t_ms: end_ms,
                detail: format!(
                    "round {r}: not complete {}s after its faults",
                    ROUND_TIMEOUT.as_secs()
                ),
            });
        }
        rounds.push(Round {
            start_ms,
            end_ms,
            incomplete,
        });
    }
    Ok((injections, rounds, violations))
}

async fn inject(client: &Client, step: &Step, t0: Instant) -> Injection {
    let t_ms = ms(t0);
    tracing::info!(round = step.round, fault = %step.fault, "inject");
    let outcome = faults::inject(client, step.fault).await;
    let repaired = match &outcome {
        Ok(_) => faults::wait_healthy(client).await,
        Err(e) => Err(e.clone()),
    };
    let outcome = match (outcome, repaired) {
        (Ok(what), Ok(())) => Ok(what),
        (Ok(what), Err(e)) => Err(format!("{what}; not repaired: {e}")),
        (Err(e), _) => Err(e),
    };
    Injection {
        round: step.round,
        fault: step.fault,
        t_ms,
        repaired_ms: outcome.is_ok().then(|| ms(t0)),
        outcome,
    }
}

/// Waits until every rollout (and, in a round, every request of it) is complete, or the
/// timeout; returns what is still incomplete. A failing read (the API server away) is retried.
async fn settle(
    client: &Client,
    ns: &str,
    sidecar: &str,
    round: Option<usize>,
) -> Vec<&'static str> {
    let deadline = Instant::now() + ROUND_TIMEOUT;
    let mut last = vec!["(never read)"];
    while Instant::now() < deadline {
        if let Ok(p) = workloads::pending(client, ns, sidecar, round).await {
            if p.is_empty() {
                return p;
            }
            last = p;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    last
}

/// The deliberate break: a second Pod for the slot of one of the in-place CloneSet's Pods, with
/// its instance id and its owner, made by the campaign as a controller that forgot it had
/// already created that Pod would make it. It matches neither the CloneSet's nor the
/// SidecarSet's selector, so nothing else reacts to it.
async fn fake_duplicate(client: &Client, ns: &str) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let list = pods
        .list(&ListParams::default().labels("app=cs"))
        .await
        .map_err(|e| e.to_string())?;
    let orig = list.items.first().ok_or("no Pod of CloneSet cs")?;
    let mut labels = orig.labels().clone();
    labels.remove("app");
    let app = orig
        .spec
        .as_ref()
        .and_then(|s| s.containers.iter().find(|c| c.name == "app"))
        .cloned()
        .ok_or("no app container")?;
    // The service-account volume is the original Pod's own.
    let app = k8s_openapi::api::core::v1::Container {
        volume_mounts: None,
        ..app
    };
    let mut dup = Pod::default();
    dup.metadata.name = Some(format!("{}-dup", orig.name_any()));
    dup.metadata.labels = Some(labels);
    dup.metadata.owner_references = orig.metadata.owner_references.clone();
    dup.spec = Some(k8s_openapi::api::core::v1::PodSpec {
        containers: vec![app],
        termination_grace_period_seconds: Some(1),
        ..Default::default()
    });
    pods.create(&PostParams::default(), &dup)
        .await
        .map_err(|e| format!("create the fake duplicate: {e}"))?;
    tracing::warn!(pod = %orig.name_any(), "created a fake duplicate of this Pod's slot (KRUISE_CHAOS_FAKE_DUPLICATE)");
    Ok(())
}
