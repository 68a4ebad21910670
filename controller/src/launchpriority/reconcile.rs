//! One reconcile: create the Pod's barrier ConfigMap, release the next priority's key, mark
//! the Pod completed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::keys;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::plan::{self, Step};

/// Wait before looking again at a stale barrier that is being deleted.
const STALE_BARRIER_RETRY: Duration = Duration::from_secs(1);

pub(super) async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    reconcile_pod(&pod, &ctx.client).await
}

async fn reconcile_pod(pod: &Pod, client: &Client) -> Result<Action, Error> {
    // The store may hold a newer pod than the event that queued it: decide on what it holds.
    if !plan::wants_reconcile(pod) {
        return Ok(Action::await_change());
    }
    let name = pod.name_any();
    let (Some(ns), Some(uid)) = (pod.namespace(), pod.uid()) else {
        return Err(Error::Incomplete(name));
    };
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let barrier_name = plan::barrier_name(&name);
    let barrier = match cms.get_opt(&barrier_name).await? {
        Some(cm) if owned_by_other_pod(&cm, &name, &uid) => {
            // A same-named earlier pod (StatefulSet-style names) left its barrier behind; its
            // keys would release our containers out of order.
            remove_stale(&cms, &cm).await?;
            return Ok(Action::requeue(STALE_BARRIER_RETRY));
        }
        Some(cm) => cm,
        None => match create_barrier(&cms, &barrier_name, &name, &uid).await? {
            Some(cm) => cm,
            None => return Ok(Action::requeue(STALE_BARRIER_RETRY)),
        },
    };
    let empty = BTreeMap::new();
    let data = barrier.data.as_ref().unwrap_or(&empty);
    let step = plan::next_step(&plan::pending_priorities(pod), |k| data.contains_key(k));
    match step {
        Step::Wait => {}
        Step::Complete => mark_completed(client, &ns, &name).await?,
        Step::Release { key, then_complete } => {
            tracing::info!(key = %key, "releasing launch-priority barrier");
            let patch = json!({ "data": { key: "true" } });
            cms.patch(
                &barrier_name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
            if then_complete {
                mark_completed(client, &ns, &name).await?;
            }
        }
    }
    Ok(Action::await_change())
}

fn owned_by_other_pod(cm: &ConfigMap, pod_name: &str, uid: &str) -> bool {
    cm.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Pod" && o.name == pod_name && o.uid != uid)
}

async fn remove_stale(cms: &Api<ConfigMap>, cm: &ConfigMap) -> Result<(), Error> {
    let dp = DeleteParams {
        // Only the stale object: never one a concurrent writer recreated meanwhile.
        preconditions: Some(Preconditions {
            uid: cm.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    tracing::info!(configmap = %cm.name_any(), "deleting a barrier left by an earlier pod");
    match cms.delete(&cm.name_any(), &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_not_found() || s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Creates the empty barrier owned by the pod, so that it goes away with the pod. `None` when
/// one with that name already exists.
async fn create_barrier(
    cms: &Api<ConfigMap>,
    barrier_name: &str,
    pod_name: &str,
    uid: &str,
) -> Result<Option<ConfigMap>, Error> {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(barrier_name.to_owned()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Pod".to_owned(),
                name: pod_name.to_owned(),
                uid: uid.to_owned(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    tracing::debug!(configmap = %barrier_name, "creating launch-priority barrier");
    match cms.create(&PostParams::default(), &cm).await {
        Ok(created) => Ok(Some(created)),
        // Someone else's create won (or a stale one is still going away): look again shortly,
        // through the ownership check above.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

async fn mark_completed(client: &Client, ns: &str, name: &str) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let patch = json!({
        "metadata": {
            "annotations": { keys::CONTAINER_LAUNCH_PRIORITY_COMPLETED_ANNOTATION: "true" }
        }
    });
    match pods
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!("launch priority completed");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(()),
        Err(e) => Err(e.into()),
    }
}
