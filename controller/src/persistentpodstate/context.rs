//! What a reconcile of a PersistentPodState needs: the client, the shared Pod cache, Events —
//! the common [`Base`](crate::registry::Base) and nothing more.

pub use crate::registry::Base as Context;

/// Name in Events and logs (upstream's).
pub const CONTROLLER_NAME: &str = "persistentpodstate-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "persistentpodstate";
/// Label value of the `controller` metric label of the generation from StatefulSets.
pub(super) const GENERATOR_METRIC_NAME: &str = "persistentpodstate-generator";
