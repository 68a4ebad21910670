//! Controller-at-scale benchmark on the scale cluster (hack/scale-cluster.sh: a control plane
//! and kwok's fake nodes). For each size N: a CloneSet of N Pods (InPlaceIfPossible,
//! maxUnavailable 100%) gets a new image, and we time how long kruise-manager takes to issue every
//! in-place patch (a pod watch sees every Pod's spec on the new image) and to finish the rollout
//! (status.updatedReadyReplicas == N). The floor: a minimal client sending the same two patches
//! per Pod (the InPlaceUpdateReady=False status patch, then the guarded JSON patch of labels,
//! the in-place state annotation and the image) to N bare Pods, through the same client rate
//! limiter with the same QPS and burst. Manager and floor runs are interleaved; medians.
//!
//! `--workloads K` spreads the N Pods over K CloneSets of N/K (2,000 CloneSets of 5 is more like
//! a real cluster than one of 10,000): all are created (concurrently, bounded) and ready, then all
//! get the new image at once, as fast as the benchmark can patch them (the run notes when the
//! last patch was answered); the rollout is complete when one CloneSet watch has seen every
//! CloneSet's status observe its new generation with all its Pods updated and ready. The floor
//! stays the same two patches per Pod to N bare Pods: the Pods' writes do not depend on how many
//! CloneSets own them, so what K adds is the manager's own cost.
//!
//! The system under test is Kruise-rs (kruise-manager), OpenKruise (the Go original's manager,
//! built by hack/build-openkruise.sh), or both (`--systems kruise-rs,openkruise`). Both share
//! CRD and webhook configuration names, so they take turns: before a turn of the other system,
//! `hack/scale-cluster.sh use SYSTEM` installs that system's CRDs and webhook configurations.
//! For each size, run r takes the systems in the given order when r is even and reversed when
//! it is odd (A B B A ...), so drift of the machine falls on both alike. The floor runs in the
//! first system's turn, beside its live manager, as it always ran beside kruise-manager.
//!
//! Each turn starts a fresh manager process (so RSS belongs to that size and run) from a
//! release build; its PID file goes to .cluster/scale/pids so `hack/scale-cluster.sh down`
//! stops it even if this program is killed. Neither system's daemon runs: kwok's nodes have no
//! container runtime, and kwok's stages (hack/kwok/stages.yaml) play the kubelet's part.
//!
//! Usage: kruise-scale-bench [--sizes 1000,5000] [--workloads K] [--runs 3]
//!        [--systems kruise-rs,openkruise] [--qps Q] [--burst B] [--concurrency C]
//!        [--manager BIN] [--openkruise-manager BIN] [--kubeconfig FILE] [--append FILE]
//!        (`--help` for more)
//!
//! The program's parts: `args` (the command line), `manager` (the manager process and the
//! system the cluster has installed), `pods`, `workloads` (the CloneSets of a run, and the
//! watch that says when all reached a goal), `watch` (observing the patches), `floor` (the
//! baseline client), `measure` (the runs of one size and their samples) and `report` (the
//! markdown table).

mod args;
mod floor;
mod manager;
mod measure;
mod pods;
mod report;
mod watch;
mod workloads;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use kruise_e2e::{Error, Result};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use args::{Args, System};
use manager::Installed;
use measure::measure_size;

const IMAGE_V1: &str = "kwok.local/kruise-rs/app:v1";
const IMAGE_V2: &str = "kwok.local/kruise-rs/app:v2";

/// Where the scale cluster keeps its state (kubeconfig, logs, PID files).
fn scale_state() -> PathBuf {
    kruise_e2e::repo_root().join(".cluster/scale")
}

fn other(msg: impl Into<String>) -> Error {
    Error::Io(std::io::Error::other(msg.into()))
}

/// Generous: creating 5,000 Pods goes through the manager's slow start, the webhook, the
/// scheduler and kwok.
fn timeout_for(n: usize) -> Duration {
    Duration::from_secs(180 + (n as u64) / 4)
}

/// Heap bytes as MiB with one decimal, or n/a when the manager does not export them.
fn heap_mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "n/a".into(), |b| format!("{:.1}", b as f64 / 1048576.0))
}

async fn run(args: Args) -> Result<()> {
    let kc = Kubeconfig::read_from(&args.kubeconfig)
        .map_err(|e| Error::NoCluster(format!("{}: {e}", args.kubeconfig.display())))?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::NoCluster(e.to_string()))?;
    // Setup and observation are not measured: no limit. The floor's patches go through the
    // manager's own limiter with the manager's QPS and burst.
    let client = Client::try_from(cfg.clone())?;
    let limited = kruise_manager::ratelimit::client(cfg, args.qps, args.burst)?;
    args.check_shape().map_err(other)?;
    let mut seen = HashSet::new();
    if !args.systems.iter().all(|s| seen.insert(*s)) {
        return Err(other("--systems names a system twice"));
    }
    for system in &args.systems {
        let (bin, hint) = match system {
            System::KruiseRs | System::KruiseRsNoWorkloadMetrics => {
                (&args.manager, "cargo build --release -p kruise-manager")
            }
            System::Openkruise => (&args.openkruise_manager, "hack/build-openkruise.sh"),
        };
        if !bin.exists() {
            return Err(other(format!("{} not found: {hint}", bin.display())));
        }
    }

    // With Kruise-rs alone nothing is swapped: the scale cluster comes up with its CRDs.
    let with_openkruise = args.systems.contains(&System::Openkruise);
    let mut installed = Installed((!with_openkruise).then_some(System::KruiseRs));
    let mut results = Vec::new();
    let mut failed = None;
    for &n in &args.sizes {
        match measure_size(&args, &client, &limited, &mut installed, n).await {
            Ok(r) => results.push((n, r)),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    // Leave the scale cluster with Kruise-rs's CRDs, as it came up, whatever happened.
    if with_openkruise && let Err(e) = installed.ensure(System::KruiseRs).await {
        eprintln!("kruise-scale-bench: putting Kruise-rs's CRDs back: {e}");
    }
    if let Some(e) = failed {
        return Err(e);
    }
    let mut text = report::table(&args, &results);
    text.push_str(&report::metrics_cost(args.workloads, &results));
    args.common.emit(&text)?;
    Ok(())
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("kruise-scale-bench: {e}");
        std::process::exit(1);
    }
}
