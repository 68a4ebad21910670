//! One reconcile: the request's next step ([`plan::next_step`]), carried out.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kruise_api::apps::v1beta1::{ContainerRecreateRequest, ContainerRecreateRequestPhase};
use kruise_api::appspub::kruise_pod_ready_condition;
use kruise_api::keys::{self, k8s};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::plan::{self, Step};
use crate::runner::finalizer;

/// Writes of a Pod's readiness retried on conflict.
const ATTEMPTS: u32 = 5;

pub(super) async fn reconcile(
    crr: Arc<ContainerRecreateRequest>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let (crr, ctx) = (crr.as_ref(), ctx.as_ref());
    let ns = crr.namespace().unwrap_or_default();
    let name = crr.name_any();
    let api: Api<ContainerRecreateRequest> = Api::namespaced(ctx.client.clone(), &ns);
    let pod = ctx.get_pod(&ns, &crr.spec.pod_name).await?;
    let now = Timestamp::now();
    match plan::next_step(crr, pod.as_ref(), now) {
        Step::Wait(d) => Ok(d.map_or_else(Action::await_change, Action::requeue)),
        Step::Release { remove_key } => {
            if remove_key && let Some(p) = &pod {
                set_not_ready(ctx, p, crr, false).await?;
            }
            finalizer::remove(&api, crr, keys::CRR_UNREADY_ACQUIRED_FINALIZER).await?;
            tracing::info!("released the pod's readiness");
            Ok(Action::await_change())
        }
        Step::DropActiveLabel => {
            let patch = json!({"metadata": {"labels": {keys::CRR_ACTIVE_LABEL: null}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            Ok(Action::await_change())
        }
        Step::Delete => {
            tracing::info!("deleting CRR after ttlSecondsAfterFinished");
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
            Ok(Action::await_change())
        }
        Step::Admit(admitted) => {
            // resourceVersion is kept, so a concurrent change makes this conflict and retry.
            api.replace(&name, &PostParams::default(), &admitted)
                .await?;
            tracing::info!(pod = %crr.spec.pod_name, "filled in CRR labels and container contexts");
            Ok(Action::await_change())
        }
        Step::Complete(message) => {
            tracing::info!(%message, "completing CRR");
            let patch = json!({"status": {
                "phase": ContainerRecreateRequestPhase::Completed,
                "completionTime": Time(now),
                "message": message,
            }});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            Ok(Action::await_change())
        }
        Step::Recreating {
            snapshot,
            acquire_unready,
            requeue,
        } => {
            if let Some(s) = snapshot {
                let patch = json!({"status": {"containerStatusSnapshot": s}});
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                let text = json!(s).to_string();
                annotate_v1alpha1(
                    ctx,
                    &ns,
                    &name,
                    keys::CRR_SYNC_CONTAINER_STATUSES_ANNOTATION,
                    text,
                )
                .await?;
            }
            if acquire_unready && let Some(p) = &pod {
                acquire(ctx, &api, crr, p, now).await?;
            }
            Ok(Action::requeue(requeue))
        }
    }
}

/// Holds the pod not-ready (when it has the KruisePodReady gate; finalizer first, so the key is
/// never left behind), then records PreRecreateGrace, which starts the daemon's grace clock.
async fn acquire(
    ctx: &Context,
    api: &Api<ContainerRecreateRequest>,
    crr: &ContainerRecreateRequest,
    pod: &Pod,
    now: Timestamp,
) -> Result<(), Error> {
    if kruise_api::pod::has_readiness_gate(pod, keys::KRUISE_POD_READY) {
        // Finalizer first, so the key is never left behind.
        finalizer::add(api, crr, keys::CRR_UNREADY_ACQUIRED_FINALIZER).await?;
        set_not_ready(ctx, pod, crr, true).await?;
    } else {
        tracing::info!(pod = %crr.spec.pod_name, "pod has no KruisePodReady gate; cannot hold it not-ready");
    }
    let mut conditions: Vec<Condition> = crr
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    conditions.retain(|c| c.type_ != keys::CRR_CONDITION_PRE_RECREATE_GRACE);
    conditions.push(Condition {
        type_: keys::CRR_CONDITION_PRE_RECREATE_GRACE.into(),
        status: k8s::CONDITION_TRUE.into(),
        last_transition_time: Time(now),
        reason: plan::GRACE_REASON.into(),
        message: plan::GRACE_MESSAGE.into(),
        observed_generation: None,
    });
    api.patch_status(
        &crr.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": conditions}})),
    )
    .await?;
    let since = json!(Time(now)).as_str().unwrap_or_default().to_owned();
    annotate_v1alpha1(
        ctx,
        &crr.namespace().unwrap_or_default(),
        &crr.name_any(),
        keys::CRR_UNREADY_ACQUIRED_FINALIZER,
        since,
    )
    .await?;
    tracing::info!("pod held not-ready for the unready grace period");
    Ok(())
}

/// Sets one of the annotations v1alpha1 has for v1beta1's status fields, written through
/// v1alpha1. CRRs are stored as v1alpha1 (as OpenKruise v1.9.0 stores them): a v1beta1 status
/// write of `containerStatusSnapshot` or the PreRecreateGrace condition is converted into these
/// annotations and then dropped, since a status write keeps the stored metadata. This write
/// keeps them, and the daemon reads them back in v1beta1 as those status fields. (Were v1beta1
/// stored, the status write alone would do and this one is harmless.)
async fn annotate_v1alpha1(
    ctx: &Context,
    ns: &str,
    name: &str,
    key: &str,
    value: String,
) -> Result<(), Error> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            keys::APPS_GROUP,
            keys::VERSION_V1ALPHA1,
            "ContainerRecreateRequest",
        ),
        "containerrecreaterequests",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), ns, &ar);
    let patch = json!({"metadata": {"annotations": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Adds or removes this request's not-ready key on the pod's KruisePodReady condition, with
/// the pod's resourceVersion as precondition (other writers edit the same message).
async fn set_not_ready(
    ctx: &Context,
    pod: &Pod,
    crr: &ContainerRecreateRequest,
    add: bool,
) -> Result<(), Error> {
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let msg = plan::readiness_key(crr);
    let mut current = pod.clone();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            match api.get_opt(&name).await? {
                Some(p) => current = p,
                None => return Ok(()),
            }
        }
        let Some(cond) = kruise_pod_ready_condition(&current, &msg, add, Timestamp::now())? else {
            return Ok(());
        };
        let patch = json!({
            "metadata": {"resourceVersion": current.resource_version()},
            "status": {"conditions": [cond]},
        });
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(pod = %name, namespace = %ns, add, "updated KruisePodReady not-ready key");
                return Ok(());
            }
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(kube::Error::Api(e)) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Conflict(name))
}
