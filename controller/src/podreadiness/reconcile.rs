//! One reconcile: set `KruisePodReady=True` on a gated Pod without the condition.

use std::sync::Arc;
use std::time::Instant;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;

use super::context::Context;
use super::error::Error;
use super::plan::{condition_patch, needs_condition};

/// Sets `KruisePodReady=True` on a gated pod that has no such condition yet. A failed patch is
/// returned, so the runner retries it with the pod's backoff.
pub(super) async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, Error> {
    // The store may hold a newer pod than the event that queued it: decide on what it holds.
    if !needs_condition(&pod) {
        return Ok(Action::await_change());
    }
    let (Some(ns), Some(name)) = (
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref(),
    ) else {
        return Ok(Action::await_change());
    };
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    if !ctx.recent.claim(&uid, Instant::now()) {
        return Ok(Action::await_change());
    }
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    // Strategic merge keys conditions by type, so other conditions are left alone.
    let res = api
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(condition_patch(Timestamp::now())),
        )
        .await;
    match res {
        Ok(_) => {
            tracing::debug!("set KruisePodReady=True");
            Ok(Action::await_change())
        }
        Err(kube::Error::Api(s)) if s.is_not_found() => Ok(Action::await_change()),
        Err(e) => {
            ctx.recent.release(&uid);
            Err(e.into())
        }
    }
}
