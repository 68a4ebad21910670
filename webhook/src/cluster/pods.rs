//! [`PodLookup`] from the API server: the Pod a ContainerRecreateRequest names.

use k8s_openapi::api::core::v1::Pod;

use super::ApiCluster;
use crate::crr::mutation::PodLookup;

impl PodLookup for ApiCluster {
    async fn pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, String> {
        let Some(client) = &self.client else {
            return Err("the webhook has no Kubernetes client".to_owned());
        };
        let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), namespace);
        match tokio::time::timeout(self.timeout, api.get_opt(name)).await {
            Ok(res) => res.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "no answer from the API server within {:?}",
                self.timeout
            )),
        }
    }
}
