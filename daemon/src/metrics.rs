//! Prometheus metrics of the daemon (served on `/metrics`): its duties' counters and the
//! runner's reconcile metrics ([`kruise_runtime::metrics`]) of its two controllers.

use std::sync::Arc;
use std::time::Duration;

use kruise_runtime::metrics::{ReconcileMetrics, RecordReconcile};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DutyLabel {
    duty: String,
}

/// Counters shared by every duty; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pulls: Family<ResultLabel, Counter>,
    stops: Family<DutyLabel, Counter>,
    meta_patches: Counter,
    crr_completed: Counter,
    /// 1 while the daemon reaches its node's CRI runtime, else 0.
    cri_available: Gauge,
    /// Recorded by the runner for every reconcile of containermeta and containerrecreate.
    reconcile: ReconcileMetrics,
}

impl Metrics {
    /// Creates the counters and registers them under the `kruise_daemon` prefix.
    pub fn new(registry: &mut Registry) -> Self {
        let sub = registry.sub_registry_with_prefix("kruise_daemon");
        let m = Metrics {
            reconcile: ReconcileMetrics::register(sub),
            ..Metrics::default()
        };
        sub.register(
            "image_pulls",
            "Image tags pulled, by result",
            m.pulls.clone(),
        );
        sub.register(
            "container_stops",
            "Containers stopped through CRI, by duty",
            m.stops.clone(),
        );
        sub.register(
            "runtime_containers_meta_patches",
            "Pods whose runtime-containers-meta annotation was written",
            m.meta_patches.clone(),
        );
        sub.register(
            "crr_completed",
            "ContainerRecreateRequests completed",
            m.crr_completed.clone(),
        );
        sub.register(
            "cri_available",
            "1 while the daemon reaches its node's CRI runtime, 0 while it waits for one",
            m.cri_available.clone(),
        );
        m
    }

    pub fn pull(&self, ok: bool) {
        let result = if ok { "succeeded" } else { "failed" }.to_string();
        self.pulls.get_or_create(&ResultLabel { result }).inc();
    }

    pub fn container_stop(&self, duty: &str) {
        self.stops
            .get_or_create(&DutyLabel {
                duty: duty.to_string(),
            })
            .inc();
    }

    pub fn meta_patch(&self) {
        self.meta_patches.inc();
    }

    pub fn crr_completed(&self) {
        self.crr_completed.inc();
    }

    pub fn set_cri_available(&self, available: bool) {
        self.cri_available.set(i64::from(available));
    }
}

impl RecordReconcile for Metrics {
    fn reconciled(&self, controller: &str, took: Duration, error: Option<&str>) {
        self.reconcile.reconciled(controller, took, error);
    }
}

/// Renders the registry in the text exposition format.
pub fn render(registry: &Arc<Registry>) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_exposed() {
        let mut reg = Registry::default();
        let m = Metrics::new(&mut reg);
        m.pull(true);
        m.container_stop("containerrecreate");
        m.set_cri_available(true);
        let text = render(&Arc::new(reg)).unwrap();
        assert!(text.contains("kruise_daemon_cri_available 1"), "{text}");
        assert!(text.contains("kruise_daemon_image_pulls_total{result=\"succeeded\"} 1"));
        assert!(text.contains("kruise_daemon_container_stops_total{duty=\"containerrecreate\"} 1"));
    }

    #[test]
    fn runner_reconciles_are_exposed() {
        let mut reg = Registry::default();
        let m = Metrics::new(&mut reg);
        m.reconciled("containerrecreate", Duration::from_millis(3), Some("cri"));
        let text = render(&Arc::new(reg)).unwrap();
        assert!(
            text.contains("kruise_daemon_reconciles_total{controller=\"containerrecreate\"} 1")
        );
        assert!(text.contains(
            "kruise_daemon_reconcile_errors_total{controller=\"containerrecreate\",error=\"cri\"} 1"
        ));
    }
}
