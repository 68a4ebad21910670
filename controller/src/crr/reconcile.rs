//! One reconcile: the request's next step ([`plan::next_step`]), carried out.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kruise_api::apps::v1beta1::{ContainerRecreateRequest, ContainerRecreateRequestPhase};
use kruise_api::appspub::kruise_pod_ready_condition;
use kruise_api::keys::{self, k8s};
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
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
    // Every write is at the storage version (no conversion webhook call).
    let api = ctx.stored.api(ctx.client.clone(), Some(&ns));
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
            api.replace(
                &name,
                &PostParams::default(),
                &ctx.stored.stored(&admitted)?,
            )
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
                let mut after = crr.clone();
                after
                    .status
                    .get_or_insert_with(Default::default)
                    .container_status_snapshot = s;
                write(ctx, &api, crr, &after).await?;
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
    api: &Api<DynamicObject>,
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
    let mut after = crr.clone();
    let conditions = &mut after.status.get_or_insert_with(Default::default).conditions;
    conditions.retain(|c| c.type_ != keys::CRR_CONDITION_PRE_RECREATE_GRACE);
    conditions.push(Condition {
        type_: keys::CRR_CONDITION_PRE_RECREATE_GRACE.into(),
        status: k8s::CONDITION_TRUE.into(),
        last_transition_time: Time(now),
        reason: plan::GRACE_REASON.into(),
        message: plan::GRACE_MESSAGE.into(),
        observed_generation: None,
    });
    write(ctx, api, crr, &after).await?;
    tracing::info!("pod held not-ready for the unready grace period");
    Ok(())
}

/// Writes the change from `before` to `after` at the storage version. v1beta1's
/// `status.containerStatusSnapshot` and PreRecreateGrace condition are annotations in v1alpha1
/// (as OpenKruise v1.9.0 stores them): with v1alpha1 stored the change is a metadata patch, with
/// v1beta1 stored a status patch; the conversion decides, as the webhook's would. The daemon
/// reads them back as those status fields.
async fn write(
    ctx: &Context,
    api: &Api<DynamicObject>,
    before: &ContainerRecreateRequest,
    after: &ContainerRecreateRequest,
) -> Result<(), Error> {
    let patches = ctx.stored.patches(before, after)?;
    let name = before.name_any();
    if let Some(status) = &patches.status {
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
    }
    if let Some(object) = &patches.object {
        api.patch(&name, &PatchParams::default(), &Patch::Merge(object))
            .await?;
    }
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
