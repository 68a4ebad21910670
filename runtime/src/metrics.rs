//! The metrics the controller runner records for every reconcile: how many ran, how many failed
//! (by error kind) and how long they took, per controller.
//!
//! The families live in whatever registry the binary serves (the manager's under
//! `kruise_manager`, the daemon's under `kruise_daemon`); [`ReconcileMetrics::default`] keeps
//! them unregistered, for a runner whose counts nobody scrapes.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
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

fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// What the runner records of each reconcile. The binary's own metrics type implements it by
/// handing the call to the [`ReconcileMetrics`] it registered, so the runner never needs to know
/// the rest of the binary's metrics.
pub trait RecordReconcile: Send + Sync + 'static {
    /// Counts one reconcile of `controller` and its duration; `error` is the failure's metric
    /// label.
    fn reconciled(&self, controller: &str, took: Duration, error: Option<&str>);
}

/// The reconcile counter, error counter and duration histogram; cheap to clone (the clones
/// share the counts).
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    pub reconciles: Family<ControllerLabels, Counter>,
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    pub reconcile_duration: Family<ControllerLabels, Histogram>,
}

impl Default for ReconcileMetrics {
    fn default() -> Self {
        Self {
            reconciles: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: Family::new_with_constructor(
                duration_histogram as fn() -> Histogram,
            ),
        }
    }
}

impl ReconcileMetrics {
    /// Creates the families and registers them in `registry`, under its prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "reconciles",
            "Reconciles run, per controller",
            m.reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, per controller and error kind",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of reconciles, per controller",
            m.reconcile_duration.clone(),
        );
        m
    }
}

impl RecordReconcile for ReconcileMetrics {
    fn reconciled(&self, controller: &str, took: Duration, error: Option<&str>) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_families_are_encoded_under_the_registry_prefix() {
        let mut registry = Registry::with_prefix("x");
        let m = ReconcileMetrics::register(&mut registry);
        m.reconciled("a", Duration::from_millis(20), None);
        m.reconciled("a", Duration::from_millis(20), Some("kube"));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(text.contains("x_reconciles_total{controller=\"a\"} 2"));
        assert!(text.contains("x_reconcile_errors_total{controller=\"a\",error=\"kube\"} 1"));
        assert!(text.contains("x_reconcile_duration_seconds_count{controller=\"a\"} 2"));
    }

    #[test]
    fn an_unregistered_copy_still_counts() {
        let m = ReconcileMetrics::default();
        m.reconciled("a", Duration::ZERO, Some("cri"));
        let l = ErrorLabels {
            controller: "a".into(),
            error: "cri".into(),
        };
        assert_eq!(m.reconcile_errors.get_or_create(&l).get(), 1);
    }
}
