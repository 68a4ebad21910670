//! [`ProtectionLookup`] against the API server: what a `Cascading` deletion protection counts —
//! a namespace's active Pods and Bound PVCs (the manager lists both cluster-wide already), and
//! the objects of a CRD (through the dynamic API, metadata only; needs `list` on the CRD's
//! resource, see `deploy/manager/rbac.yaml`).

use std::future::Future;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};

use super::ApiCluster;
use crate::deletionprotection::{Count, CrdResource, ProtectionLookup};
use crate::metrics::Protected;

impl ApiCluster {
    async fn bounded<T>(
        &self,
        what: &str,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(res) => res.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "no answer from the API server to the list of {what} within {:?}",
                self.timeout
            )),
        }
    }
}

impl ProtectionLookup for ApiCluster {
    async fn active_pods(&self, namespace: &str) -> Count {
        let Some(client) = &self.client else {
            return Err("the webhook has no Kubernetes client".to_owned());
        };
        let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), namespace);
        let pods = self
            .bounded("pods", api.list(&ListParams::default()))
            .await?;
        // Upstream `IsPodActive`.
        let active = pods.items.iter().filter(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            p.metadata.deletion_timestamp.is_none()
                && !matches!(phase, Some("Succeeded" | "Failed"))
        });
        Ok(active.count() as u64)
    }

    async fn bound_pvcs(&self, namespace: &str) -> Count {
        let Some(client) = &self.client else {
            return Err("the webhook has no Kubernetes client".to_owned());
        };
        let api: kube::Api<PersistentVolumeClaim> =
            kube::Api::namespaced(client.clone(), namespace);
        let pvcs = self
            .bounded("persistentvolumeclaims", api.list(&ListParams::default()))
            .await?;
        let bound = pvcs.items.iter().filter(|c| {
            c.metadata.deletion_timestamp.is_none()
                && c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
        });
        Ok(bound.count() as u64)
    }

    async fn active_objects(&self, resource: &CrdResource) -> Count {
        let Some(client) = &self.client else {
            return Err("the webhook has no Kubernetes client".to_owned());
        };
        let gvk = GroupVersionKind::gvk(&resource.group, &resource.version, &resource.kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, &resource.plural);
        let api: kube::Api<DynamicObject> = kube::Api::all_with(client.clone(), &ar);
        let objects = self
            .bounded(&resource.plural, api.list_metadata(&ListParams::default()))
            .await?;
        let active = objects
            .items
            .iter()
            .filter(|o| o.metadata.deletion_timestamp.is_none());
        Ok(active.count() as u64)
    }

    fn refused(&self, what: Protected<'_>, username: &str) {
        self.metrics.deletion_refused(what, username);
    }
}
