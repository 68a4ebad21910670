//! PVC I/O of a CloneSet without PVC reuse: list the PVCs it owns, delete those whose Pod is
//! gone, and hand those of finished Pods to the Pod (upstream `cleanupPVCs`).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kruise_api::apps::v1beta1::CloneSet;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::pod::instance_id;
use super::scale;
use crate::workload::podutil;

/// Without PVC reuse, PVCs whose pod is gone are deleted and those of finished pods are handed to
/// the pod; returns the PVCs still in use.
pub(super) async fn cleanup_pvcs(
    ctx: &Context,
    cs: &CloneSet,
    ns: &str,
    active: &[Arc<Pod>],
    inactive: &[Arc<Pod>],
    pvcs: Vec<PersistentVolumeClaim>,
) -> Result<Vec<PersistentVolumeClaim>, Error> {
    let active_ids: BTreeSet<&str> = active
        .iter()
        .filter_map(|p| instance_id(p.as_ref()))
        .collect();
    let inactive_ids: Vec<Option<&str>> =
        inactive.iter().map(|p| instance_id(p.as_ref())).collect();
    let pvc_ids: Vec<Option<&str>> = pvcs.iter().map(instance_id).collect();
    let plan = scale::plan_pvc_cleanup(&pvc_ids, &active_ids, &inactive_ids);
    let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), ns);
    let cs_uid = cs.uid().unwrap_or_default();
    for &(i, p) in &plan.reown {
        let pvc = &pvcs[i];
        let pod = &inactive[p];
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let mut refs: Vec<_> = pvc
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|o| o.uid != cs_uid)
            .collect();
        refs.push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: <Pod as k8s_openapi::Resource>::API_VERSION.into(),
                kind: <Pod as k8s_openapi::Resource>::KIND.into(),
                name: podutil::name(pod).to_string(),
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
        );
        let patch = json!({ "metadata": { "ownerReferences": refs } });
        let res = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await;
        if ctx
            .pvc_written(cs, pvc, res, "FailedUpdate", |e| {
                format!("failed to update PVC {name}: {e}")
            })
            .await?
        {
            tracing::info!(pvc = %name, pod = podutil::name(pod), "handed PVC to its finished pod");
        }
    }
    for &i in &plan.delete {
        let pvc = &pvcs[i];
        let name = pvc.metadata.name.clone().unwrap_or_default();
        let res = api.delete(&name, &DeleteParams::default()).await;
        if ctx
            .pvc_written(cs, pvc, res, "FailedDelete", |e| {
                format!("failed to clean up PVC {name}: {e}")
            })
            .await?
        {
            tracing::info!(pvc = %name, "deleted PVC whose pod is gone");
        }
    }
    Ok(plan.keep.into_iter().map(|i| pvcs[i].clone()).collect())
}

/// The claims `cs` made and still owns, from the watch (see [`crate::pvccache`]).
pub(super) fn owned_pvcs(
    ctx: &Context,
    cs: &CloneSet,
    ns: &str,
    uid: &str,
) -> Vec<PersistentVolumeClaim> {
    if cs.spec.volume_claim_templates.is_empty() {
        return Vec::new();
    }
    crate::pvccache::owned(&ctx.pvcs, ns, &cs.spec.selector, uid)
}
