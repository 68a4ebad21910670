//! One reconcile of a Pod (upstream `doReconcile`): find out whether its node is a
//! virtual-kubelet, plan, and carry out the actions in order. An action that fails is reported
//! as a Warning Event on the Pod and returned, so the runner retries with the Pod's backoff.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kruise_api::apps::v1beta1::ContainerRecreateRequest;
use kruise_api::keys;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::controller::Action as Requeue;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::plan::{self, Action, Names};

/// Acts on `pod` as [`plan::plan`] says.
pub async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    // The store may hold a newer Pod than the event that queued it: decide on what it holds.
    if !plan::is_interesting(&pod) {
        return Ok(Requeue::await_change());
    }
    let result = act(&pod, &ctx).await;
    if let Err(e) = &result {
        ctx.event(
            &pod,
            EventType::Warning,
            keys::REASON_SIDECAR_TERMINATOR_FAILED,
            format!("Kruise SidecarTerminator could not stop the sidecars: {e}"),
        )
        .await;
    }
    result
}

async fn act(pod: &Pod, ctx: &Context) -> Result<Requeue, Error> {
    let virtual_kubelet = on_virtual_kubelet(pod, ctx).await?;
    for action in plan::plan(pod, virtual_kubelet) {
        match action {
            Action::ReplaceImages(images) => replace_images(pod, ctx, &images).await?,
            Action::Kill(names) => kill(pod, ctx, &names).await?,
            Action::MarkTerminated { phase } => mark_terminated(pod, ctx, phase).await?,
        }
    }
    Ok(Requeue::await_change())
}

/// Whether the Pod's node carries upstream's virtual-kubelet label (`type=virtual-kubelet`).
async fn on_virtual_kubelet(pod: &Pod, ctx: &Context) -> Result<bool, Error> {
    let node = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
        .ok_or(Error::NoNode)?;
    let node = Api::<Node>::all(ctx.client.clone()).get(node).await?;
    let label = node.labels().get(keys::VIRTUAL_KUBELET_LABEL_KEY);
    Ok(label.map(String::as_str) == Some(keys::VIRTUAL_KUBELET_LABEL_VALUE))
}

fn list(names: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let v: Vec<String> = names.into_iter().map(|n| n.as_ref().to_owned()).collect();
    format!("[{}]", v.join(" "))
}

/// Creates the Pod's request for `names` unless it has one (upstream: a request that exists,
/// whatever its containers, is waited for, never duplicated).
async fn kill(pod: &Pod, ctx: &Context, names: &Names) -> Result<(), Error> {
    let ns = pod.namespace().unwrap_or_default();
    // At the storage version: no conversion webhook call.
    let stored = crate::stored::of::<ContainerRecreateRequest>();
    let api = stored.api(ctx.client.clone(), Some(&ns));
    let name = plan::request_name(&pod.uid().unwrap_or_default());
    if api.get_opt(&name).await?.is_some() {
        tracing::debug!(request = name, "request exists, waiting for it");
        return Ok(());
    }
    match api
        .create(
            &PostParams::default(),
            &stored.stored(&plan::request(pod, names))?,
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    tracing::info!(request = name, containers = %list(names), "stopping sidecars");
    ctx.event(
        pod,
        EventType::Normal,
        keys::REASON_SIDECAR_TERMINATOR,
        format!(
            "Kruise SidecarTerminator is trying to terminate sidecar {} using crr",
            list(names)
        ),
    )
    .await;
    Ok(())
}

/// Sets the Pod's phase and condition SidecarTerminated (upstream `markJobPodTerminated`).
async fn mark_terminated(pod: &Pod, ctx: &Context, phase: &str) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    api.patch_status(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Strategic(plan::terminated_patch(phase, Timestamp::now())),
    )
    .await?;
    tracing::info!(phase, "job pod terminated by the SidecarTerminator");
    Ok(())
}

/// Replaces sidecar images in place (virtual-kubelet nodes; upstream
/// `executeInPlaceUpdateAction`). Strategic merge keys containers by name, so only the image of
/// each named container is written.
async fn replace_images(
    pod: &Pod,
    ctx: &Context,
    images: &[(String, String)],
) -> Result<(), Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace().unwrap_or_default());
    let containers: Vec<serde_json::Value> = images
        .iter()
        .map(|(name, image)| json!({"name": name, "image": image}))
        .collect();
    api.patch(
        &pod.name_any(),
        &PatchParams::default(),
        &Patch::Strategic(json!({"spec": {"containers": containers}})),
    )
    .await?;
    ctx.event(
        pod,
        EventType::Normal,
        keys::REASON_SIDECAR_TERMINATOR,
        format!(
            "Kruise SidecarTerminator is trying to terminate sidecar {} using in-place update",
            list(images.iter().map(|(n, _)| n))
        ),
    )
    .await;
    Ok(())
}
