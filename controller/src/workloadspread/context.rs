//! What a reconcile of a WorkloadSpread needs: the client, the shared Pod cache, Events — the
//! common [`Base`](crate::registry::Base) and nothing more.

pub use crate::registry::Base as Context;

/// Name in Events and logs (upstream's).
pub const CONTROLLER_NAME: &str = "workloadspread-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "workloadspread";
