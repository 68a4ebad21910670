//! What a reconcile needs: the client and the Pods patched recently.

use kube::Client;

use super::plan::Recent;

/// The controller's name in metrics and logs.
pub(super) const METRIC_NAME: &str = "podreadiness";

/// Shared state of the controller.
pub struct Context {
    pub client: Client,
    /// Pods patched recently, so that the events racing our own write do not repeat it.
    pub recent: Recent,
}
