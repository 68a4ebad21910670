//! [`PpmLookup`] against the API server: PodProbeMarkers from the watch cache once it has
//! loaded (the cache runs only while `EnablePodProbeMarkerOnServerless` is on), listed before
//! that.

use kruise_api::apps::v1alpha1::PodProbeMarker;

use super::ApiCluster;
use crate::podprobemarker::PpmLookup;

impl PpmLookup for ApiCluster {
    async fn pod_probe_markers(&self, namespace: &str) -> Result<Vec<PodProbeMarker>, String> {
        if let Some(list) = self
            .pod_probe_markers
            .as_ref()
            .and_then(|c| c.snapshot(namespace))
        {
            return Ok(list);
        }
        let Some(client) = &self.client else {
            return Ok(Vec::new());
        };
        let api: kube::Api<PodProbeMarker> = kube::Api::namespaced(client.clone(), namespace);
        match tokio::time::timeout(self.timeout, api.list(&Default::default())).await {
            Err(_) => Err(format!(
                "cannot list PodProbeMarkers: no answer from the API server within {:?}",
                self.timeout
            )),
            Ok(Ok(list)) => Ok(list.items),
            // The CRD may not be installed: no Pod is probed.
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(Vec::new()),
            Ok(Err(e)) => Err(format!("cannot list PodProbeMarkers: {e}")),
        }
    }
}
