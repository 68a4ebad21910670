//! [`WsLookup`] against the API server: WorkloadSpreads from the watch cache once it has
//! loaded (listed before that, and always for the conflict check), one read live for the
//! reservation, and its status writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::apps::v1alpha1::{
    CustomWorkloadWhiteList, WorkloadSpread, is_builtin_target, workload_replicas,
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};

use super::ApiCluster;
use crate::sidecarset::SidecarSetLookup;
use crate::workloadspread::{WsLookup, WsWrite};

/// The API resource of an `apiVersion` and kind (the plural guessed from the kind, as
/// Kubernetes names custom resources by default).
fn resource_of(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind))
}

impl ApiCluster {
    fn ws_api(&self, namespace: &str) -> Result<kube::Api<WorkloadSpread>, String> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| "the webhook has no Kubernetes client".to_owned())?;
        Ok(kube::Api::namespaced(client.clone(), namespace))
    }

    async fn ws_timed<T>(
        &self,
        what: &str,
        fut: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>, String> {
        tokio::time::timeout(self.timeout, fut).await.map_err(|_| {
            format!(
                "{what}: no answer from the API server within {:?}",
                self.timeout
            )
        })
    }
}

impl WsLookup for ApiCluster {
    async fn workload_spreads(&self, namespace: &str) -> Result<Vec<WorkloadSpread>, String> {
        if let Some(list) = self
            .workload_spreads
            .as_ref()
            .and_then(|c| c.snapshot(namespace))
        {
            return Ok(list);
        }
        self.workload_spreads_live(namespace).await
    }

    async fn workload_spreads_live(&self, namespace: &str) -> Result<Vec<WorkloadSpread>, String> {
        if self.client.is_none() {
            return Ok(Vec::new());
        }
        let api = self.ws_api(namespace)?;
        match self
            .ws_timed("cannot list WorkloadSpreads", api.list(&Default::default()))
            .await?
        {
            Ok(list) => Ok(list.items),
            // The CRD may not be installed: nothing is spread.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
            Err(e) => Err(format!("cannot list WorkloadSpreads: {e}")),
        }
    }

    async fn workload_spread(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<WorkloadSpread>, String> {
        let api = self.ws_api(namespace)?;
        self.ws_timed("cannot read WorkloadSpread", api.get_opt(name))
            .await?
            .map_err(|e| format!("cannot read WorkloadSpread {name}: {e}"))
    }

    async fn workload_replicas(&self, ws: &WorkloadSpread) -> Result<Option<i32>, String> {
        let Some(target) = &ws.spec.target_reference else {
            return Ok(None);
        };
        let namespace = ws.metadata.namespace.as_deref().unwrap_or_default();
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| "the webhook has no Kubernetes client".to_owned())?;
        let ar = resource_of(&target.api_version, &target.kind);
        let api: kube::Api<DynamicObject> =
            kube::Api::namespaced_with(client.clone(), namespace, &ar);
        let what = format!("cannot read {} {}", target.kind, target.name);
        let Some(obj) = self
            .ws_timed(&what, api.get_opt(&target.name))
            .await?
            .map_err(|e| format!("{what}: {e}"))?
        else {
            return Ok(None);
        };
        // A custom kind's replicas are where the whitelist says.
        let filter = if is_builtin_target(&target.api_version, &target.kind) {
            ws.spec.target_filter.clone()
        } else {
            self.ws_whitelist()
                .await?
                .replicas_filter(target, ws.spec.target_filter.as_ref())
        };
        let raw = serde_json::to_value(&obj).map_err(|e| format!("{what}: {e}"))?;
        workload_replicas(&target.kind, &raw, filter.as_ref())
            .map(Some)
            .map_err(|e| {
                format!(
                    "WorkloadSpread {}: {e}",
                    ws.metadata.name.as_deref().unwrap_or_default()
                )
            })
    }

    async fn ws_whitelist(&self) -> Result<CustomWorkloadWhiteList, String> {
        let data = self.kruise_configuration().await?;
        CustomWorkloadWhiteList::from_configuration(&data).map_err(|e| e.to_string())
    }

    async fn owner_controller(
        &self,
        namespace: &str,
        owner: &OwnerReference,
    ) -> Result<Option<OwnerReference>, String> {
        let client = self
            .client
            .as_ref()
            .ok_or_else(|| "the webhook has no Kubernetes client".to_owned())?;
        let ar = resource_of(&owner.api_version, &owner.kind);
        let api: kube::Api<DynamicObject> =
            kube::Api::namespaced_with(client.clone(), namespace, &ar);
        let what = format!("cannot read {} {}", owner.kind, owner.name);
        let obj = self
            .ws_timed(&what, api.get_opt(&owner.name))
            .await?
            .map_err(|e| format!("{what}: {e}"))?;
        Ok(obj.and_then(|o| {
            o.metadata
                .owner_references
                .into_iter()
                .flatten()
                .find(|r| r.controller == Some(true))
        }))
    }

    async fn write_workload_spread_status(&self, ws: &WorkloadSpread) -> Result<WsWrite, String> {
        let ns = ws.metadata.namespace.clone().unwrap_or_default();
        let name = ws.metadata.name.clone().unwrap_or_default();
        let api = self.ws_api(&ns)?;
        match self
            .ws_timed(
                "cannot write WorkloadSpread status",
                api.replace_status(&name, &PostParams::default(), ws),
            )
            .await?
        {
            Ok(_) => Ok(WsWrite::Written),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(WsWrite::Conflict),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(WsWrite::Gone),
            Err(e) => Err(format!(
                "cannot write the status of WorkloadSpread {name}: {e}"
            )),
        }
    }
}
