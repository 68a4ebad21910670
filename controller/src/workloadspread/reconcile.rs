//! One reconcile of a WorkloadSpread (upstream `syncWorkloadSpread`): the targeted workload
//! and its Pods → deletion costs → the status, written conflict-checked.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1alpha1::{WorkloadSpread, WorkloadSpreadStatus};
use kruise_api::keys::k8s;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::controller::Action;

use super::context::Context;
use super::error::Error;
use super::plan::{deletion_costs, group, subset_status};

/// How often a WorkloadSpread is looked at without an event: percentage caps follow the
/// workload's replicas, which this controller does not watch.
const RESYNC: Duration = Duration::from_secs(30);

/// The targeted workload: its UID, the replicas caps scale against, and its Pods.
struct Target {
    replicas: i32,
    pods: Vec<Arc<Pod>>,
    /// ReplicaSets, Deployments and CloneSets honour `pod-deletion-cost`.
    honours_deletion_cost: bool,
}

/// One reconcile of `ws` (the runner adds its span, timing and metrics).
pub async fn reconcile(ws: Arc<WorkloadSpread>, ctx: Arc<Context>) -> Result<Action, Error> {
    if ws.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = ws.namespace().unwrap_or_default();
    let Some(target) = read_target(&ctx, &ns, &ws).await? else {
        return Ok(Action::requeue(RESYNC));
    };
    let groups = group(&ws, &target.pods);
    if target.honours_deletion_cost {
        let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        for (name, cost) in deletion_costs(&ws, &groups, target.replicas) {
            let patch = serde_json::json!({"metadata": {"annotations": {
                k8s::POD_DELETION_COST_ANNOTATION: cost }}});
            match pods
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                // Gone meanwhile: nothing to order.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    let now = Timestamp::now();
    let old = ws.status.clone().unwrap_or_default();
    let mut requeue = RESYNC;
    let mut statuses = Vec::with_capacity(ws.spec.subsets.len());
    for (subset, pods) in ws.spec.subsets.iter().zip(&groups) {
        let prev = old.subset_statuses.iter().find(|s| s.name == subset.name);
        let (st, next) = subset_status(subset, prev, pods, target.replicas, now);
        if let Some(d) = next {
            requeue = requeue.min(d + Duration::from_millis(200));
        }
        statuses.push(st);
    }
    let status = WorkloadSpreadStatus {
        observed_generation: ws.metadata.generation.unwrap_or_default(),
        subset_statuses: statuses,
        versioned_subset_statuses: Default::default(),
    };
    if status != old {
        let mut next = (*ws).clone();
        next.status = Some(status);
        let api: Api<WorkloadSpread> = Api::namespaced(ctx.client.clone(), &ns);
        api.replace_status(&ws.name_any(), &PostParams::default(), &next)
            .await?;
    }
    Ok(Action::requeue(requeue))
}

/// The workload `targetRef` names, or `None` when it is missing or of a kind the webhook
/// refuses.
async fn read_target(
    ctx: &Context,
    ns: &str,
    ws: &WorkloadSpread,
) -> Result<Option<Target>, Error> {
    let Some(r) = &ws.spec.target_reference else {
        return Ok(None);
    };
    let (group, version) = match r.api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", r.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &r.kind);
    let ar = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
    let Some(obj) = api.get_opt(&r.name).await? else {
        return Ok(None);
    };
    let spec = obj.data.get("spec");
    let field = if r.kind == "Job" {
        "parallelism"
    } else {
        "replicas"
    };
    let replicas = spec
        .and_then(|s| s.get(field))
        .and_then(serde_json::Value::as_i64)
        .and_then(|v| i32::try_from(v).ok())
        .unwrap_or(1);
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    let pods = if r.kind == "Deployment" {
        let sets: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), ns);
        let mut pods = Vec::new();
        for rs in sets.list(&Default::default()).await?.items {
            let owned = rs
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid);
            if owned && let Some(rs_uid) = &rs.metadata.uid {
                pods.extend(ctx.pods.owned_by(ns, rs_uid));
            }
        }
        pods
    } else {
        ctx.pods.owned_by(ns, &uid)
    };
    Ok(Some(Target {
        replicas,
        pods,
        honours_deletion_cost: matches!(r.kind.as_str(), "ReplicaSet" | "Deployment" | "CloneSet"),
    }))
}
