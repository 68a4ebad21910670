//! One reconcile of a WorkloadSpread (upstream `syncWorkloadSpread`): the targeted workload
//! and its Pods → Pods created before the WorkloadSpread adopted into their node's subset →
//! deletion costs per revision → the status (overall and per revision), written
//! conflict-checked → under `Adaptive`, the Pods unschedulable past the critical time deleted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kruise_api::apps::v1alpha1::{
    CustomWorkload, CustomWorkloadWhiteList, MatchedWorkloadSpread, TargetFilter, WorkloadSpread,
    WorkloadSpreadStatus, is_builtin_target, selects, workload_replicas,
};
use kruise_api::keys::{self, k8s};
use kruise_api::policy::v1alpha1::TargetReference;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    PostParams, Preconditions,
};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use super::context::Context;
use super::error::Error;
use super::existing::{adopt_patch, favourite};
use super::plan::{by_version, deletion_costs, group, is_active, is_empty, subset_statuses};

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

impl Target {
    /// A workload that does not exist (yet).
    fn absent() -> Self {
        Self {
            replicas: 0,
            pods: Vec::new(),
            honours_deletion_cost: false,
            latest_version: None,
        }
    }
}

/// One reconcile of `ws` (the runner adds its span, timing and metrics).
pub async fn reconcile(ws: Arc<WorkloadSpread>, ctx: Arc<Context>) -> Result<Action, Error> {
    if ws.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = ws.namespace().unwrap_or_default();
    let Some(mut target) = read_target(&ctx, &ns, &ws).await? else {
        return Ok(Action::requeue(RESYNC));
    };
    adopt_existing(&ctx, &ws, &ns, &mut target.pods, target.replicas).await?;
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
    let overall = subset_statuses(
        &ws,
        &old.subset_statuses,
        &group(&ws, &target.pods),
        target.replicas,
        now,
    );
    soonest(overall.requeue);
    let mut versioned = BTreeMap::new();
    for (version, pods) in &versions {
        // Per revision the strategy only keeps the condition; the Pods go by the overall one.
        let st = subset_statuses(
            &ws,
            old.versioned(version),
            &group(&ws, pods),
            target.replicas,
            now,
        );
        soonest(st.requeue);
        versioned.insert(version.clone(), st.statuses);
    }
    // A version the webhook reserved for whose Pods are not seen yet is kept while it holds
    // anything (upstream: the Pod may not be in the cache yet).
    for (version, prev) in &old.versioned_subset_statuses {
        if versions.contains_key(version) {
            continue;
        }
        let st = subset_statuses(&ws, prev, &group(&ws, &[]), target.replicas, now);
        if !is_empty(&st.statuses) {
            soonest(st.requeue);
            versioned.insert(version.clone(), st.statuses);
        }
    }
    let status = WorkloadSpreadStatus {
        observed_generation: ws.metadata.generation.unwrap_or_default(),
        subset_statuses: overall.statuses,
        versioned_subset_statuses: versioned,
    };
    if status != old {
        let mut next = (*ws).clone();
        next.status = Some(status);
        let api: Api<WorkloadSpread> = Api::namespaced(ctx.client.clone(), &ns);
        api.replace_status(&ws.name_any(), &PostParams::default(), &next)
            .await?;
    }
    for subset in &overall.recovered {
        let note = format!(
            "Subset {subset} of WorkloadSpread {ns}/{} is recovered from unschedulable to schedulable",
            ws.name_any()
        );
        ctx.event(
            &ws.object_ref(&()),
            EventType::Normal,
            keys::WS_REASON_RECOVER_SCHEDULABLE,
            note,
        )
        .await;
    }
    // Deleted only once the subset is recorded as closed, so the workload's replacement Pods
    // are placed elsewhere by the webhook (upstream's order).
    for (subset, pods) in &overall.unschedulable {
        delete_unschedulable(&ctx, &ws, subset, pods).await?;
    }
    Ok(Action::requeue(requeue))
}

/// Deletes the Pods of `subset` that stayed unschedulable (upstream `deletePodsForSubset`); a
/// Pod replaced meanwhile (another UID) or gone is left alone.
async fn delete_unschedulable(
    ctx: &Context,
    ws: &WorkloadSpread,
    subset: &str,
    pods: &[&Pod],
) -> Result<(), Error> {
    for pod in pods {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => {
                tracing::info!(
                    pod = name,
                    subset,
                    "deleted a Pod unschedulable in its subset"
                );
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => {
                let note = format!(
                    "Failed to delete unschedulable Pod {ns}/{name} in Subset {subset} of WorkloadSpread {ns}/{}: {e}",
                    ws.name_any()
                );
                ctx.event(
                    &ws.object_ref(&()),
                    EventType::Warning,
                    keys::WS_REASON_DELETE_POD_FAILED,
                    note,
                )
                .await;
                return Err(e.into());
            }
        }
    }
    Ok(())
}

/// Adopts the workload's running Pods that no subset of this WorkloadSpread holds yet into the
/// subset their node belongs to ([`favourite`]), patching the annotation (and the subset's
/// labels and annotations) onto them; the Pods in `pods` are replaced by the patched ones.
async fn adopt_existing(
    ctx: &Context,
    ws: &WorkloadSpread,
    ns: &str,
    pods: &mut [Arc<Pod>],
    workload_replicas: i32,
) -> Result<(), Error> {
    let name = ws.name_any();
    let ours = |p: &Pod| {
        MatchedWorkloadSpread::of(p.metadata.annotations.as_ref()).is_some_and(|m| m.name == name)
    };
    let strays: Vec<usize> = (0..pods.len())
        .filter(|&i| {
            let p = &pods[i];
            !ours(p)
                && is_active(p)
                && p.spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_deref())
                    .is_some_and(|n| !n.is_empty())
        })
        .collect();
    if strays.is_empty() {
        return Ok(());
    }
    // What each subset still misses, from the Pods it already holds (upstream counts every
    // Pod; uncapped subsets miss "infinitely" many).
    let mut missing: BTreeMap<String, i32> = ws
        .spec
        .subsets
        .iter()
        .map(|s| {
            (
                s.name.clone(),
                s.max_replicas_of(workload_replicas).unwrap_or(i32::MAX),
            )
        })
        .collect();
    for pod in pods.iter() {
        if let Some(m) = MatchedWorkloadSpread::of(pod.metadata.annotations.as_ref())
            && m.name == name
            && let Some(n) = missing.get_mut(&m.subset)
        {
            *n -= 1;
        }
    }
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let mut seen: BTreeMap<String, Option<Node>> = BTreeMap::new();
    for i in strays {
        let node_name = pods[i]
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        let node = match seen.get(&node_name) {
            Some(n) => n.clone(),
            None => {
                let n = nodes.get_opt(&node_name).await?;
                seen.insert(node_name.clone(), n.clone());
                n
            }
        };
        let Some(node) = node else { continue };
        let Some(index) = favourite(ws, &pods[i], &node, &missing) else {
            continue;
        };
        let subset = &ws.spec.subsets[index];
        let patch = adopt_patch(ws, subset);
        let pod_name = pods[i].name_any();
        match api
            .patch(
                &pod_name,
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        {
            Ok(p) => {
                tracing::info!(pod = %pod_name, subset = %subset.name, "adopted a Pod created before the WorkloadSpread");
                pods[i] = Arc::new(p);
                if let Some(n) = missing.get_mut(&subset.name) {
                    *n -= 1;
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
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

/// The workload `targetRef` names ([`Target::absent`] when it is missing or being deleted), or
/// `None` when there is no `targetRef` or it is of a kind the webhook refuses.
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
    let custom = if is_builtin_target(&r.api_version, &r.kind) {
        None
    } else {
        let list = whitelist(ctx).await?;
        // No longer listed: the webhook refuses such a target, nothing is spread.
        let Some(entry) = list.workload(&r.api_version, &r.kind).cloned() else {
            return Ok(None);
        };
        let replicas_filter = list.replicas_filter(r, ws.spec.target_filter.as_ref());
        Some(Custom {
            entry,
            replicas_filter,
        })
    };
    let gvk = GroupVersionKind::gvk(group, version, &r.kind);
    let ar = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
    // Missing or being deleted: 0 replicas, no Pods, status written (upstream `GetPodsForRef`).
    let obj = match read_object(ctx, ws, &api, r, &ar).await? {
        Some(o) if o.metadata.deletion_timestamp.is_none() => o,
        _ => return Ok(Some(Target::absent())),
    };
    let raw = serde_json::to_value(&obj).unwrap_or_default();
    let filter = ws.spec.target_filter.as_ref();
    let uid = obj.metadata.uid.clone().unwrap_or_default();
    if let Some(custom) = custom {
        // A custom kind: replicas where the whitelist says, Pods owned by it or by the objects
        // of its `subResources` it controls.
        let replicas = workload_replicas(&r.kind, &raw, custom.replicas_filter.as_ref())?;
        let mut pods = custom_pods(ctx, ns, &uid, &custom.entry).await?;
        if filter.is_some_and(|f| f.selector.is_some()) {
            pods.retain(|p| selects(filter, p.metadata.labels.as_ref()));
        }
        return Ok(Some(Target {
            replicas,
            pods,
            honours_deletion_cost: false,
            latest_version: Some(keys::WS_VERSION_IGNORED.to_owned()),
        }));
    }
    let replicas = workload_replicas(&r.kind, &raw, filter)?;
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

/// The targeted object; a refusal to read it (a custom kind without RBAC) is also an Event
/// naming the permission to grant.
async fn read_object(
    ctx: &Context,
    ws: &WorkloadSpread,
    api: &Api<DynamicObject>,
    r: &TargetReference,
    ar: &ApiResource,
) -> Result<Option<DynamicObject>, Error> {
    let ns = ws.namespace().unwrap_or_default();
    match api.get_opt(&r.name).await {
        Ok(o) => Ok(o),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            let note = format!(
                "kruise-manager may not read {} {ns}/{}: grant its ServiceAccount `get` on {}.{} (and `list` on the whitelist's subResources); {}",
                r.kind, r.name, ar.plural, ar.group, s.message
            );
            ctx.event(
                &ws.object_ref(&()),
                EventType::Warning,
                keys::WS_REASON_TARGET_UNREADABLE,
                note,
            )
            .await;
            Err(kube::Error::Api(s).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// The Pods of a custom workload: those it owns, and those of the objects of its
/// `subResources` kinds it controls (e.g. the StatefulSets of a game server set).
async fn custom_pods(
    ctx: &Context,
    ns: &str,
    uid: &str,
    entry: &CustomWorkload,
) -> Result<Vec<Arc<Pod>>, Error> {
    let mut pods = ctx.pods.owned_by(ns, uid);
    for sub in &entry.sub_resources {
        let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(&sub.group, &sub.version, &sub.kind));
        let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
        for o in api.list(&Default::default()).await?.items {
            let controlled = o
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid);
            if let (true, Some(sub_uid)) = (controlled, &o.metadata.uid) {
                pods.extend(ctx.pods.owned_by(ns, sub_uid));
            }
        }
    }
    Ok(pods)
}

/// A whitelisted custom target: its entry and the replicas paths its caps scale against.
struct Custom {
    entry: CustomWorkload,
    replicas_filter: Option<TargetFilter>,
}

/// The custom workload whitelist of the `kruise-configuration` ConfigMap in the manager's
/// namespace (empty without it).
async fn whitelist(ctx: &Context) -> Result<CustomWorkloadWhiteList, Error> {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &keys::own_namespace());
    let data = api
        .get_opt(keys::KRUISE_CONFIGURATION_CONFIGMAP)
        .await?
        .and_then(|c| c.data)
        .unwrap_or_default();
    Ok(CustomWorkloadWhiteList::from_configuration(&data)?)
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
