//! Prometheus metrics of the manager, served on `/metrics`.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub controller: String,
    pub error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkloadLabels {
    pub controller: String,
    pub namespace: String,
    pub name: String,
}

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// Every metric the manager exports.
pub struct Metrics {
    pub registry: Registry,
    pub reconciles: Family<ControllerLabels, Counter>,
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    pub reconcile_duration: Family<ControllerLabels, Histogram>,
    pub inplace_started: Family<ControllerLabels, Counter>,
    pub inplace_completed: Family<ControllerLabels, Counter>,
    pub scale_expectation_leakage: Family<WorkloadLabels, Counter>,
    pub is_leader: Gauge,
    /// Set from [`crate::heap`] at each scrape.
    pub heap_live_bytes: Gauge,
    pub heap_peak_bytes: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("kruise_manager");
        let reconciles = Family::<ControllerLabels, Counter>::default();
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        let reconcile_duration = Family::<ControllerLabels, Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        let inplace_started = Family::<ControllerLabels, Counter>::default();
        let inplace_completed = Family::<ControllerLabels, Counter>::default();
        let scale_expectation_leakage = Family::<WorkloadLabels, Counter>::default();
        let is_leader = Gauge::default();
        let heap_live_bytes = Gauge::default();
        let heap_peak_bytes = Gauge::default();
        registry.register(
            "reconciles",
            "Reconciles run, per controller",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, per controller and error kind",
            reconcile_errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of reconciles, per controller",
            reconcile_duration.clone(),
        );
        registry.register(
            "inplace_updates_started",
            "Pods whose in-place update was started",
            inplace_started.clone(),
        );
        registry.register(
            "inplace_updates_completed",
            "Pods whose in-place update finished",
            inplace_completed.clone(),
        );
        registry.register(
            "scale_expectation_leakage",
            "Scale expectations given up after the timeout",
            scale_expectation_leakage.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease",
            is_leader.clone(),
        );
        registry.register(
            "heap_live_bytes",
            "Heap bytes allocated and not freed (0 without the counting allocator)",
            heap_live_bytes.clone(),
        );
        registry.register(
            "heap_peak_bytes",
            "Most heap bytes allocated at once since the start",
            heap_peak_bytes.clone(),
        );
        Self {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_duration,
            inplace_started,
            inplace_completed,
            scale_expectation_leakage,
            is_leader,
            heap_live_bytes,
            heap_peak_bytes,
        }
    }

    /// Counts one reconcile of `controller` and its duration; `error` is the failure's
    /// metric label. [`crate::runner::Controller`] records every reconcile it runs.
    pub fn reconciled(&self, controller: &str, took: Duration, error: Option<&str>) {
        let l = ControllerLabels {
            controller: controller.to_string(),
        };
        self.reconciles.get_or_create(&l).inc();
        self.reconcile_duration
            .get_or_create(&l)
            .observe(took.as_secs_f64());
        if let Some(e) = error {
            self.reconcile_errors
                .get_or_create(&ErrorLabels {
                    controller: controller.to_string(),
                    error: e.to_string(),
                })
                .inc();
        }
    }

    pub fn inplace_started(&self, controller: &str) {
        self.inplace_started
            .get_or_create(&ControllerLabels {
                controller: controller.to_string(),
            })
            .inc();
    }

    pub fn inplace_completed(&self, controller: &str) {
        self.inplace_completed
            .get_or_create(&ControllerLabels {
                controller: controller.to_string(),
            })
            .inc();
    }

    /// The text exposition format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        self.heap_live_bytes
            .set(i64::try_from(crate::heap::live_bytes()).unwrap_or(i64::MAX));
        self.heap_peak_bytes
            .set(i64::try_from(crate::heap::peak_bytes()).unwrap_or(i64::MAX));
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_counters_and_histograms() {
        let m = Metrics::new();
        m.reconciled("cloneset", Duration::from_millis(20), None);
        m.reconciled("cloneset", Duration::from_millis(20), Some("kube"));
        m.inplace_started("cloneset");
        let text = m.encode().expect("encode");
        assert!(text.contains("kruise_manager_reconciles_total{controller=\"cloneset\"} 2"));
        assert!(text.contains(
            "kruise_manager_reconcile_errors_total{controller=\"cloneset\",error=\"kube\"} 1"
        ));
        assert!(
            text.contains(
                "kruise_manager_inplace_updates_started_total{controller=\"cloneset\"} 1"
            )
        );
        assert!(text.contains("kruise_manager_reconcile_duration_seconds_bucket"));
    }
}
