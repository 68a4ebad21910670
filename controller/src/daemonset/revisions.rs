//! The DaemonSet's revisions (upstream `constructHistory` and `cleanupHistory`): the update
//! revision of the current template, and history beyond `revisionHistoryLimit` that no Pod uses.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::DaemonSet;
use kruise_api::keys;
use kube::Api;
use kube::api::DeleteParams;
use kube::runtime::events::EventType;

use super::context::Context;
use super::error::Error;
use super::pod;
use crate::history::{self, Origin};
use crate::revision;

/// The DaemonSet's revisions as the shared watch shows them, oldest first (see
/// [`crate::revcache`] for why a lagging cache is safe).
pub(super) fn list_revisions(
    ctx: &Context,
    ds: &DaemonSet,
    ns: &str,
    uid: &str,
) -> Vec<ControllerRevision> {
    ctx.revisions.owned(ns, &ds.spec.selector, uid)
}

/// The revision of the current template: an equal existing one (bumped to the newest number
/// when it was an older one: a rollback), or a new one, its name moved on by the collision
/// count when taken.
pub(super) async fn update_revision(
    ctx: &Context,
    ds: &DaemonSet,
    api: &Api<ControllerRevision>,
    revisions: &mut Vec<ControllerRevision>,
) -> Result<(ControllerRevision, i32), Error> {
    let labels = ds
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    // Upstream ADS labels its revisions with the hash its Pods carry, and records no annotations.
    let src = history::TemplateSource {
        owner: ds,
        template: &ds.spec.template,
        labels: &labels,
        annotations: &BTreeMap::new(),
        collision_count: ds.status.as_ref().and_then(|s| s.collision_count),
        hash_label: Some(keys::CONTROLLER_REVISION_HASH_LABEL),
    };
    let (rev, origin, collision) =
        history::update_revision::<_, Error>(api, src, revisions).await?;
    if origin == Origin::Created {
        let rname = rev.metadata.name.clone().unwrap_or_default();
        ctx.event(
            ds,
            EventType::Normal,
            keys::REASON_REVISION_CREATED,
            format!("created revision {rname}"),
        )
        .await;
    }
    Ok((rev, collision))
}

/// Deletes revisions beyond `revisionHistoryLimit` that no Pod uses.
pub(super) async fn truncate_history(
    ds: &DaemonSet,
    api: &Api<ControllerRevision>,
    revisions: &[ControllerRevision],
    pods: &[Arc<Pod>],
    update: &ControllerRevision,
) -> Result<(), Error> {
    let used: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| pod::pod_hash(p).map(str::to_owned))
        .collect();
    let update_name = update.metadata.name.clone().unwrap_or_default();
    let limit = ds.spec.revision_history_limit.unwrap_or(10);
    // Pods carry the hash, not the name: a revision is live when a Pod carries its hash.
    let dead: Vec<&ControllerRevision> = revisions
        .iter()
        .filter(|r| !used.contains(&pod::revision_hash(r)))
        .collect();
    let names: Vec<ControllerRevision> = dead.into_iter().cloned().collect();
    for name in
        revision::revisions_to_truncate(&names, &BTreeSet::new(), &update_name, &update_name, limit)
    {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
