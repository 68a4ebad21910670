//! The kit every benchmark binary (`src/bin/kruise-*bench.rs`) shares: the command-line
//! arguments they have in common, a guard that stops a child process by its PID, an HTTP health
//! probe, sample statistics, RFC 3339 timestamps, the machine a table was measured on, appending
//! a table to BENCHMARKS.md, and a process's memory and CPU time from /proc.

pub mod admission;
pub mod args;
pub mod process;
pub mod stats;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// `now` in RFC 3339, UTC, whole seconds: how Kubernetes writes its timestamps.
pub fn rfc3339(now: jiff::Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The current time as [`rfc3339`] writes it.
pub fn rfc3339_now() -> String {
    rfc3339(jiff::Timestamp::now())
}

/// "N cores, M GiB, Linux <kernel>" of this machine.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| meminfo_kib(&m, "MemTotal"))
        .map(|kib| format!("{} GiB", kib / 1024 / 1024))
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} cores, {mem}, Linux {}", kernel.trim())
}

fn meminfo_kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Appends `text` to the file at `path`, creating it if needed.
pub fn append(path: &str, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(text.as_bytes())
}

/// Resident set size of process `pid` in KiB (VmRSS), if it still runs.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    meminfo_kib(&status, "VmRSS")
}

/// Clock ticks per second of /proc/<pid>/stat times. USER_HZ is 100 on every Linux
/// architecture we build for; asking `getconf` keeps it honest elsewhere.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// CPU time (user + system) process `pid` has used so far.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(Duration::from_secs_f64((utime + stime) / clock_ticks()))
}

/// Samples the process's RSS every 100 ms and keeps the peak.
pub struct RssPeak {
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssPeak {
    pub fn start(pid: u32) -> Self {
        let peak = Arc::new(AtomicU64::new(rss_kib(pid).unwrap_or(0)));
        let p = peak.clone();
        let task = tokio::spawn(async move {
            loop {
                if let Some(k) = rss_kib(pid) {
                    p.fetch_max(k, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { peak, task }
    }
    pub fn stop(self) -> u64 {
        self.task.abort();
        self.peak.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_is_whole_seconds_in_utc() {
        let cases = [
            (0, 0, "1970-01-01T00:00:00Z"),
            (1_704_067_200, 0, "2024-01-01T00:00:00Z"),
            (951_782_400, 999_999_999, "2000-02-29T00:00:00Z"),
            (1_798_761_599, 500_000_000, "2026-12-31T23:59:59Z"),
        ];
        for (secs, nanos, want) in cases {
            let t = jiff::Timestamp::new(secs, nanos).expect("timestamp");
            assert_eq!(rfc3339(t), want, "{secs}.{nanos}");
        }
        assert_eq!(rfc3339_now().len(), "1970-01-01T00:00:00Z".len());
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(rss_kib(me).is_some_and(|k| k > 0));
        assert!(cpu_time(me).is_some());
    }

    #[test]
    fn meminfo_line() {
        assert_eq!(
            meminfo_kib("VmPeak:\t 10 kB\nVmRSS:\t  2048 kB\n", "VmRSS"),
            Some(2048)
        );
    }
}
