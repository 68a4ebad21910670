//! Prometheus metrics of the manager, served on `/metrics`: the runner's reconcile metrics
//! ([`kruise_runtime::metrics`]) and the manager's own.

use std::time::Duration;

use kruise_runtime::metrics::{ControllerLabels, ReconcileMetrics, RecordReconcile};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkloadLabels {
    pub controller: String,
    pub namespace: String,
    pub name: String,
}

/// Every metric the manager exports.
pub struct Metrics {
    pub registry: Registry,
    /// Recorded by the runner ([`crate::runner::Controller`]) for every reconcile it runs.
    pub reconcile: ReconcileMetrics,
    pub inplace_started: Family<ControllerLabels, Counter>,
    pub inplace_completed: Family<ControllerLabels, Counter>,
    pub scale_expectation_leakage: Family<WorkloadLabels, Counter>,
    pub is_leader: Gauge,
    /// Set from [`crate::heap`] at each scrape.
    pub heap_live_bytes: Gauge,
    pub heap_peak_bytes: Gauge,
    /// The refusal counters of the PodUnavailableBudget and deletion protection, shared with the
    /// webhook (which counts most of them) and the workloads that charge a budget.
    pub protection: kruise_webhook::metrics::ProtectionMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("kruise_manager");
        let reconcile = ReconcileMetrics::register(&mut registry);
        let protection = kruise_webhook::metrics::ProtectionMetrics::default();
        protection.register(&mut registry);
        let inplace_started = Family::<ControllerLabels, Counter>::default();
        let inplace_completed = Family::<ControllerLabels, Counter>::default();
        let scale_expectation_leakage = Family::<WorkloadLabels, Counter>::default();
        let is_leader = Gauge::default();
        let heap_live_bytes = Gauge::default();
        let heap_peak_bytes = Gauge::default();
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
            reconcile,
            inplace_started,
            inplace_completed,
            scale_expectation_leakage,
            is_leader,
            heap_live_bytes,
            heap_peak_bytes,
            protection,
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

impl RecordReconcile for Metrics {
    fn reconciled(&self, controller: &str, took: Duration, error: Option<&str>) {
        self.reconcile.reconciled(controller, took, error);
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
