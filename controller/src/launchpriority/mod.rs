//! The container launch-priority controller. The pod webhook gives every container of an
//! ordered pod a `KRUISE_CONTAINER_BARRIER` env read from key `p_<priority>` of ConfigMap
//! `<pod>-barrier`; the kubelet cannot start a container until its key exists. This controller
//! creates that ConfigMap and adds the keys one priority at a time, highest first, each once the
//! containers of the previous priority are ready, then marks the pod completed.

pub mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::keys;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::podcache::PodCache;
use crate::runner::{Controller, KubeError, ReconcileError};

use plan::Step;

/// The controller's name in metrics and logs.
const NAME: &str = "containerlaunchpriority";
/// Pods handled at once (upstream's worker count).
const CONCURRENCY: u16 = 4;
/// Wait before looking again at a stale barrier that is being deleted.
const STALE_BARRIER_RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error("pod {0} has no namespace or UID")]
    Incomplete(String),
}

kruise_runtime::kube_variant!(Error);

impl ReconcileError for Error {
    fn kube(&self) -> Option<&KubeError> {
        match self {
            Error::Kube(e) => Some(e),
            _ => None,
        }
    }

    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(e) => e.metric_label(),
            Error::Incomplete(_) => "incomplete",
        }
    }
}

struct Context {
    client: Client,
}

/// Runs until `shutdown`.
pub async fn run(
    client: Client,
    pods: PodCache,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let wanted = pods.live_targets(|p| plan::wants_reconcile(p).then(|| ObjectRef::from_obj(&**p)));
    // The runner dedupes requests per pod, so one pod is never handled twice at once.
    Controller::on_store(NAME, pods.store().clone(), metrics, shutdown)
        .concurrency(CONCURRENCY)
        .trigger_refs(wanted)
        .run(reconcile, Arc::new(Context { client }))
        .await;
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
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
