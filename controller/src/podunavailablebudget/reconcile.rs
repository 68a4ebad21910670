//! One reconcile of a budget (upstream `syncPodUnavailableBudget`): its Pods and expected
//! count → the related-pub annotation on Pods without one → the status, requeued when the next
//! recorded entry expires.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kruise_api::keys;
use kruise_api::policy::v1alpha1::PodUnavailableBudget;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::plan::{desired, pods_to_annotate};
use super::{status, targets};

/// A budget with nothing pending is looked at again after this long anyway: a workload's
/// replicas can change without any of its Pods changing at once.
const RESYNC: Duration = Duration::from_secs(300);

/// One reconcile of `budget` (the runner adds its span, timing and metrics).
pub async fn reconcile(
    budget: Arc<PodUnavailableBudget>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    if budget.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let about = budget.object_ref(&());
    let t = targets::resolve(&ctx, &budget).await?;
    if t.pods.is_empty() {
        ctx.event(
            &about,
            EventType::Normal,
            keys::PUB_REASON_NO_PODS,
            "No matching pods found".to_owned(),
        )
        .await;
    } else {
        annotate(&ctx, &budget, &t.pods).await?;
    }
    let desired = match desired(&budget, t.expected) {
        Ok(d) => d,
        Err(e) => {
            ctx.event(
                &about,
                EventType::Warning,
                keys::PUB_REASON_CALCULATE_EXPECTED_FAILED,
                format!("Failed to calculate the number of expected pods: {e}"),
            )
            .await;
            return Err(e.into());
        }
    };
    let Some(plan) = status::write(&ctx, &budget, &t.pods, t.expected, desired).await? else {
        return Ok(Action::await_change());
    };
    for name in &plan.not_deleted {
        let pod_ref = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: budget.namespace(),
            name: Some(name.clone()),
            uid: t
                .pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .and_then(|p| p.metadata.uid.clone()),
            ..Default::default()
        };
        let note = format!(
            "Pod was expected by PUB {}/{} to be deleted but it wasn't",
            budget.namespace().unwrap_or_default(),
            budget.name_any()
        );
        ctx.event(
            &pod_ref,
            EventType::Warning,
            keys::PUB_REASON_NOT_DELETED,
            note,
        )
        .await;
    }
    let wait = plan.recheck.map_or(RESYNC, |at| {
        let left = at.duration_since(jiff::Timestamp::now());
        // A little past the expiry, so the entry is found expired.
        Duration::try_from(left).unwrap_or_default() + Duration::from_millis(100)
    });
    Ok(Action::requeue(wait))
}

/// Marks the Pods without a budget with this one (upstream `patchRelatedPubAnnotationInPod`).
async fn annotate(
    ctx: &Context,
    budget: &PodUnavailableBudget,
    pods: &[Arc<Pod>],
) -> Result<(), Error> {
    let name = budget.name_any();
    for pod in pods_to_annotate(pods) {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
        let patch = json!({"metadata": {"annotations": {keys::PUB_RELATED_ANNOTATION: name}}});
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            // Deleted in between: nothing to mark.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
