//! Which Pods a budget covers and how many it expects (upstream `GetPodsForPub` with the
//! controller finder): a selector covers the active Pods it matches, expecting the replicas of
//! their workloads; a `targetRef` covers the workload's Pods, expecting its replicas. Any kind
//! works: the apps and apps.kruise.io workloads are read directly, other kinds through their
//! scale subresource, as upstream.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kruise_api::policy::v1alpha1::pubcontrol::is_active;
use kube::api::{Api, DynamicObject, ListParams};

use super::context::Context;
use super::error::Error;
use super::plan::{expected_count, parse_selector, select_pods};

/// What a budget covers.
pub struct Targets {
    pub pods: Vec<Arc<Pod>>,
    pub expected: i32,
}

/// A workload as the controller finder sees it.
struct Workload {
    uid: String,
    replicas: i32,
    selector: Option<LabelSelector>,
    /// Read directly (apps, apps.kruise.io) rather than through its scale subresource.
    known: bool,
}

fn is_known(api_version: &str, kind: &str) -> bool {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    matches!(
        (group, kind),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet")
            | (keys::APPS_GROUP, "CloneSet" | "StatefulSet")
    )
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// The workload `kind`/`name` (`None` when it is gone or being deleted).
async fn workload(
    ctx: &Context,
    ns: &str,
    api_version: &str,
    kind: &str,
    name: &str,
) -> Result<Option<Workload>, Error> {
    let ar = ctx.resource(api_version, kind).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
    let known = is_known(api_version, kind);
    let obj = if known {
        api.get_opt(name).await?
    } else {
        match api.get_subresource("scale", name).await {
            Ok(o) => Some(o),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(e.into()),
        }
    };
    let Some(obj) = obj.filter(|o| o.metadata.deletion_timestamp.is_none()) else {
        return Ok(None);
    };
    let replicas = obj.data["spec"]["replicas"]
        .as_i64()
        .map_or(if known { 1 } else { 0 }, |r| {
            i32::try_from(r).unwrap_or(i32::MAX)
        });
    let selector = if known {
        serde_json::from_value(obj.data["spec"]["selector"].clone()).ok()
    } else {
        obj.data["status"]["selector"]
            .as_str()
            .and_then(parse_selector)
    };
    Ok(Some(Workload {
        uid: obj.metadata.uid.unwrap_or_default(),
        replicas,
        selector,
        known,
    }))
}

/// The ReplicaSets a Deployment controls.
async fn replica_set_uids(
    ctx: &Context,
    ns: &str,
    deployment_uid: &str,
) -> Result<Vec<String>, Error> {
    let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), ns);
    let list = api.list(&ListParams::default()).await?;
    Ok(list
        .items
        .into_iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .filter(|rs| {
            rs.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == deployment_uid)
        })
        .filter_map(|rs| rs.metadata.uid)
        .collect())
}

/// Everything a budget covers.
pub async fn resolve(ctx: &Context, budget: &PodUnavailableBudget) -> Result<Targets, Error> {
    let ns = budget.metadata.namespace.clone().unwrap_or_default();
    if let Some(r) = &budget.spec.target_reference {
        let (pods, replicas) = match workload(ctx, &ns, &r.api_version, &r.kind, &r.name).await? {
            Some(w) => {
                let pods = workload_pods(ctx, &ns, &r.kind, &w).await?;
                (pods, w.replicas)
            }
            None => (Vec::new(), 0),
        };
        return Ok(Targets {
            expected: expected_count(budget, replicas),
            pods,
        });
    }
    let Some(sel) = &budget.spec.selector else {
        return Ok(Targets {
            pods: Vec::new(),
            expected: 0,
        });
    };
    let pods = select_pods(&ctx.pods.in_namespace(&ns), sel);
    let expected = match kruise_api::policy::v1alpha1::pubcontrol::protect_total_replicas(
        budget.metadata.annotations.as_ref(),
    ) {
        Some(n) => n,
        None => expected_for_pods(ctx, &ns, &pods).await?,
    };
    Ok(Targets { pods, expected })
}

/// The active Pods of a workload: those it controls (through its ReplicaSets for a
/// Deployment); for other kinds with none, those its selector matches. None at 0 replicas.
async fn workload_pods(
    ctx: &Context,
    ns: &str,
    kind: &str,
    w: &Workload,
) -> Result<Vec<Arc<Pod>>, Error> {
    if w.replicas == 0 {
        return Ok(Vec::new());
    }
    let mut uids = vec![w.uid.clone()];
    if kind == "Deployment" {
        let rs = replica_set_uids(ctx, ns, &w.uid).await?;
        if !rs.is_empty() {
            uids = rs;
        }
    }
    let mut pods: Vec<Arc<Pod>> = uids
        .iter()
        .flat_map(|uid| ctx.pods.owned_by(ns, uid))
        .filter(|p| is_active(p))
        .collect();
    if pods.is_empty()
        && !w.known
        && let Some(sel) = &w.selector
    {
        pods = select_pods(&ctx.pods.in_namespace(ns), sel);
    }
    Ok(pods)
}

/// The sum of the replicas of the workloads controlling `pods`, each counted once (upstream
/// `GetExpectedScaleForPods`); a ReplicaSet of a Deployment counts as the Deployment.
async fn expected_for_pods(ctx: &Context, ns: &str, pods: &[Arc<Pod>]) -> Result<i32, Error> {
    let owners: BTreeSet<(String, String, String, String)> = pods
        .iter()
        .filter_map(|p| controller_of(p))
        .map(|o| {
            (
                o.uid.clone(),
                o.api_version.clone(),
                o.kind.clone(),
                o.name.clone(),
            )
        })
        .collect();
    let mut seen = BTreeSet::new();
    let mut total = 0i32;
    for (uid, api_version, kind, name) in owners {
        let (mut api_version, mut kind, mut name, mut want_uid) = (api_version, kind, name, uid);
        if kind == "ReplicaSet" && api_version.starts_with("apps/") {
            let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), ns);
            let Some(rs) = api.get_opt(&name).await? else {
                continue;
            };
            if let Some(d) = rs
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true) && o.kind == "Deployment")
            {
                (api_version, kind, name, want_uid) = (
                    d.api_version.clone(),
                    d.kind.clone(),
                    d.name.clone(),
                    d.uid.clone(),
                );
            }
        }
        let Some(w) = workload(ctx, ns, &api_version, &kind, &name).await? else {
            continue;
        };
        if w.uid != want_uid || !seen.insert(w.uid.clone()) {
            continue;
        }
        total = total.saturating_add(w.replicas);
    }
    Ok(total)
}

fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
}
