//! [`PubLookup`] against the API server: budgets (from the watch cache once it has loaded),
//! their status writes, and the workload above a Pod's ReplicaSet.

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::{PodUnavailableBudget, TargetReference};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{CustomResourceExt, Resource};

use super::ApiCluster;
use crate::podunavailablebudget::{PubLookup, StatusWrite};

/// The status write of `budget` at the CRD's storage version ([`kruise_api::crds::STORAGE_VERSIONS`]),
/// converted here when that is not v1alpha1: no conversion webhook call. It carries the
/// resourceVersion it was read at (a concurrent write conflicts); a status write keeps the stored
/// spec and metadata, so only its status counts.
fn stored_status_write(
    budget: &PodUnavailableBudget,
) -> Result<(ApiResource, DynamicObject), String> {
    let version = kruise_api::crds::storage_version(PodUnavailableBudget::crd_name());
    let served = ApiResource::erase::<PodUnavailableBudget>(&());
    let gvk = GroupVersionKind::gvk(&served.group, version, &served.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &served.plural);
    let mut body = serde_json::to_value(budget).map_err(|e| e.to_string())?;
    if version != served.version {
        body = crate::podunavailablebudget::conversion::convert(&body, &resource.api_version)?;
    }
    let body = serde_json::from_value(body).map_err(|e| e.to_string())?;
    Ok((resource, body))
}

impl ApiCluster {
    fn client_or_err(&self) -> Result<&kube::Client, String> {
        self.client
            .as_ref()
            .ok_or_else(|| "the webhook has no Kubernetes client".to_owned())
    }

    async fn timed<T>(
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

/// Who the webhook's Events say recorded them.
const EVENT_REPORTER: &str = "kruise-webhook";

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl PubLookup for ApiCluster {
    async fn budgets(&self, namespace: &str) -> Result<Vec<PodUnavailableBudget>, String> {
        if let Some(list) = self.budgets.as_ref().and_then(|c| c.snapshot(namespace)) {
            return Ok(list);
        }
        self.budgets_live(namespace).await
    }

    async fn budgets_live(&self, namespace: &str) -> Result<Vec<PodUnavailableBudget>, String> {
        let Some(client) = &self.client else {
            return Ok(Vec::new());
        };
        let api: kube::Api<PodUnavailableBudget> = kube::Api::namespaced(client.clone(), namespace);
        match self
            .timed(
                "cannot list PodUnavailableBudgets",
                api.list(&Default::default()),
            )
            .await?
        {
            Ok(list) => Ok(list.items),
            // The CRD may not be installed: no budget covers anything.
            Err(e) if is_not_found(&e) => Ok(Vec::new()),
            Err(e) => Err(format!("cannot list PodUnavailableBudgets: {e}")),
        }
    }

    async fn budget(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PodUnavailableBudget>, String> {
        let api: kube::Api<PodUnavailableBudget> =
            kube::Api::namespaced(self.client_or_err()?.clone(), namespace);
        self.timed("cannot read PodUnavailableBudget", api.get_opt(name))
            .await?
            .map_err(|e| format!("cannot read PodUnavailableBudget {name}: {e}"))
    }

    async fn write_budget_status(
        &self,
        budget: &PodUnavailableBudget,
    ) -> Result<StatusWrite, String> {
        let ns = budget.metadata.namespace.clone().unwrap_or_default();
        let name = budget.metadata.name.clone().unwrap_or_default();
        let (resource, body) = stored_status_write(budget)?;
        let api: kube::Api<DynamicObject> =
            kube::Api::namespaced_with(self.client_or_err()?.clone(), &ns, &resource);
        match self
            .timed(
                "cannot write PodUnavailableBudget status",
                api.replace_status(&name, &PostParams::default(), &body),
            )
            .await?
        {
            Ok(_) => Ok(StatusWrite::Written),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(StatusWrite::Conflict),
            Err(e) if is_not_found(&e) => Ok(StatusWrite::Gone),
            Err(e) => Err(format!(
                "cannot write the status of PodUnavailableBudget {name}: {e}"
            )),
        }
    }

    fn refused(&self, pod: &Pod, username: &str) {
        self.metrics.budget_refused(pod, username);
        let Some(client) = self.client.clone() else {
            return;
        };
        let about = pod.object_ref(&());
        // In the background: the API server waits for our answer, not for the Event.
        tokio::spawn(async move {
            let recorder = Recorder::new(client, Reporter::from(EVENT_REPORTER));
            let ev = Event {
                type_: EventType::Warning,
                reason: keys::PUB_REASON_PREVENT_POD_DELETION.to_owned(),
                note: Some(keys::PUB_PREVENT_POD_DELETION_NOTE.to_owned()),
                action: keys::PUB_REASON_PREVENT_POD_DELETION.to_owned(),
                secondary: None,
            };
            if let Err(e) = recorder.publish(&ev, &about).await {
                tracing::debug!(error = %e, "failed to record the budget's refusal as an Event");
            }
        });
    }

    async fn workload_of(
        &self,
        namespace: &str,
        owner: &OwnerReference,
    ) -> Result<Option<TargetReference>, String> {
        let itself = TargetReference {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
        };
        if owner.kind != "ReplicaSet" || !owner.api_version.starts_with("apps/") {
            return Ok(Some(itself));
        }
        let api: kube::Api<ReplicaSet> =
            kube::Api::namespaced(self.client_or_err()?.clone(), namespace);
        let rs = self
            .timed("cannot read ReplicaSet", api.get_opt(&owner.name))
            .await?
            .map_err(|e| format!("cannot read ReplicaSet {}: {e}", owner.name))?;
        let Some(rs) = rs else { return Ok(None) };
        let deployment = rs
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true) && r.kind == "Deployment");
        Ok(Some(deployment.map_or(itself, |d| TargetReference {
            api_version: d.api_version.clone(),
            kind: d.kind.clone(),
            name: d.name.clone(),
        })))
    }
}
