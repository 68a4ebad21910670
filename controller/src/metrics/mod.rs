//! Prometheus metrics of the manager, served on `/metrics`: the runner's reconcile metrics
//! ([`kruise_runtime::metrics`]), the manager's own (`kruise_manager_*`), and the workload
//! metrics ([`workloads`], `kruise_<kind>_*`).

use std::sync::Arc;
use std::time::Duration;

use kruise_runtime::metrics::{ControllerLabels, ReconcileMetrics, RecordReconcile};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::inplace::InPlaceObserver;

mod tables;
pub mod workloads;

/// Buckets of the in-place update duration: 0.5 s to about 17 minutes, doubling.
fn inplace_duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.5, 2.0, 12))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpdateLabels {
    pub controller: String,
    /// `in_place` or `recreate`.
    pub method: String,
}

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
    /// From the in-place patch to InPlaceUpdateReady=True, per Pod updated in place.
    pub inplace_duration: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    /// Pod updates started, by how: in place or by recreating the Pod.
    pub pod_updates: Family<UpdateLabels, Counter>,
    pub scale_expectation_leakage: Family<WorkloadLabels, Counter>,
    pub is_leader: Gauge,
    /// Set from [`crate::heap`] at each scrape.
    pub heap_live_bytes: Gauge,
    pub heap_peak_bytes: Gauge,
    /// The refusal counters of the PodUnavailableBudget and deletion protection, shared with the
    /// webhook (which counts most of them) and the workloads that charge a budget.
    pub protection: kruise_webhook::metrics::ProtectionMetrics,
    /// The workload gauges, computed at each scrape from the controllers' stores.
    pub workloads: Arc<workloads::WorkloadMetrics>,
    /// Holds [`Self::workloads`]: under the `kruise` prefix, not `kruise_manager`.
    workload_registry: Registry,
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
        let inplace_duration =
            Family::<ControllerLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                inplace_duration_histogram,
            );
        let pod_updates = Family::<UpdateLabels, Counter>::default();
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
            "inplace_update_duration_seconds",
            "Seconds from a Pod's in-place update to its InPlaceUpdateReady=True",
            inplace_duration.clone(),
        );
        registry.register(
            "pod_updates",
            "Pod updates started, in place or by recreating the Pod",
            pod_updates.clone(),
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
        let workloads = Arc::new(workloads::WorkloadMetrics::new(is_leader.clone()));
        let mut workload_registry = Registry::with_prefix("kruise");
        workload_registry.register_collector(Box::new(workloads.clone()));
        Self {
            registry,
            reconcile,
            inplace_started,
            inplace_completed,
            inplace_duration,
            pod_updates,
            scale_expectation_leakage,
            is_leader,
            heap_live_bytes,
            heap_peak_bytes,
            protection,
            workloads,
            workload_registry,
        }
    }

    pub fn inplace_started(&self, controller: &str) {
        self.inplace_started
            .get_or_create(&ControllerLabels {
                controller: controller.to_string(),
            })
            .inc();
    }

    /// A Pod update started by recreating the Pod (in-place ones are counted by the engine).
    pub fn recreate_started(&self, controller: &str) {
        self.pod_update(controller, "recreate");
    }

    fn pod_update(&self, controller: &str, method: &str) {
        self.pod_updates
            .get_or_create(&UpdateLabels {
                controller: controller.to_string(),
                method: method.to_string(),
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
        prometheus_client::encoding::text::encode_registry(&mut out, &self.registry)?;
        prometheus_client::encoding::text::encode_registry(&mut out, &self.workload_registry)?;
        prometheus_client::encoding::text::encode_eof(&mut out)?;
        Ok(out)
    }
}

impl InPlaceObserver for Metrics {
    fn update_started(&self, controller: &str) {
        self.inplace_started(controller);
        self.pod_update(controller, "in_place");
    }

    fn update_ready(&self, controller: &str, took: Duration) {
        self.inplace_duration
            .get_or_create(&ControllerLabels {
                controller: controller.to_string(),
            })
            .observe(took.as_secs_f64());
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

#[cfg(test)]
#[path = "dashboard_tests.rs"]
mod dashboard_tests;
