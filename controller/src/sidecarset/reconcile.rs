//! One SidecarSet reconcile as named steps: gates (caches synced, our last Pod writes shown) →
//! the matched Pods → the revision history → the pure [`plan`](super::plan) → the sync's Pod
//! writes → status.

use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::{keys, sidecarset as wire};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;

use super::context::{Context, PROGRESS_RESYNC};
use super::error::Error;
use super::history;
use super::plan::{self, Latest, PodState};
use super::{status, sync};

#[tracing::instrument(skip_all, fields(sidecarset = %set.name_any()))]
pub(super) async fn reconcile(set: Arc<SidecarSet>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.pods.wait_synced().await;
    // Until the namespaces are listed every namespaceSelector would match nothing.
    if ctx.namespaces.wait_until_ready().await.is_err() {
        return Ok(Action::requeue(PROGRESS_RESYNC));
    }
    let mut latest = Latest {
        hash: wire::current_hash(&set, keys::SIDECARSET_HASH_ANNOTATION)?,
        without_image: wire::current_hash(&set, keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION)?,
        revision: String::new(),
    };
    let pods = matched_pods(&ctx, &set);
    if let Some(after) = ctx.cache_lags(&pods, std::time::Instant::now()) {
        tracing::debug!("the Pod cache does not show our last writes yet");
        return Ok(Action::requeue(after));
    }
    let states: Vec<PodState> = pods
        .iter()
        .map(|p| plan::pod_state(&set, &latest, p))
        .collect();
    let refs: Vec<&Pod> = pods.iter().map(AsRef::as_ref).collect();
    let registered = register_revision(&ctx, &set, &refs).await?;
    latest.revision.clone_from(&registered.latest);
    let mut plan = plan::plan(&set, &states, &refs);
    plan.status.latest_revision = registered.latest;
    if registered.collision_count > 0 || plan.status.collision_count.is_some() {
        plan.status.collision_count = Some(registered.collision_count);
    }
    let now = Timestamp::now();
    let blocked = sync::sync(&ctx, &set, &latest, &pods, &plan, now).await;
    plan.status.conditions = plan::conditions(set.status.as_ref(), &blocked, now);
    status::write(&ctx, &set, &plan.status).await?;
    if let Some(first) = blocked.first() {
        // The runner backs this SidecarSet off; the others go on.
        return Err(Error::Blocked {
            count: blocked.len(),
            first: first.clone(),
        });
    }
    let busy = states.iter().any(|s| !s.consistent || s.held)
        || !plan.upgrade.is_empty()
        || plan.status.updated_pods < plan.status.matched_pods;
    Ok(if busy {
        Action::requeue(PROGRESS_RESYNC)
    } else {
        Action::await_change()
    })
}

/// The cached Pods the SidecarSet matches, in namespace/name order; expectations of Pods that
/// are gone are dropped first (they never show our write).
fn matched_pods(ctx: &Context, set: &SidecarSet) -> Vec<Arc<Pod>> {
    let all = ctx.pods.store().state();
    if !ctx.written.is_empty() {
        let live: std::collections::HashSet<&str> = all
            .iter()
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        ctx.written.retain(|uid| live.contains(uid));
    }
    let mut pods: Vec<Arc<Pod>> = all
        .into_iter()
        .filter(|p| {
            let ns = p.namespace().unwrap_or_default();
            plan::is_matched(set, p, &ctx.namespace_labels(&ns))
        })
        .collect();
    pods.sort_by_key(|p| (p.namespace(), p.name_any()));
    pods
}

/// Records the current spec as the latest ControllerRevision (an Event when it is new) and
/// trims history beyond `revisionHistoryLimit`.
async fn register_revision(
    ctx: &Context,
    set: &SidecarSet,
    refs: &[&Pod],
) -> Result<history::Registered, Error> {
    let registered =
        history::register_latest(&ctx.client, &ctx.revision_namespace, set, refs).await?;
    if registered.origin == crate::history::Origin::Created {
        // As the workloads do: the revision is what `injectionStrategy.revision` can pin.
        let about = ObjectReference {
            api_version: Some("apps/v1".to_owned()),
            kind: Some("ControllerRevision".to_owned()),
            namespace: Some(ctx.revision_namespace.clone()),
            name: Some(registered.latest.clone()),
            ..Default::default()
        };
        ctx.event_about(
            set,
            Some(about),
            EventType::Normal,
            keys::REASON_REVISION_CREATED,
            format!(
                "created revision {} in namespace {}",
                registered.latest, ctx.revision_namespace
            ),
        )
        .await;
    }
    if !registered.deleted.is_empty() {
        tracing::info!(deleted = ?registered.deleted, "revisions beyond revisionHistoryLimit deleted");
    }
    Ok(registered)
}
