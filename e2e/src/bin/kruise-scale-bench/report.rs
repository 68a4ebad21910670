//! The report: the markdown table of one benchmark run, with the machine, the builds and the
//! settings it was measured with.

use kruise_api::keys;
use kruise_e2e::bench;
use kruise_e2e::bench::stats::{median, mib, ratio, secs, secs_list};

use crate::args::{Args, System, openkruise_version, shape};
use crate::heap_mib;
use crate::measure::{SizeResult, turn_order};
use crate::pods::SETUP_CONCURRENCY;

/// The environment that changes how the manager allocates or how many requests it keeps in
/// flight (it inherits ours), as the table reports it.
pub(crate) fn allocator_settings() -> String {
    let set: Vec<String> = [
        "KRUISE_MALLOC_TRIM_SECS",
        "MALLOC_ARENA_MAX",
        "KRUISE_KUBE_API_MAX_IN_FLIGHT",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
    .collect();
    if set.is_empty() {
        "the manager's defaults".into()
    } else {
        set.join(" ")
    }
}

/// The cargo profile a binary was built with, read from its directory (`target/release/`,
/// `target/debug/`, after symbolic links): the table says which was measured.
pub(crate) fn build_profile(bin: &std::path::Path) -> &'static str {
    let bin = std::fs::canonicalize(bin).unwrap_or_else(|_| bin.to_path_buf());
    match bin
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|d| d.to_str())
    {
        Some("release") => "release",
        Some("debug") => "debug",
        _ => "(profile unknown)",
    }
}

/// `a / b`, or n/a when `b` is zero (a reading that failed).
pub(crate) fn ratio_u64(a: u64, b: u64) -> String {
    if b == 0 {
        "n/a".into()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

pub(crate) fn table(args: &Args, results: &[(usize, SizeResult)]) -> String {
    let k = args.workloads;
    let names: Vec<&str> = args.systems.iter().map(|s| s.label()).collect();
    let what = if k == 1 {
        "in-place rollout of N Pods".to_string()
    } else {
        format!("in-place rollout of N Pods in {k} CloneSets of N/{k}")
    };
    let mut out = String::new();
    out.push_str(&format!(
        "\n## Controller at scale: {what} on kwok nodes, {} ({} runs each, interleaved, medians)\n\n",
        names.join(" and "),
        args.common.runs
    ));
    out.push_str(&settings(args));
    out.push_str("\n\n");
    let n_column = if k == 1 { "N" } else { "N (CloneSets × Pods)" };
    out.push_str(&format!("| {n_column} | system | all patches issued s | floor s | ratio to floor | rollout complete s | RSS steady / peak / after MiB | heap steady / peak / after MiB | CPU s (rollout) |\n|---|---|---|---|---|---|---|---|---|\n"));
    push_rows(&mut out, k, results);
    push_writes(&mut out, k, results);
    push_runs(&mut out, k, results);
    out.push_str(".\nHeap: Kruise-rs, bytes the manager's counting allocator (controller/src/heap.rs) saw allocated and not freed; RSS minus heap is the allocator's cache and fragmentation, code and stacks.");
    if args.systems.contains(&System::Openkruise) {
        out.push_str(" OpenKruise, go_memstats_heap_inuse_bytes on its /metrics (the Go runtime's heap spans in use); Go exports no peak.");
    }
    out.push_str("\nTargets: ratio ≤ 1.2; manager RSS ≤ 64 MiB at 1,000 Pods, ≤ 200 MiB at 5,000.");
    if k > 1 {
        out.push_str(" Issue 62, at 2,000 CloneSets × 5 Pods: manager CPU ≤ 0.4×, RSS ≤ 0.5×, rollout complete ≤ 0.6× OpenKruise's.");
    }
    let sizes: Vec<String> = results.iter().map(|(n, _)| n.to_string()).collect();
    // The command-line names (`arg` is the installation, which both Kruise-rs variants share).
    let systems: Vec<String> = args
        .systems
        .iter()
        .filter_map(|s| clap::ValueEnum::to_possible_value(s).map(|v| v.get_name().to_owned()))
        .collect();
    let workloads = if k == 1 {
        String::new()
    } else {
        format!(" --workloads {k}")
    };
    out.push_str(&format!(
        "\nRun with `kruise-scale-bench --systems {} --sizes {}{workloads} --runs {}`.\n",
        systems.join(","),
        sizes.join(","),
        args.common.runs
    ));
    out
}

/// The paragraph under the title: machine, builds, limits, settle times, the workload shape and,
/// with OpenKruise, how the systems take turns.
fn settings(args: &Args) -> String {
    let limit = if args.qps > 0.0 {
        format!(
            "client-side limit QPS {} burst {} for kruise-manager and the floor (`--kube-api-qps/--kube-api-burst`, runtime/src/ratelimit.rs)",
            args.qps, args.burst
        )
    } else {
        "no client-side rate limit for kruise-manager and the floor (kube-rs has none; `--kube-api-qps 0`)"
            .to_string()
    };
    let k = args.workloads;
    let mut out = format!(
        "Machine: {}; scale cluster (Kubernetes {} control plane, kwok {} with 50 fake nodes, no kube-controller-manager), kruise-manager {} build. \
{limit}; the floor keeps {} Pods' patches in flight. Manager allocator settings: {}. \
Steady: {} s after the N Pods are ready; after: {} s after the rollout completed. \
CloneSet {} (v1alpha1 where only that is served, as by OpenKruise v1.9.0's release; InPlaceIfPossible, maxUnavailable 100%), one image change v1 -> v2.",
        bench::machine(),
        std::env::var("K8S_VERSION").unwrap_or_else(|_| "v1.34.4".into()),
        std::env::var("KWOK_VERSION").unwrap_or_else(|_| "v0.8.0".into()),
        build_profile(&args.manager),
        args.concurrency,
        allocator_settings(),
        args.settle,
        args.settle,
        keys::APPS_V1BETA1,
    );
    if k > 1 {
        out.push_str(&format!(
            " {k} CloneSets share the N Pods, N/{k} each: created {SETUP_CONCURRENCY} at a time and all ready (one CloneSet watch) before steady is read; \
then every CloneSet gets the new image, {SETUP_CONCURRENCY} patches in flight (\"last CloneSet patch\" below: when the last was answered; the times count from the first). \
All patches issued: a Pod watch saw all N Pods' specs on v2. Rollout complete: the CloneSet watch saw every CloneSet's status observe its new generation with updatedReadyReplicas == readyReplicas == replicas. \
The floor is the same as for one CloneSet of N (the same two patches per Pod to N bare Pods): what {k} CloneSets add is the manager's own work."
        ));
    }
    if args.systems.contains(&System::Openkruise) {
        out.push_str(&format!(
            " OpenKruise {}: its manager built from its Go module (hack/build-openkruise.sh), its CRDs and webhook configurations from its module's config/, \
webhook at a host URL (WEBHOOK_HOST), `--rest-config-qps {} --rest-config-burst {}` (its defaults are 30 and 50: set this high, no effective client-side limit). \
Both managers run without their daemons (kwok's nodes have no container runtime; kwok's stages play the kubelet's in-place restart). \
The systems take turns (they share CRD and webhook names; `hack/scale-cluster.sh use` swaps them whole), ordered {} for each size, a fresh manager process per turn; \
the floor runs in {}'s turns.",
            openkruise_version(),
            args.openkruise_qps,
            args.openkruise_burst,
            (0..args.common.runs)
                .map(|r| {
                    turn_order(&args.systems, r)
                        .iter()
                        .map(|s| s.label())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect::<Vec<_>>()
                .join(", "),
            args.systems[0].label()
        ));
    }
    out
}

/// Every run's times, per size and system.
fn push_runs(out: &mut String, k: usize, results: &[(usize, SizeResult)]) {
    out.push_str("\n\nRuns (s): ");
    let runs: Vec<String> = results
        .iter()
        .map(|(n, r)| {
            let per: Vec<String> = r
                .systems
                .iter()
                .map(|(system, s)| {
                    let sent = if k == 1 {
                        String::new()
                    } else {
                        format!(", last CloneSet patch {}", secs_list(&s.sent))
                    };
                    format!(
                        "{} {}, complete {}{sent}",
                        system.label(),
                        secs_list(&s.patched),
                        secs_list(&s.complete)
                    )
                })
                .collect();
            format!(
                "N={}: {}; floor {}",
                shape(*n, k),
                per.join("; "),
                secs_list(&r.floor)
            )
        })
        .collect();
    out.push_str(&runs.join(". "));
}

/// One table row per size and system, and the Kruise-rs / OpenKruise ratios.
fn push_rows(out: &mut String, k: usize, results: &[(usize, SizeResult)]) {
    for (n, r) in results {
        let n = shape(*n, k);
        let f = median(&r.floor);
        for (system, s) in &r.systems {
            let p = median(&s.patched);
            out.push_str(&format!(
                "| {n} | {} | {} | {} | {:.2} | {} | {} / {} / {} | {} / {} / {} | {} |\n",
                system.label(),
                secs(p),
                secs(f),
                ratio(p, f),
                secs(median(&s.complete)),
                mib(s.rss_steady_kib),
                mib(s.rss_peak_kib),
                mib(s.rss_after_kib),
                heap_mib(s.heap_steady),
                heap_mib(s.heap_peak),
                heap_mib(s.heap_after),
                secs(median(&s.cpu)),
            ));
        }
        let find = |want: System| r.systems.iter().find(|(s, _)| *s == want).map(|(_, s)| s);
        if let (Some(rs), Some(o)) = (find(System::KruiseRs), find(System::Openkruise)) {
            out.push_str(&format!(
                "| {n} | Kruise-rs / OpenKruise | {:.2} | | | {:.2} | {} (steady) | | {:.2} |\n",
                ratio(median(&rs.patched), median(&o.patched)),
                ratio(median(&rs.complete), median(&o.complete)),
                ratio_u64(rs.rss_steady_kib, o.rss_steady_kib),
                ratio(median(&rs.cpu), median(&o.cpu)),
            ));
        }
    }
}

/// Where "rollout complete" goes, per size and system.
fn push_writes(out: &mut String, k: usize, results: &[(usize, SizeResult)]) {
    // Where "rollout complete" goes: the writes it took, at the rate the floor wrote.
    for (n, r) in results {
        let floor = median(&r.floor).as_secs_f64();
        if floor <= 0.0 {
            continue;
        }
        let rate = 2.0 * *n as f64 / floor;
        for (system, s) in &r.systems {
            let mut w = s.pod_writes.clone();
            w.sort_unstable();
            let writes = w.get(w.len() / 2).copied().unwrap_or(0);
            out.push_str(&format!(
                "\nN={}, {}: a watch saw {writes} Pod writes from the image change to rollout complete ({:.1} per Pod, the manager's and kwok's); at the floor's rate ({rate:.0} writes/s) they take {:.1} s.",
                shape(*n, k),
                system.label(),
                writes as f64 / *n as f64,
                writes as f64 / rate
            ));
        }
    }
}

/// The workload metrics' cost, when the run had Kruise-rs with them on and off: per size, the
/// ratio on/off of CPU, peak RSS and steady heap, and the series a scrape held in each.
pub(crate) fn metrics_cost(k: usize, results: &[(usize, SizeResult)]) -> String {
    let mut out = String::new();
    for (n, r) in results {
        let find = |want: System| r.systems.iter().find(|(s, _)| *s == want).map(|(_, s)| s);
        let (Some(on), Some(off)) = (
            find(System::KruiseRs),
            find(System::KruiseRsNoWorkloadMetrics),
        ) else {
            continue;
        };
        let series = |s: &crate::measure::SystemResult| s.series.iter().max().copied();
        out.push_str(&format!(
            "\nN={}, workload metrics on / off (/metrics scraped every second through the rollout): CPU {:.2} ({} / {} s), RSS peak {} ({} / {} MiB), heap steady {}, series per scrape {} / {}.",
            shape(*n, k),
            ratio(median(&on.cpu), median(&off.cpu)),
            secs(median(&on.cpu)),
            secs(median(&off.cpu)),
            ratio_u64(on.rss_peak_kib, off.rss_peak_kib),
            mib(on.rss_peak_kib),
            mib(off.rss_peak_kib),
            match (on.heap_steady, off.heap_steady) {
                (Some(a), Some(b)) => ratio_u64(a, b),
                _ => "n/a".into(),
            },
            series(on).map_or_else(|| "n/a".into(), |v| v.to_string()),
            series(off).map_or_else(|| "n/a".into(), |v| v.to_string()),
        ));
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;
    use crate::measure::SystemResult;

    fn results(systems: &[System]) -> Vec<(usize, SizeResult)> {
        let s = |secs: u64| SystemResult {
            sent: vec![Duration::from_millis(800)],
            patched: vec![Duration::from_secs(secs)],
            complete: vec![Duration::from_secs(2 * secs)],
            cpu: vec![Duration::from_secs(secs)],
            rss_steady_kib: 1024 * secs,
            pod_writes: vec![10],
            ..SystemResult::default()
        };
        let systems = systems.iter().map(|&sys| (sys, s(4))).collect();
        vec![(
            200,
            SizeResult {
                systems,
                floor: vec![Duration::from_secs(2)],
            },
        )]
    }

    fn args(a: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("b").chain(a.iter().copied())).expect("args")
    }

    #[test]
    fn the_table_names_the_shape_of_many_clone_sets() {
        let a = args(&[
            "--systems",
            "kruise-rs,openkruise",
            "--sizes",
            "200",
            "--workloads",
            "40",
            "--runs",
            "1",
        ]);
        let t = table(&a, &results(&a.systems));
        assert!(
            t.contains("in-place rollout of N Pods in 40 CloneSets of N/40 on kwok nodes"),
            "{t}"
        );
        assert!(t.contains("| N (CloneSets × Pods) | system |"), "{t}");
        assert!(t.contains("| 200 (40 × 5) | Kruise-rs | 4.00 |"), "{t}");
        assert!(
            t.contains("| 200 (40 × 5) | Kruise-rs / OpenKruise |"),
            "{t}"
        );
        assert!(
            t.contains("N=200 (40 × 5): Kruise-rs 4.00, complete 8.00, last CloneSet patch 0.80"),
            "{t}"
        );
        assert!(t.contains("the same as for one CloneSet of N"), "{t}");
        assert!(t.contains("Issue 62, at 2,000 CloneSets × 5 Pods"), "{t}");
        assert!(t.contains("`kruise-scale-bench --systems kruise-rs,openkruise --sizes 200 --workloads 40 --runs 1`"), "{t}");
        // Every row has the header's nine cells.
        for row in t.lines().filter(|l| l.starts_with('|')) {
            assert_eq!(row.matches('|').count(), 10, "{row}");
        }
    }

    #[test]
    fn one_clone_set_keeps_the_table_it_had() {
        let a = args(&["--sizes", "200", "--runs", "1"]);
        let t = table(&a, &results(&a.systems));
        assert!(
            t.contains("in-place rollout of N Pods on kwok nodes"),
            "{t}"
        );
        assert!(t.contains("| N | system |"), "{t}");
        assert!(t.contains("| 200 | Kruise-rs | 4.00 |"), "{t}");
        assert!(
            t.contains("N=200: Kruise-rs 4.00, complete 8.00; floor 2.00"),
            "{t}"
        );
        assert!(
            !t.contains("CloneSet patch") && !t.contains("--workloads") && !t.contains("Issue 62"),
            "{t}"
        );
    }
}
