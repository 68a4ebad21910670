//! One size measured: each run's turns (A B B A), one manager run per system and one floor run,
//! and the samples they add up to.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kruise_e2e::Result;
use kruise_e2e::bench;
use kruise_e2e::bench::stats::secs;
use kube::Client;

use crate::args::{Args, System, shape, shape_tag};
use crate::floor::floor_run;
use crate::manager::{Installed, Manager, Scraper, manager_metric};
use crate::pods::create_ns;
use crate::watch::ImageWatch;
use crate::workloads::{Workloads, served_version};
use crate::{IMAGE_V2, heap_mib};

pub(crate) struct ManagerSample {
    /// From the first CloneSet's image change to the answer of the last one's.
    pub(crate) sent: Duration,
    pub(crate) patched: Duration,
    pub(crate) complete: Duration,
    pub(crate) rss_steady_kib: u64,
    pub(crate) rss_peak_kib: u64,
    /// Live heap bytes (the manager's counting allocator; OpenKruise's Go heap in use) when the
    /// N Pods are ready, and the most the manager ever held, read after the rollout (None: not
    /// exported).
    pub(crate) heap_steady: Option<u64>,
    pub(crate) heap_peak: Option<u64>,
    /// RSS and live heap once the manager settled after the rollout.
    pub(crate) rss_after_kib: u64,
    pub(crate) heap_after: Option<u64>,
    /// Pod writes a watch saw from the image change to rollout complete.
    pub(crate) pod_writes: usize,
    pub(crate) cpu: Duration,
    /// Scrapes of /metrics during the rollout (one a second) and the series the last held.
    pub(crate) scrapes: usize,
    pub(crate) series: usize,
}

pub(crate) async fn manager_run(
    client: &Client,
    system: System,
    pid: u32,
    (n, k): (usize, usize),
    run: usize,
    settle: Duration,
) -> Result<ManagerSample> {
    let tag = match system {
        System::KruiseRs => "cs",
        System::KruiseRsNoWorkloadMetrics => "cs-nm",
        System::Openkruise => "ok",
    };
    let ns = format!("scale-{tag}-{}-{run}", shape_tag(n, k));
    let pods = create_ns(client, &ns).await?;
    let version = served_version(client).await;
    let mut workloads = Workloads::new(client, &ns, version, n, k);
    workloads.create_ready().await?;
    tokio::time::sleep(settle).await;
    let rss_steady_kib = bench::rss_kib(pid).unwrap_or(0);
    let heap_steady = manager_metric(system.heap_live_metric());
    let watch = ImageWatch::start(pods.clone(), &workloads.selector(), IMAGE_V2, n).await?;
    let rss = bench::RssPeak::start(pid);
    let scraper = Scraper::start();
    let cpu0 = bench::cpu_time(pid).unwrap_or_default();

    let start = Instant::now();
    let sent = workloads.roll(start).await?;
    let patched = watch.wait_done(workloads.timeout()).await? - start;
    let complete = workloads.wait_complete(start).await?;
    let cpu = bench::cpu_time(pid)
        .unwrap_or_default()
        .saturating_sub(cpu0);
    let rss_peak_kib = rss.stop();
    let (scrapes, series) = scraper.stop();
    let heap_peak = system.heap_peak_metric().and_then(manager_metric);
    let pod_writes = watch.writes.load(Ordering::Relaxed);
    drop(watch);
    tokio::time::sleep(settle).await;
    let sample = ManagerSample {
        sent,
        patched,
        complete,
        rss_steady_kib,
        rss_peak_kib,
        heap_steady,
        heap_peak,
        rss_after_kib: bench::rss_kib(pid).unwrap_or(0),
        heap_after: manager_metric(system.heap_live_metric()),
        pod_writes,
        cpu,
        scrapes,
        series,
    };
    eprintln!(
        "N={} run {} {}: last CloneSet patch answered in {}s, manager patched all in {}s, rollout complete in {}s, cpu {}s, rss {} MiB steady / {} MiB peak / {} MiB after, heap {} steady / {} peak / {} after MiB, {} scrapes of {} series",
        shape(n, k),
        run + 1,
        system.label(),
        secs(sample.sent),
        secs(sample.patched),
        secs(sample.complete),
        secs(sample.cpu),
        sample.rss_steady_kib / 1024,
        sample.rss_peak_kib / 1024,
        sample.rss_after_kib / 1024,
        heap_mib(sample.heap_steady),
        heap_mib(sample.heap_peak),
        heap_mib(sample.heap_after),
        sample.scrapes,
        sample.series
    );
    workloads.delete(&pods).await?;
    Ok(sample)
}

/// The larger of two readings, either of which may be missing.
pub(crate) fn max_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// One system's samples at one size.
#[derive(Default)]
pub(crate) struct SystemResult {
    pub(crate) sent: Vec<Duration>,
    pub(crate) patched: Vec<Duration>,
    pub(crate) complete: Vec<Duration>,
    pub(crate) cpu: Vec<Duration>,
    pub(crate) rss_steady_kib: u64,
    pub(crate) rss_peak_kib: u64,
    pub(crate) heap_steady: Option<u64>,
    pub(crate) heap_peak: Option<u64>,
    pub(crate) rss_after_kib: u64,
    pub(crate) heap_after: Option<u64>,
    pub(crate) pod_writes: Vec<usize>,
    /// Series a scrape of /metrics held, per run.
    pub(crate) series: Vec<usize>,
}

impl SystemResult {
    pub(crate) fn add(&mut self, m: ManagerSample) {
        self.sent.push(m.sent);
        self.patched.push(m.patched);
        self.complete.push(m.complete);
        self.cpu.push(m.cpu);
        self.rss_steady_kib = self.rss_steady_kib.max(m.rss_steady_kib);
        self.rss_peak_kib = self.rss_peak_kib.max(m.rss_peak_kib);
        self.heap_steady = max_opt(self.heap_steady, m.heap_steady);
        self.heap_peak = max_opt(self.heap_peak, m.heap_peak);
        self.rss_after_kib = self.rss_after_kib.max(m.rss_after_kib);
        self.heap_after = max_opt(self.heap_after, m.heap_after);
        self.pod_writes.push(m.pod_writes);
        self.series.push(m.series);
    }
}

/// Every system's samples at one size, and the floor's.
pub(crate) struct SizeResult {
    pub(crate) systems: Vec<(System, SystemResult)>,
    pub(crate) floor: Vec<Duration>,
}

/// The turns of run `run`: the systems in order for an even run, reversed for an odd one, so
/// that over the runs each system goes first and last alike (A B, B A, A B, ...).
pub(crate) fn turn_order(systems: &[System], run: usize) -> Vec<System> {
    let mut order = systems.to_vec();
    if run % 2 == 1 {
        order.reverse();
    }
    order
}

pub(crate) async fn measure_size(
    args: &Args,
    client: &Client,
    limited: &Client,
    installed: &mut Installed,
    n: usize,
) -> Result<SizeResult> {
    let mut systems: Vec<(System, SystemResult)> = args
        .systems
        .iter()
        .map(|s| (*s, SystemResult::default()))
        .collect();
    let mut floor = Vec::new();
    let floor_system = args.systems[0];
    for run in 0..args.common.runs {
        // Alternate which goes first, so a drifting machine does not favour one side; the floor
        // goes first in odd runs and last in even ones, within the first system's turn.
        let floor_first = run % 2 == 1;
        for system in turn_order(&args.systems, run) {
            installed.ensure(system).await?;
            let mut manager = Manager::start(args, system, n, run)?;
            manager.wait_ready().await?;
            let with_floor = system == floor_system;
            if with_floor && floor_first {
                floor.push(floor_run(client, limited, n, run, args.concurrency).await?);
            }
            let m = manager_run(
                client,
                system,
                manager.pid(),
                (n, args.workloads),
                run,
                Duration::from_secs(args.settle),
            )
            .await?;
            if with_floor && !floor_first {
                floor.push(floor_run(client, limited, n, run, args.concurrency).await?);
            }
            if with_floor && let Some(f) = floor.last() {
                eprintln!(
                    "N={} run {}: floor patched all in {}s",
                    shape(n, args.workloads),
                    run + 1,
                    secs(*f)
                );
            }
            manager.stop().await;
            if let Some((_, r)) = systems.iter_mut().find(|(s, _)| *s == system) {
                r.add(m);
            }
        }
    }
    Ok(SizeResult { systems, floor })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_alternate_abba() {
        use System::{KruiseRs as K, Openkruise as O};
        let cases: [(&[System], usize, &[System]); 5] = [
            (&[K, O], 0, &[K, O]),
            (&[K, O], 1, &[O, K]),
            (&[K, O], 2, &[K, O]),
            (&[O, K], 1, &[K, O]),
            (&[K], 1, &[K]),
        ];
        for (systems, run, want) in cases {
            assert_eq!(turn_order(systems, run), want, "{systems:?} run {run}");
        }
    }
}
