//! One reconcile of a PersistentPodState (upstream `Reconcile`): the targeted workload and its
//! Pods → the labels of the nodes of Pods to record → the status, written conflict-safe.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet as AppsStatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kruise_api::apps::v1alpha1::{
    PersistentPodState, PersistentPodStateStatus, PpsWorkloadWhiteList,
};
use kruise_api::apps::v1beta1::StatefulSet as AdvancedStatefulSet;
use kruise_api::keys;
use kruise_api::policy::v1alpha1::TargetReference;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::plan::{Workload, next_status, pods_to_record, state_of};

/// Attempts of the status write against concurrent writers.
const ATTEMPTS: usize = 4;

/// One reconcile of `pps` (the runner adds its span, timing and metrics).
pub async fn reconcile(pps: Arc<PersistentPodState>, ctx: Arc<Context>) -> Result<Action, Error> {
    if pps.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = pps.namespace().unwrap_or_default();
    let workload = match read_workload(&ctx, &ns, &pps).await {
        Ok(w) => w,
        Err(e) => {
            let target = &pps.spec.target_reference;
            ctx.event(
                &pps.object_ref(&()),
                EventType::Warning,
                keys::PPS_REASON_WORKLOAD_UNREADABLE,
                format!(
                    "cannot read {} {}/{}: {e}; retrying",
                    target.kind, target.api_version, target.name
                ),
            )
            .await;
            return Err(e.into());
        }
    };
    let pods = workload
        .as_ref()
        .map(|w| ctx.pods.owned_by(&ns, &w.uid))
        .unwrap_or_default();
    let mut fresh = BTreeMap::new();
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let mut labels: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (pod, node) in pods_to_record(&pps, &pods) {
        if !labels.contains_key(node) {
            match nodes.get_opt(node).await {
                Ok(Some(n)) => {
                    labels.insert(node.to_owned(), n.metadata.labels.unwrap_or_default());
                }
                // Upstream skips a Pod whose node it cannot read; the next event retries it.
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, node, "cannot read the node of a Pod");
                    continue;
                }
            }
        }
        let Some(node_labels) = labels.get(node) else {
            continue;
        };
        fresh.insert(pod.name_any(), state_of(&pps.spec, pod, node, node_labels));
    }
    write_status(&ctx, &pps, |current| {
        next_status(current, workload.as_ref(), &pods, fresh.clone())
    })
    .await?;
    Ok(Action::await_change())
}

/// The targeted StatefulSet or whitelisted custom workload, or `None` when it is gone, being
/// deleted, or of a kind the webhook refuses.
async fn read_workload(
    ctx: &Context,
    ns: &str,
    pps: &PersistentPodState,
) -> Result<Option<Workload>, kube::Error> {
    let target = &pps.spec.target_reference;
    match (target.group(), target.kind.as_str()) {
        (Some(keys::APPS_GROUP), "StatefulSet") => {
            let api: Api<AdvancedStatefulSet> = Api::namespaced(ctx.client.clone(), ns);
            Ok(api
                .get_opt(&target.name)
                .await?
                .filter(|s| s.metadata.deletion_timestamp.is_none())
                .map(|s| Workload {
                    uid: s.metadata.uid.clone().unwrap_or_default(),
                    replicas: s.spec.replicas(),
                    start: s.spec.start_ordinal(),
                    // A bad list is refused by the StatefulSet webhook; none reserved then.
                    reserved: s.spec.reserved_ordinals().unwrap_or_default(),
                }))
        }
        (Some("apps"), "StatefulSet") => {
            let api: Api<AppsStatefulSet> = Api::namespaced(ctx.client.clone(), ns);
            Ok(api
                .get_opt(&target.name)
                .await?
                .filter(|s| s.metadata.deletion_timestamp.is_none())
                .map(|s| {
                    let spec = s.spec.unwrap_or_default();
                    Workload {
                        uid: s.metadata.uid.unwrap_or_default(),
                        replicas: spec.replicas.unwrap_or(1),
                        start: spec.ordinals.and_then(|o| o.start).unwrap_or(0),
                        reserved: Vec::new(),
                    }
                }))
        }
        _ => custom_workload(ctx, ns, target).await,
    }
}

/// A workload of a kind `PPS_Watch_Custom_Workload_WhiteList` lists (upstream
/// `getPodStatefulSetLike`): its uid and `spec.replicas` (0 without it), no ordinals start or
/// reserved ordinals; `None` when the kind is not listed, or the object is gone or being deleted.
async fn custom_workload(
    ctx: &Context,
    ns: &str,
    target: &TargetReference,
) -> Result<Option<Workload>, kube::Error> {
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &keys::own_namespace());
    let data = cms
        .get_opt(keys::KRUISE_CONFIGURATION_CONFIGMAP)
        .await?
        .and_then(|c| c.data)
        .unwrap_or_default();
    let whitelist = match PpsWorkloadWhiteList::from_configuration(&data) {
        Ok(w) => w,
        Err(e) => {
            // Upstream's reconcile fails on it too; a fixed ConfigMap is read on the next one.
            tracing::warn!(error = %e, "PersistentPodState custom workload whitelist unreadable");
            return Ok(None);
        }
    };
    if !whitelist.allows(&target.api_version, &target.kind) {
        return Ok(None);
    }
    let (group, version) = match target.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", target.api_version.as_str()),
    };
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &target.kind));
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
    Ok(api
        .get_opt(&target.name)
        .await?
        .filter(|o| o.metadata.deletion_timestamp.is_none())
        .map(|o| Workload {
            uid: o.metadata.uid.clone().unwrap_or_default(),
            replicas: custom_replicas(&o.data),
            start: 0,
            reserved: Vec::new(),
        }))
}

/// `spec.replicas` of a custom workload, 0 when missing or not a number (upstream
/// `getSpecReplicas`).
fn custom_replicas(data: &serde_json::Value) -> i32 {
    data.pointer("/spec/replicas")
        .and_then(serde_json::Value::as_i64)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0)
}

/// Writes the status `next` computes from the freshest copy, if it changed (upstream
/// `RetryOnConflict` around the status update).
async fn write_status(
    ctx: &Context,
    pps: &PersistentPodState,
    next: impl Fn(&PersistentPodState) -> PersistentPodStateStatus,
) -> Result<(), Error> {
    let ns = pps.namespace().unwrap_or_default();
    let name = pps.name_any();
    let api: Api<PersistentPodState> = Api::namespaced(ctx.client.clone(), &ns);
    let mut current = pps.clone();
    for attempt in 1..=ATTEMPTS {
        let status = next(&current);
        if current.status.as_ref() == Some(&status)
            || (current.status.is_none() && status == PersistentPodStateStatus::default())
        {
            return Ok(());
        }
        let mut updated = current.clone();
        updated.status = Some(status);
        match api
            .replace_status(&name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) if crate::runner::is_conflict(&e) && attempt < ATTEMPTS => {
                match api.get_opt(&name).await? {
                    Some(fresh) => current = fresh,
                    None => return Ok(()),
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::custom_replicas;

    #[test]
    fn custom_replicas_are_spec_replicas_or_zero() {
        assert_eq!(custom_replicas(&json!({"spec": {"replicas": 3}})), 3);
        assert_eq!(custom_replicas(&json!({"spec": {}})), 0);
        assert_eq!(custom_replicas(&json!({"spec": {"replicas": "3"}})), 0);
    }
}
