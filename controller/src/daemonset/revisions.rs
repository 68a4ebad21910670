//! The DaemonSet's revisions (upstream `constructHistory` and `cleanupHistory`): the update
//! revision of the current template, and history beyond `revisionHistoryLimit` that no Pod uses.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kruise_api::apps::v1beta1::DaemonSet;
use kruise_api::keys;
use kube::api::DeleteParams;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};

use super::context::{Context, Error};
use super::pod;
use crate::history::{self, Origin};
use crate::revision::{self, Parent};

pub(super) async fn list_revisions(
    api: &Api<ControllerRevision>,
    ds: &DaemonSet,
    uid: &str,
) -> Result<Vec<ControllerRevision>, Error> {
    let sel = kruise_api::selector::to_selector_string(&ds.spec.selector).unwrap_or_default();
    history::list_owned(api, &sel, uid).await
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
    let ns = ds.namespace().ok_or(Error::Unnamed)?;
    let name = ds.name_any();
    let uid = ds.uid().ok_or(Error::Unnamed)?;
    let (api_version, kind) = (DaemonSet::api_version(&()), DaemonSet::kind(&()));
    let parent = Parent {
        api_version: &api_version,
        kind: &kind,
        name: &name,
        namespace: &ns,
        uid: &uid,
    };
    let mut collision = ds
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let template = serde_json::to_value(&ds.spec.template)?;
    let labels = ds
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let annotations = BTreeMap::new();
    let candidate = revision::new_revision(
        &parent,
        &template,
        &labels,
        &annotations,
        revision::next_revision_number(revisions),
        collision,
    )?;
    // Upstream ADS labels its revisions with the hash its Pods carry.
    let (rev, origin) = history::ensure_update_revision::<Error>(
        api,
        &name,
        candidate,
        revisions,
        &mut collision,
        Some(kruise_api::keys::CONTROLLER_REVISION_HASH_LABEL),
    )
    .await?;
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
