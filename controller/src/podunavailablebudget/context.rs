//! What a reconcile of a budget needs: the client, the shared Pod cache, Events, and the
//! resources discovery found for the kinds budgets target.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::events::Recorder;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::discovery::ApiResource;
use kube::runtime::events::{EventType, Reporter};

use crate::metrics::Metrics;
use crate::podcache::PodCache;

/// Name in Events and logs (upstream's).
pub const CONTROLLER_NAME: &str = "podunavailablebudget-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "podunavailablebudget";

/// Shared state of the PodUnavailableBudget controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Only budgets in this namespace (all when `None`).
    pub namespace: Option<String>,
    /// `apiVersion/kind` → resource, from discovery (kinds rarely change while we run).
    resources: Mutex<HashMap<String, ApiResource>>,
}

impl Context {
    pub fn new(
        client: Client,
        pods: PodCache,
        metrics: Arc<Metrics>,
        instance: Option<String>,
        namespace: Option<String>,
    ) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.to_owned(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            pods,
            metrics,
            namespace,
            resources: Mutex::default(),
        }
    }

    /// The resource serving `kind` in `api_version`, asked from discovery once.
    pub async fn resource(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<ApiResource, kube::Error> {
        let key = format!("{api_version}/{kind}");
        if let Some(r) = self
            .resources
            .lock()
            .ok()
            .and_then(|m| m.get(&key).cloned())
        {
            return Ok(r);
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let (ar, _caps) = kube::discovery::pinned_kind(&self.client, &gvk).await?;
        if let Ok(mut m) = self.resources.lock() {
            m.insert(key, ar.clone());
        }
        Ok(ar)
    }

    /// Records an Event; a failure to record is logged, never fatal.
    pub async fn event(
        &self,
        about: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let ev = crate::events::event(type_, reason, note, None);
        crate::events::publish_event(&self.recorder, &ev, about).await;
    }
}
