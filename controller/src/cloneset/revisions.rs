//! Revision I/O (upstream `sync/api.go` revision half and `history`): list the CloneSet's
//! ControllerRevisions, pick or create the update revision, and read a revision's Pod template.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kruise_api::apps::v1beta1::CloneSet;
use kube::Api;
use kube::runtime::events::EventType;

use super::context::Context;
use super::error::Error;
use super::spec::template_labels;
use crate::history::{self, Origin};
use crate::revision;

/// The CloneSet's revisions as the cache shows them, oldest first.
pub(super) fn list_revisions(
    ctx: &Context,
    cs: &CloneSet,
    ns: &str,
    uid: &str,
) -> Vec<ControllerRevision> {
    ctx.revisions.owned(ns, &cs.spec.selector, uid)
}

/// The current and update revisions, creating or bumping the update revision as needed.
pub(super) async fn active_revisions(
    ctx: &Context,
    cs: &CloneSet,
    api: &Api<ControllerRevision>,
    revisions: &mut Vec<ControllerRevision>,
) -> Result<(ControllerRevision, ControllerRevision, i32), Error> {
    let src = history::TemplateSource {
        owner: cs,
        template: &cs.spec.template,
        labels: &template_labels(cs),
        annotations: &cs.metadata.annotations.clone().unwrap_or_default(),
        collision_count: cs.status.as_ref().and_then(|s| s.collision_count),
        hash_label: None,
    };
    let (update, origin, collision) =
        history::update_revision::<_, Error>(api, src, revisions).await?;
    if origin == Origin::Created {
        ctx.event_about(
            cs,
            &update,
            EventType::Normal,
            kruise_api::keys::REASON_REVISION_CREATED,
            format!(
                "created revision {}",
                update.metadata.name.clone().unwrap_or_default()
            ),
        )
        .await;
    }
    let current_name = cs
        .status
        .as_ref()
        .map(|s| s.current_revision.clone())
        .unwrap_or_default();
    let current = history::named_or(revisions, &current_name, &update);
    Ok((current, update, collision))
}

pub(super) fn template_of(rev: &ControllerRevision) -> Result<PodTemplateSpec, Error> {
    let v = revision::template_from_revision(rev)?;
    serde_json::from_value(v).map_err(|e| Error::Template(e.to_string()))
}
