//! kruise-daemon's memory with PodProbeMarker probes on its node against the same daemon idle.
//!
//! Against the installed system (in cluster, `KRUISE_E2E_INCLUSTER=1`, one node): testapp Pods
//! are started in a namespace of their own; each run samples the daemon's RSS with no marker
//! (idle, the baseline), then with markers giving every Pod `--probes-per-pod` probes (exec,
//! tcpSocket and httpGet; one tcp probe fails, so both states are written) once every probe has
//! reported a state, then deletes the markers and waits until the node's NodePodProbe lists none
//! of them. Idle and loaded phases alternate, so both see the same daemon process (its PID is
//! checked) and the same cluster. The table gives medians of the phases' RSS samples, the peak,
//! and the ratio loaded / idle.
//!
//! Usage: KRUISE_E2E_INCLUSTER=1 kruise-probe-bench [--pods N] [--probes-per-pod K] [--runs R]
//! [--sample-secs S] [--append FILE]

use std::time::{Duration, Instant};

use clap::Parser;
use k8s_openapi::api::core::v1::Pod;
use kruise_e2e::bench::args::{Common, at_least_one};
use kruise_e2e::bench::stats::mib;
use kruise_e2e::bench::{self, rfc3339_now};
use kruise_e2e::podprobemarker::{self, node_pod_probe, testapp_pod};
use kruise_e2e::{TestNamespace, client, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T> = std::result::Result<T, BoxError>;

/// Every probe reports within a few periods; generous for a loaded 2-core node.
const SETTLE: Duration = Duration::from_secs(120);

/// kruise-daemon's RSS idle and with PodProbeMarker probes on its node.
#[derive(Debug, Parser)]
#[command(name = "kruise-probe-bench")]
struct Args {
    /// testapp Pods probed.
    #[arg(long, default_value_t = 20, value_parser = at_least_one)]
    pods: usize,
    /// Probes per Pod (exec, tcpSocket, httpGet in turn; at most 5).
    #[arg(long, default_value_t = 5, value_parser = at_least_one)]
    probes_per_pod: usize,
    /// Seconds of RSS samples (one a second) per phase.
    #[arg(long, default_value_t = 30, value_parser = at_least_one)]
    sample_secs: usize,
    /// The profile the installed daemon was built with (hack/install.sh's `PROFILE`), for the table.
    #[arg(long, default_value = "release")]
    build: String,
    #[command(flatten)]
    common: Common,
}

/// The probes every Pod gets: two exec, then tcp and http against the app's port, then a tcp
/// probe of a closed port (Failed), each every 2 s.
fn probes(k: usize) -> Value {
    let every = |handler: Value| {
        let mut p = json!({"periodSeconds": 2});
        for (key, v) in handler.as_object().into_iter().flatten() {
            p[key] = v.clone();
        }
        p
    };
    let all = [
        every(json!({"exec": {"command": ["test", "-f", "/tmp/ok"]}})),
        every(json!({"exec": {"command": ["true"]}})),
        every(json!({"tcpSocket": {"port": 8080}})),
        every(json!({"httpGet": {"port": 8080, "path": "/"}})),
        every(json!({"tcpSocket": {"port": 8081}})),
    ];
    Value::Array(
        all.into_iter()
            .take(k)
            .enumerate()
            .map(|(i, probe)| {
                json!({"name": format!("p{i}"), "containerName": "main", "probe": probe,
                    "podConditionType": format!("bench.kruise.io/p{i}")})
            })
            .collect(),
    )
}

/// Probe states the node's NodePodProbe reports for Pods of `uids`.
fn reported(npp: &Value, uids: &[String]) -> usize {
    npp["status"]["podProbeStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| {
            s["uid"]
                .as_str()
                .is_some_and(|u| uids.iter().any(|x| x == u))
        })
        .flat_map(|s| s["probeStates"].as_array().into_iter().flatten())
        .filter(|s| s["state"] == "Succeeded" || s["state"] == "Failed")
        .count()
}

/// Probes the node's NodePodProbe lists for Pods of `uids`.
fn listed(npp: &Value, uids: &[String]) -> usize {
    uids.iter()
        .map(|u| podprobemarker::listed_probes(npp, u).len())
        .sum()
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// One RSS sample a second for `secs` seconds; fails if the daemon restarted meanwhile.
async fn sample(pid: u32, secs: usize) -> Result<Vec<u64>> {
    let mut out = Vec::with_capacity(secs);
    for _ in 0..secs {
        out.push(bench::rss_kib(pid).ok_or("the daemon exited while sampled")?);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(out)
}

struct Phase {
    idle: Vec<u64>,
    loaded: Vec<u64>,
    settle: Duration,
}

async fn run(args: Args) -> Result<()> {
    if args.probes_per_pod > 5 {
        return Err("--probes-per-pod: at most 5 kinds of probe are defined".into());
    }
    let client = client().await?;
    let pid = u32::try_from(kruise_e2e::mode::daemon_pid()?)?;
    let ns = TestNamespace::create(&client, "bench-probe").await?;
    let pods: Api<Pod> = ns.api();
    let mut uids = Vec::new();
    let mut node = String::new();
    for i in 0..args.pods {
        let p = testapp_pod(&pods, &format!("p{i}"), "probe-bench").await?;
        node = p
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        uids.extend(p.uid());
    }
    let want = args.pods * args.probes_per_pod;
    let markers = podprobemarker::api(&client, &ns.name);
    let mut phases = Vec::new();
    for run in 0..args.common.runs {
        eprintln!("run {}/{}: idle", run + 1, args.common.runs);
        let idle = sample(pid, args.sample_secs).await?;
        let m = podprobemarker::marker("bench", "probe-bench", probes(args.probes_per_pod))?;
        markers.create(&PostParams::default(), &m).await?;
        let start = Instant::now();
        wait_for(&format!("{want} probe states"), SETTLE, || async {
            let npp = node_pod_probe(&client, &node).await?.unwrap_or_default();
            Ok((reported(&npp, &uids) >= want).then_some(()))
        })
        .await?;
        let settle = start.elapsed();
        eprintln!("run {}/{}: {want} probes", run + 1, args.common.runs);
        let loaded = sample(pid, args.sample_secs).await?;
        markers.delete("bench", &DeleteParams::default()).await?;
        wait_for("the probes gone from the NodePodProbe", SETTLE, || async {
            let npp = node_pod_probe(&client, &node).await?.unwrap_or_default();
            Ok((listed(&npp, &uids) == 0).then_some(()))
        })
        .await?;
        phases.push(Phase {
            idle,
            loaded,
            settle,
        });
    }
    ns.delete().await?;
    let idle = median(phases.iter().flat_map(|p| p.idle.clone()).collect());
    let loaded = median(phases.iter().flat_map(|p| p.loaded.clone()).collect());
    let peak = phases
        .iter()
        .flat_map(|p| p.loaded.iter().copied())
        .max()
        .unwrap_or(0);
    let settle: Vec<String> = phases
        .iter()
        .map(|p| format!("{:.1}", p.settle.as_secs_f64()))
        .collect();
    let ratio = |v: u64| {
        if idle == 0 {
            0.0
        } else {
            v as f64 / idle as f64
        }
    };
    let out = format!(
        "\n### kruise-daemon with PodProbeMarker probes ({})\n\n\
         Machine: {}. The daemon installed from deploy/ ({} build), one node; {} testapp Pods × \
         {} probes (exec ×2, tcpSocket, httpGet, a failing tcpSocket; every 2 s), {} runs \
         alternating idle and loaded, {} one-second RSS samples per phase. Command: \
         `KRUISE_E2E_INCLUSTER=1 kruise-probe-bench --pods {} --probes-per-pod {} --runs {} \
         --sample-secs {}`.\n\n\
         | | RSS (MiB) | × idle |\n|---|---|---|\n\
         | idle (no probe) | {} | 1.00 |\n\
         | {} probes (median) | {} | {:.2} |\n\
         | {} probes (peak sample) | {} | {:.2} |\n\n\
         Every probe reported a state {} s after the markers were created (per run).\n",
        rfc3339_now(),
        bench::machine(),
        args.build,
        args.pods,
        args.probes_per_pod,
        args.common.runs,
        args.sample_secs,
        args.pods,
        args.probes_per_pod,
        args.common.runs,
        args.sample_secs,
        mib(idle),
        want,
        mib(loaded),
        ratio(loaded),
        want,
        mib(peak),
        ratio(peak),
        settle.join(", "),
    );
    args.common.emit(&out)?;
    Ok(())
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("kruise-probe-bench: {e}");
        std::process::exit(1);
    }
}
