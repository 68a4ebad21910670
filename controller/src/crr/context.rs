//! What a reconcile needs: the client and the shared Pod cache.

use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::ContainerRecreateRequest;
use kube::Api;
use kube::Client;
use kube::runtime::reflector::ObjectRef;

use super::error::Error;
use crate::podcache::PodCache;
use crate::stored::Stored;

/// The controller's name in metrics and logs.
pub(super) const METRIC_NAME: &str = "containerrecreaterequest";

/// Shared state of the controller.
pub struct Context {
    pub client: Client,
    pub pods: PodCache,
    /// Requests are watched and written at their storage version, converted here.
    pub stored: Stored<ContainerRecreateRequest>,
}

impl Context {
    /// The request's pod: from the cache, confirmed with the API server when the cache does not
    /// have it (the cache may watch one namespace only, or lag behind a just-created pod).
    pub async fn get_pod(&self, ns: &str, name: &str) -> Result<Option<Pod>, Error> {
        let cached = self
            .pods
            .store()
            .get(&ObjectRef::new(name).within(ns))
            .map(|p| p.as_ref().clone());
        if cached.is_some() {
            return Ok(cached);
        }
        Ok(Api::<Pod>::namespaced(self.client.clone(), ns)
            .get_opt(name)
            .await?)
    }
}
