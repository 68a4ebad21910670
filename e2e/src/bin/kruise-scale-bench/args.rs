//! The command line: the systems under test and every knob of a run.

use std::path::PathBuf;

use clap::Parser;
use kruise_e2e::bench::args::{Common, at_least_one, release_bin};

use crate::scale_state;

/// A system under test: whose manager runs the CloneSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub(crate) enum System {
    /// Kruise-rs: kruise-manager.
    KruiseRs,
    /// Kruise-rs with `--workload-metrics=false`: beside `kruise-rs`, the workload metrics'
    /// cost.
    KruiseRsNoWorkloadMetrics,
    /// OpenKruise, the Go original: its `manager`.
    Openkruise,
}

impl System {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::KruiseRs => "Kruise-rs",
            Self::KruiseRsNoWorkloadMetrics => "Kruise-rs --workload-metrics=false",
            Self::Openkruise => "OpenKruise",
        }
    }

    /// The argument of `hack/scale-cluster.sh use`.
    pub(crate) fn arg(self) -> &'static str {
        match self {
            Self::KruiseRs | Self::KruiseRsNoWorkloadMetrics => "kruise-rs",
            Self::Openkruise => "openkruise",
        }
    }

    /// The name of its log and PID files under .cluster/scale (what `hack/scale-cluster.sh down`
    /// stops).
    pub(crate) fn process(self) -> &'static str {
        match self {
            Self::KruiseRs | Self::KruiseRsNoWorkloadMetrics => "kruise-manager",
            Self::Openkruise => "openkruise-manager",
        }
    }

    /// The live heap bytes its /metrics exports: ours from the counting allocator, OpenKruise's
    /// from the Go runtime (in-use heap spans; Go exports no peak).
    pub(crate) fn heap_live_metric(self) -> &'static str {
        match self {
            Self::KruiseRs | Self::KruiseRsNoWorkloadMetrics => "kruise_manager_heap_live_bytes",
            Self::Openkruise => "go_memstats_heap_inuse_bytes",
        }
    }

    pub(crate) fn heap_peak_metric(self) -> Option<&'static str> {
        match self {
            Self::KruiseRs | Self::KruiseRsNoWorkloadMetrics => {
                Some("kruise_manager_heap_peak_bytes")
            }
            Self::Openkruise => None,
        }
    }
}

/// The OpenKruise version the benchmark names (hack/build-openkruise.sh's pin).
pub(crate) fn openkruise_version() -> String {
    std::env::var("OPENKRUISE_VERSION").unwrap_or_else(|_| "v1.9.0".into())
}

/// Where hack/build-openkruise.sh puts OpenKruise's manager: `$KRS_CACHE`, else
/// `$XDG_CACHE_HOME/kruise-rs`, else `~/.cache/kruise-rs`, as hack/versions.sh.
pub(crate) fn openkruise_manager_default() -> PathBuf {
    let cache = std::env::var_os("KRS_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("kruise-rs")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/kruise-rs")))
        .unwrap_or_else(|| PathBuf::from(".cache/kruise-rs"));
    cache
        .join(format!("openkruise-{}", openkruise_version()))
        .join("bin/manager")
}

/// Controller-at-scale benchmark: kruise-manager (and OpenKruise's manager) against a floor
/// client on the scale cluster.
#[derive(Debug, Parser)]
#[command(name = "kruise-scale-bench")]
pub(crate) struct Args {
    /// Pods to measure (N), comma separated: one CloneSet of N Pods, or `--workloads` CloneSets
    /// sharing them.
    #[arg(long, value_delimiter = ',', default_value = "1000,5000", value_parser = at_least_one)]
    pub(crate) sizes: Vec<usize>,
    /// CloneSets (K) the N Pods of each size are spread over, N/K each (K must divide every
    /// size): 1 is one CloneSet of N Pods; `--sizes 10000 --workloads 2000` is 2,000 CloneSets
    /// of 5 Pods, created and all ready, then all given the new image at once.
    #[arg(long, default_value_t = 1, value_parser = at_least_one)]
    pub(crate) workloads: usize,
    /// Systems under test, comma separated, taking turns A B B A for each size.
    #[arg(long, value_delimiter = ',', default_value = "kruise-rs")]
    pub(crate) systems: Vec<System>,
    /// Client-side QPS limit of kruise-manager and the floor (0: none).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) qps: f32,
    /// Client-side burst of kruise-manager and the floor.
    #[arg(long, default_value_t = 0)]
    pub(crate) burst: u32,
    /// OpenKruise's client QPS and burst (`--rest-config-qps`, `--rest-config-burst`; its
    /// defaults are 30 and 50, and it ignores 0): set far above what the API server serves here,
    /// the equivalent of no limit, as kruise-manager runs with `--kube-api-qps 0`.
    #[arg(long, default_value_t = 100_000)]
    pub(crate) openkruise_qps: u32,
    #[arg(long, default_value_t = 100_000)]
    pub(crate) openkruise_burst: u32,
    /// Pods' patches the floor keeps in flight.
    #[arg(long, default_value_t = 32, value_parser = at_least_one)]
    pub(crate) concurrency: usize,
    /// The manager to start (a release build).
    #[arg(long, value_name = "BIN", default_value_os_t = release_bin("kruise-manager"))]
    pub(crate) manager: PathBuf,
    /// OpenKruise's manager (hack/build-openkruise.sh builds it).
    #[arg(long, value_name = "BIN", default_value_os_t = openkruise_manager_default())]
    pub(crate) openkruise_manager: PathBuf,
    /// The scale cluster's kubeconfig.
    #[arg(long, value_name = "FILE", default_value_os_t = scale_state().join("kubeconfig"))]
    pub(crate) kubeconfig: PathBuf,
    /// Seconds to let the manager settle before "steady" is read (after the N Pods are ready)
    /// and before "after" is read (after the rollout completed): what the manager keeps, not
    /// what a burst of work just left in the allocator.
    #[arg(long, default_value_t = 15)]
    pub(crate) settle: u64,
    #[command(flatten)]
    pub(crate) common: Common,
}

impl Args {
    /// Refuses a size `--workloads` does not divide: every CloneSet has the same replicas, so
    /// the table's shape (K × N/K) is exact.
    pub(crate) fn check_shape(&self) -> Result<(), String> {
        let k = self.workloads;
        match self.sizes.iter().find(|&&n| n % k != 0) {
            Some(n) => Err(format!(
                "--workloads {k} does not divide --sizes {n}: every CloneSet has N/K Pods"
            )),
            None => Ok(()),
        }
    }
}

/// A size's shape as the report names it: `N` for one CloneSet, `N (K × N/K)` for K.
pub(crate) fn shape(n: usize, k: usize) -> String {
    if k == 1 {
        n.to_string()
    } else {
        format!("{n} ({k} × {})", n / k)
    }
}

/// A size's shape in names (namespaces, log files): `N`, or `KxP` for K CloneSets of P Pods.
pub(crate) fn shape_tag(n: usize, k: usize) -> String {
    if k == 1 {
        n.to_string()
    } else {
        format!("{k}x{}", n / k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn systems_parse() {
        let parse = |a: &[&str]| {
            Args::try_parse_from(std::iter::once("b").chain(a.iter().copied())).map(|a| a.systems)
        };
        assert_eq!(parse(&[]).ok(), Some(vec![System::KruiseRs]));
        assert_eq!(
            parse(&["--systems", "kruise-rs,openkruise"]).ok(),
            Some(vec![System::KruiseRs, System::Openkruise])
        );
        assert!(parse(&["--systems", "go"]).is_err());
    }

    #[test]
    fn workloads_parse_and_divide_the_sizes() {
        let parse =
            |a: &[&str]| Args::try_parse_from(std::iter::once("b").chain(a.iter().copied()));
        let one = parse(&[]).expect("defaults");
        assert_eq!(one.workloads, 1);
        assert!(one.check_shape().is_ok());
        let many = parse(&["--sizes", "200,10000", "--workloads", "40"]).expect("40 workloads");
        assert_eq!(many.workloads, 40);
        assert!(many.check_shape().is_ok());
        let odd = parse(&["--sizes", "1000,1001", "--workloads", "2"]).expect("parses");
        let err = odd.check_shape().expect_err("2 does not divide 1001");
        assert!(err.contains("1001"), "{err}");
        assert!(parse(&["--workloads", "0"]).is_err());
    }

    #[test]
    fn shapes_name_the_workloads() {
        assert_eq!(shape(1000, 1), "1000");
        assert_eq!(shape(10000, 2000), "10000 (2000 × 5)");
        assert_eq!(shape_tag(1000, 1), "1000");
        assert_eq!(shape_tag(10000, 2000), "2000x5");
    }
}
