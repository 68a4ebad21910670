//! What a reconcile of a budget needs: the client, the shared Pod cache, Events, and the
//! resources discovery found for the kinds budgets target.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::discovery::ApiResource;

use crate::registry::{Base, Shared};

/// Name in Events and logs (upstream's).
pub const CONTROLLER_NAME: &str = "podunavailablebudget-controller";
/// Label value of the `controller` metric label.
pub(super) const METRIC_NAME: &str = "podunavailablebudget";

/// Shared state of the PodUnavailableBudget controller.
pub struct Context {
    base: Base,
    /// `apiVersion/kind` → resource, from discovery (kinds rarely change while we run).
    resources: Mutex<HashMap<String, ApiResource>>,
}

crate::deref_base!(Context);

impl Context {
    pub fn new(shared: &Shared) -> Self {
        Self {
            base: shared.base(CONTROLLER_NAME),
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
        let (mut ar, _caps) = kube::discovery::pinned_kind(&self.client, &gvk).await?;
        // A Kruise kind is read at its storage version (no conversion webhook call): a budget
        // reads only `spec.replicas` and `spec.selector`, the same in every version.
        let crd = format!("{}.{}", ar.plural, ar.group);
        if let Some((_, v)) = kruise_api::crds::STORAGE_VERSIONS
            .iter()
            .find(|(n, _)| *n == crd)
        {
            ar.version = (*v).to_owned();
            ar.api_version = format!("{}/{v}", ar.group);
        }
        if let Ok(mut m) = self.resources.lock() {
            m.insert(key, ar.clone());
        }
        Ok(ar)
    }
}
