//! [`PpsLookup`] against the API server: PersistentPodStates from the watch cache once it has
//! loaded, listed before that (and always for the conflict check of the validation).

use kruise_api::apps::v1alpha1::{PersistentPodState, PpsWorkloadWhiteList};

use super::ApiCluster;
use crate::persistentpodstate::PpsLookup;
use crate::sidecarset::SidecarSetLookup;

impl PpsLookup for ApiCluster {
    async fn persistent_pod_states(
        &self,
        namespace: &str,
    ) -> Result<Vec<PersistentPodState>, String> {
        if let Some(list) = self
            .persistent_pod_states
            .as_ref()
            .and_then(|c| c.snapshot(namespace))
        {
            return Ok(list);
        }
        self.persistent_pod_states_live(namespace).await
    }

    async fn persistent_pod_states_live(
        &self,
        namespace: &str,
    ) -> Result<Vec<PersistentPodState>, String> {
        let Some(client) = &self.client else {
            return Ok(Vec::new());
        };
        let api: kube::Api<PersistentPodState> = kube::Api::namespaced(client.clone(), namespace);
        match tokio::time::timeout(self.timeout, api.list(&Default::default())).await {
            Err(_) => Err(format!(
                "cannot list PersistentPodStates: no answer from the API server within {:?}",
                self.timeout
            )),
            Ok(Ok(list)) => Ok(list.items),
            // The CRD may not be installed: nothing is persisted.
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => Ok(Vec::new()),
            Ok(Err(e)) => Err(format!("cannot list PersistentPodStates: {e}")),
        }
    }

    async fn pps_whitelist(&self) -> Result<PpsWorkloadWhiteList, String> {
        let data = self.kruise_configuration().await?;
        PpsWorkloadWhiteList::from_configuration(&data).map_err(|e| e.to_string())
    }
}
