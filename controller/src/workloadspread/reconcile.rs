//! One reconcile of a WorkloadSpread (upstream `syncWorkloadSpread`): the targeted workload
//! and its Pods → deletion costs per revision → the status (overall and per revision),
//! written conflict-checked.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::apps::v1alpha1::{
    WorkloadSpread, WorkloadSpreadStatus, selects, workload_replicas,
};
use kruise_api::keys::{self, k8s};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::controller::Action;

use super::context::Context;
use super::error::Error;
use super::plan::{by_version, deletion_costs, group, is_empty, subset_statuses};

/// How often a WorkloadSpread is looked at without an event: percentage caps follow the
/// workload's replicas, which this controller does not watch.
const RESYNC: Duration = Duration::from_secs(30);

/// The targeted workload: its UID, the replicas caps scale against, and its Pods.
struct Target {
    replicas: i32,
    pods: Vec<Arc<Pod>>,
    /// ReplicaSets, Deployments and CloneSets honour `pod-deletion-cost`.
    honours_deletion_cost: bool,
    /// The revision new Pods are created at (upstream `GetWorkloadVersion`); `None` while a
    /// Deployment's ReplicaSet for its template does not exist yet.
    latest_version: Option<String>,
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
    let versions = by_version(&target.pods);
    let mut requeue = RESYNC;
    if target.honours_deletion_cost {
        match &target.latest_version {
            Some(latest) => {
                for (version, pods) in &versions {
                    let groups = group(&ws, pods);
                    let old_revision = version != latest;
                    let costs = deletion_costs(&ws, &groups, target.replicas, old_revision);
                    write_deletion_costs(&ctx, &ns, costs).await?;
                }
            }
            // The Deployment's new ReplicaSet is about to appear.
            None => requeue = Duration::from_secs(1),
        }
    }
    let now = Timestamp::now();
    let old = ws.status.clone().unwrap_or_default();
    let mut soonest = |d: Option<Duration>| {
        if let Some(d) = d {
            requeue = requeue.min(d + Duration::from_millis(200));
        }
    };
    let (overall, next) = subset_statuses(
        &ws,
        &old.subset_statuses,
        &group(&ws, &target.pods),
        target.replicas,
        now,
    );
    soonest(next);
    let mut versioned = BTreeMap::new();
    for (version, pods) in &versions {
        let (st, next) = subset_statuses(
            &ws,
            old.versioned(version),
            &group(&ws, pods),
            target.replicas,
            now,
        );
        soonest(next);
        versioned.insert(version.clone(), st);
    }
    // A version the webhook reserved for whose Pods are not seen yet is kept while it holds
    // anything (upstream: the Pod may not be in the cache yet).
    for (version, prev) in &old.versioned_subset_statuses {
        if versions.contains_key(version) {
            continue;
        }
        let (st, next) = subset_statuses(&ws, prev, &group(&ws, &[]), target.replicas, now);
        if !is_empty(&st) {
            soonest(next);
            versioned.insert(version.clone(), st);
        }
    }
    let status = WorkloadSpreadStatus {
        observed_generation: ws.metadata.generation.unwrap_or_default(),
        subset_statuses: overall,
        versioned_subset_statuses: versioned,
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

/// Writes the `pod-deletion-cost` annotations [`deletion_costs`] asked for.
async fn write_deletion_costs(
    ctx: &Context,
    ns: &str,
    costs: Vec<(String, String)>,
) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    for (name, cost) in costs {
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
    Ok(())
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
    let raw = serde_json::to_value(&obj).unwrap_or_default();
    let filter = ws.spec.target_filter.as_ref();
    let replicas = workload_replicas(&r.kind, &raw, filter)?;
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    let mut latest_version = Some(keys::WS_VERSION_IGNORED.to_owned());
    let pods = if r.kind == "Deployment" {
        let ar = ApiResource::erase::<ReplicaSet>(&());
        let sets: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
        let template = obj.data.get("spec").and_then(|s| s.get("template"));
        latest_version = None;
        let mut pods = Vec::new();
        // Should no ReplicaSet equal the template (a difference in how the two were
        // defaulted), the one of the highest Deployment revision stands in.
        let mut newest: Option<(i64, Option<String>)> = None;
        for rs in sets.list(&Default::default()).await?.items {
            let owned = rs
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid);
            if !owned {
                continue;
            }
            if let Some(rs_uid) = &rs.metadata.uid {
                pods.extend(ctx.pods.owned_by(ns, rs_uid));
            }
            if rs.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if same_template(template, &rs) {
                latest_version = template_hash(&rs.metadata);
            }
            let revision = rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(k8s::DEPLOYMENT_REVISION_ANNOTATION))
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            if newest.as_ref().is_none_or(|(r, _)| revision > *r) {
                newest = Some((revision, template_hash(&rs.metadata)));
            }
        }
        if latest_version.is_none() {
            latest_version = newest.and_then(|(_, hash)| hash);
        }
        pods
    } else {
        // A ReplicaSet without the label (not a Deployment's) has its Pods counted as
        // `versionIgnored`, which is then its latest version.
        if r.kind == "ReplicaSet"
            && let Some(hash) = template_hash(&obj.metadata)
        {
            latest_version = Some(hash);
        }
        ctx.pods.owned_by(ns, &uid)
    };
    // Upstream filters only when the filter has a selector; without one the webhook spreads
    // no Pod, so nothing is counted either way.
    let mut pods = pods;
    if filter.is_some_and(|f| f.selector.is_some()) {
        pods.retain(|p| selects(filter, p.metadata.labels.as_ref()));
    }
    Ok(Some(Target {
        replicas,
        pods,
        honours_deletion_cost: matches!(r.kind.as_str(), "ReplicaSet" | "Deployment" | "CloneSet"),
        latest_version,
    }))
}

/// A ReplicaSet's `pod-template-hash` label: the revision of the Pods it creates.
fn template_hash(meta: &ObjectMeta) -> Option<String> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(keys::POD_TEMPLATE_HASH_LABEL))
        .cloned()
}

/// Whether a ReplicaSet runs the Deployment's current template, its own `pod-template-hash`
/// label set aside (Kubernetes' `EqualIgnoreHash`).
fn same_template(deployment: Option<&serde_json::Value>, rs: &DynamicObject) -> bool {
    let Some(want) = deployment else {
        return false;
    };
    let Some(mut have) = rs.data.get("spec").and_then(|s| s.get("template")).cloned() else {
        return false;
    };
    if let Some(labels) = have
        .get_mut("metadata")
        .and_then(|m| m.get_mut("labels"))
        .and_then(serde_json::Value::as_object_mut)
    {
        labels.remove(keys::POD_TEMPLATE_HASH_LABEL);
        if labels.is_empty()
            && want.get("metadata").and_then(|m| m.get("labels")).is_none()
            && let Some(m) = have
                .get_mut("metadata")
                .and_then(serde_json::Value::as_object_mut)
        {
            m.remove("labels");
        }
    }
    &have == want
}
