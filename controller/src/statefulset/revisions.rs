//! Revision I/O of the Advanced StatefulSet (upstream `getStatefulSetRevisions` and
//! `truncateHistory`), on the ControllerRevision building blocks shared with CloneSet in
//! [`crate::revision`].

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kruise_api::apps::v1beta1::StatefulSet;
use kruise_api::keys;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, Resource};

use super::context::Context;
use super::error::Error;
use crate::history::{self, Origin};
use crate::revision;
use crate::workload::{claim, podutil};

/// The set's revisions (owned by its uid) as the shared watch shows them, oldest first (see
/// [`crate::revcache`] for why a lagging cache is safe).
pub(super) fn list(
    ctx: &Context,
    sts: &StatefulSet,
    ns: &str,
    uid: &str,
) -> Vec<ControllerRevision> {
    ctx.revisions.owned(ns, &sts.spec.selector, uid)
}

/// Adopts the revisions that `sts`'s selector selects and no controller owns (upstream
/// `adoptOrphanRevisions`): a StatefulSet deleted with `--cascade=orphan` for an Advanced
/// StatefulSet of the same name leaves its revisions so, and adopting them keeps its Pods on
/// their revision (same name, same data) instead of recreating them. Returns how many were
/// adopted; a revision gone or taken meanwhile is skipped.
pub(super) async fn adopt_orphans(
    ctx: &Context,
    sts: &StatefulSet,
    api: &Api<ControllerRevision>,
    ns: &str,
) -> Result<usize, Error> {
    if sts.metadata.deletion_timestamp.is_some() {
        return Ok(0);
    }
    let orphans = ctx.revisions.orphans(ns, &sts.spec.selector);
    let Some(owner) = sts.controller_owner_ref(&()) else {
        return Ok(0);
    };
    let mut adopted = 0;
    for rev in &orphans {
        let (Some(name), Some(uid)) = (rev.metadata.name.as_deref(), rev.metadata.uid.as_deref())
        else {
            continue;
        };
        let patch = claim::adopt_patch(&owner, uid);
        match api
            .patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
        {
            Ok(_) => {
                tracing::info!(revision = name, "adopted orphan revision");
                adopted += 1;
            }
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_invalid() || s.is_conflict() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(adopted)
}

/// The current and update revisions and the collision count, creating or bumping the update
/// revision as the template asks.
pub(super) async fn active(
    ctx: &Context,
    sts: &StatefulSet,
    api: &Api<ControllerRevision>,
    revisions: &mut Vec<ControllerRevision>,
) -> Result<(ControllerRevision, ControllerRevision, i32), Error> {
    let labels = sts
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let src = history::TemplateSource {
        owner: sts,
        template: &sts.spec.template,
        labels: &labels,
        annotations: &sts.metadata.annotations.clone().unwrap_or_default(),
        collision_count: sts.status.as_ref().and_then(|s| s.collision_count),
        hash_label: None,
    };
    let (update, origin, collision) =
        history::update_revision::<_, Error>(api, src, revisions).await?;
    if origin == Origin::Created {
        let rname = update.metadata.name.clone().unwrap_or_default();
        ctx.event(
            sts,
            EventType::Normal,
            keys::REASON_REVISION_CREATED,
            format!("created revision {rname}"),
            Some(update.object_ref(&())),
        )
        .await;
    }
    let current_name = sts
        .status
        .as_ref()
        .map(|s| s.current_revision.clone())
        .unwrap_or_default();
    let current = history::named_or(revisions, &current_name, &update);
    Ok((current, update, collision))
}

/// The pod template a revision recorded.
pub(super) fn template_of(rev: &ControllerRevision) -> Result<PodTemplateSpec, Error> {
    let v = revision::template_from_revision(rev)?;
    serde_json::from_value(v).map_err(|e| Error::Template(e.to_string()))
}

/// Deletes revisions beyond `revisionHistoryLimit` that no pod uses. Best effort.
pub(super) async fn truncate_history(
    api: &Api<ControllerRevision>,
    sts: &StatefulSet,
    revisions: &[ControllerRevision],
    pods: &[&Pod],
    current: &str,
    update: &str,
) {
    let live: BTreeSet<String> = pods
        .iter()
        .filter_map(|p| podutil::revision_hash(p).map(str::to_string))
        .collect();
    let limit = sts
        .spec
        .revision_history_limit
        .unwrap_or(keys::DEFAULT_REVISION_HISTORY_LIMIT);
    for old in revision::revisions_to_truncate(revisions, &live, current, update, limit) {
        if let Err(e) = api.delete(&old, &DeleteParams::default()).await {
            tracing::warn!(revision = %old, error = %e, "failed to delete old revision");
        }
    }
}
