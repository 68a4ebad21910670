//! What a reconcile of a WorkloadSpread needs: the client, the shared Pod cache.

use std::sync::Arc;

use kube::Client;

use crate::metrics::Metrics;
use crate::podcache::PodCache;

/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "workloadspread";

/// Shared state of the WorkloadSpread controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    pub metrics: Arc<Metrics>,
    /// Only objects in this namespace (all when `None`).
    pub namespace: Option<String>,
}
