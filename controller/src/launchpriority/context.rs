//! What a reconcile needs: the client.

use kube::Client;

/// The controller's name in metrics and logs.
pub(super) const METRIC_NAME: &str = "containerlaunchpriority";

/// Shared state of the controller.
pub struct Context {
    pub client: Client,
}
