//! The manager under test as a process (started fresh for each turn, its PID file where
//! `hack/scale-cluster.sh down` finds it), and swapping the system the scale cluster has installed.

use std::time::Duration;

use kruise_e2e::Result;
use kruise_e2e::bench::process::{HealthError, ProcessGuard, http_get, metric};

use crate::args::{Args, System};
use crate::{other, scale_state};

/// Ports of the benchmark's manager; the local cluster's dev manager uses 9876/8080/8000.
pub(crate) const WEBHOOK_PORT: u16 = 19876;
pub(crate) const METRICS_ADDR: &str = "127.0.0.1:18080";
pub(crate) const HEALTH_ADDR: &str = "127.0.0.1:18000";

/// The manager under test; its guard kills it at once when dropped and removes its PID file.
pub(crate) struct Manager {
    pub(crate) guard: ProcessGuard,
    pub(crate) system: System,
}

impl Manager {
    pub(crate) fn start(args: &Args, system: System, n: usize, run: usize) -> Result<Self> {
        let state = scale_state();
        let logs = state.join("logs");
        let pids = state.join("pids");
        std::fs::create_dir_all(&logs)?;
        std::fs::create_dir_all(&pids)?;
        let name = system.process();
        let shape = crate::args::shape_tag(n, args.workloads);
        let log = std::fs::File::create(logs.join(format!("{name}-{shape}-{}.log", run + 1)))?;
        let bin = match system {
            System::KruiseRs | System::KruiseRsNoWorkloadMetrics => &args.manager,
            System::Openkruise => &args.openkruise_manager,
        };
        let mut cmd = std::process::Command::new(bin);
        match system {
            System::KruiseRs | System::KruiseRsNoWorkloadMetrics => {
                let on = system == System::KruiseRs;
                cmd.arg("--kubeconfig")
                    .arg(&args.kubeconfig)
                    .args(["--webhook-host", "127.0.0.1"])
                    .args(["--webhook-port", &WEBHOOK_PORT.to_string()])
                    .args(["--metrics-addr", METRICS_ADDR, "--health-addr", HEALTH_ADDR])
                    .args(["--leader-elect", "false"])
                    .args(["--kube-api-qps", &args.qps.to_string()])
                    .args(["--kube-api-burst", &args.burst.to_string()])
                    .arg(format!("--workload-metrics={on}"))
                    .env(
                        "RUST_LOG",
                        std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
                    );
            }
            System::Openkruise => {
                // Its webhook at a host URL (WEBHOOK_HOST), on the port ours uses; it keeps its
                // certificates in a directory of the scale cluster's state.
                let certs = state.join("openkruise-certs");
                std::fs::create_dir_all(&certs)?;
                cmd.arg(format!("--kubeconfig={}", args.kubeconfig.display()))
                    .arg("--enable-leader-election=false")
                    .arg(format!("--metrics-addr={METRICS_ADDR}"))
                    .arg(format!("--health-probe-addr={HEALTH_ADDR}"))
                    .arg("--enable-pprof=false")
                    .arg(format!("--rest-config-qps={}", args.openkruise_qps))
                    .arg(format!("--rest-config-burst={}", args.openkruise_burst))
                    .env("WEBHOOK_HOST", "127.0.0.1")
                    .env("WEBHOOK_PORT", WEBHOOK_PORT.to_string())
                    .env("WEBHOOK_CERT_DIR", &certs);
            }
        }
        cmd.env("POD_NAMESPACE", "kruise-system")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let mut guard = ProcessGuard::spawn(&mut cmd, Duration::ZERO)
            .map_err(|e| other(format!("starting {}: {e}", bin.display())))?;
        guard.write_pid_file(pids.join(format!("{name}.pid")))?;
        Ok(Self { guard, system })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.guard.pid()
    }

    pub(crate) async fn wait_ready(&mut self) -> Result<()> {
        let name = self.system.process();
        let ready = self
            .guard
            .wait_healthy(
                HEALTH_ADDR,
                "/readyz",
                Duration::from_secs(120),
                Duration::from_millis(250),
            )
            .await;
        match ready {
            Ok(()) => Ok(()),
            Err(HealthError::Exited(status)) => Err(other(format!(
                "{name} exited ({status}) before it was ready; see .cluster/scale/logs/"
            ))),
            Err(HealthError::Timeout(_)) => Err(other(format!("{name} not ready after 120 s"))),
            Err(HealthError::Io(e)) => Err(e.into()),
        }
    }

    /// SIGTERM, then SIGKILL after 15 s.
    pub(crate) async fn stop(self) {
        self.guard.stop(Duration::from_secs(15)).await;
    }
}

/// Installs `system`'s CRDs and webhook configurations on the scale cluster
/// (`hack/scale-cluster.sh use`), with no manager running.
pub(crate) async fn use_system(system: System) -> Result<()> {
    let script = kruise_e2e::repo_root().join("hack/scale-cluster.sh");
    let status = tokio::process::Command::new(&script)
        .args(["use", system.arg()])
        .stdin(std::process::Stdio::null())
        .status()
        .await?;
    if status.success() {
        Ok(())
    } else {
        Err(other(format!(
            "{} use {}: {status}",
            script.display(),
            system.arg()
        )))
    }
}

/// A byte count the manager exports on /metrics (None when it cannot be read).
pub(crate) fn manager_metric(name: &str) -> Option<u64> {
    http_get(METRICS_ADDR, "/metrics")
        .and_then(|t| metric(&t, name))
        .map(|v| v as u64)
}

/// Scrapes the manager's /metrics once a second, as an eager Prometheus would, so that what a
/// scrape costs (the workload metrics are computed then) is part of what the run measures.
pub(crate) struct Scraper {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(usize, usize)>,
}

impl Scraper {
    pub(crate) fn start() -> Self {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let (mut scrapes, mut series) = (0, 0);
            while !flag.load(Ordering::Relaxed) {
                if let Some(text) = http_get(METRICS_ADDR, "/metrics") {
                    scrapes += 1;
                    series = text.lines().filter(|l| !l.starts_with('#')).count();
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            (scrapes, series)
        });
        Self { stop, thread }
    }

    /// Stops; the scrapes done and the series the last one held.
    pub(crate) fn stop(self) -> (usize, usize) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or((0, 0))
    }
}

/// What the scale cluster has installed: `Some` once known (it comes up with Kruise-rs's CRDs;
/// a run with OpenKruise swaps them in before its first turn whatever was there).
pub(crate) struct Installed(pub(crate) Option<System>);

impl Installed {
    pub(crate) async fn ensure(&mut self, system: System) -> Result<()> {
        // Both Kruise-rs variants run on the same CRDs and webhook configurations.
        if self.0.map(System::arg) != Some(system.arg()) {
            // Unknown until the swap succeeds: a half-done swap is redone next time.
            self.0 = None;
            use_system(system).await?;
            self.0 = Some(system);
        }
        Ok(())
    }
}
