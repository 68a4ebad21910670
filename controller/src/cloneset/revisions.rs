//! Revision I/O (upstream `sync/api.go` revision half and `history`): list the CloneSet's
//! ControllerRevisions, pick or create the update revision, and read a revision's Pod template.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kruise_api::apps::v1beta1::CloneSet;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::spec::template_labels;
use super::status;
use crate::revision::{self, Parent, UpdateRevisionChoice};

pub(super) async fn list_revisions(
    api: &Api<ControllerRevision>,
    cs: &CloneSet,
    uid: &str,
) -> Result<Vec<ControllerRevision>, Error> {
    let lp = ListParams::default().labels(&status::selector_string(&cs.spec.selector));
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|r| {
            r.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .collect())
}

/// The current and update revisions, creating or bumping the update revision as needed.
pub(super) async fn active_revisions(
    ctx: &Context,
    cs: &CloneSet,
    api: &Api<ControllerRevision>,
    revisions: &mut Vec<ControllerRevision>,
) -> Result<(ControllerRevision, ControllerRevision, i32), Error> {
    let ns = cs.namespace().ok_or(Error::Unnamed)?;
    let name = cs.name_any();
    let uid = cs.uid().ok_or(Error::Unnamed)?;
    let api_version = CloneSet::api_version(&());
    let kind = CloneSet::kind(&());
    let parent = Parent {
        api_version: &api_version,
        kind: &kind,
        name: &name,
        namespace: &ns,
        uid: &uid,
    };
    let mut collision = cs
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let template = serde_json::to_value(&cs.spec.template)?;
    let tpl_labels = template_labels(cs);
    let annotations = cs.metadata.annotations.clone().unwrap_or_default();
    let candidate = revision::new_revision(
        &parent,
        &template,
        &tpl_labels,
        &annotations,
        revision::next_revision_number(revisions),
        collision,
    )?;
    let update = match revision::choose_update_revision(revisions, &candidate) {
        UpdateRevisionChoice::UseExisting(i) => revisions[i].clone(),
        UpdateRevisionChoice::Bump { index, new_number } => {
            let rname = revisions[index].metadata.name.clone().unwrap_or_default();
            tracing::info!(revision = %rname, new_number, "rolling back to an earlier revision");
            let bumped = api
                .patch(
                    &rname,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "revision": new_number })),
                )
                .await?;
            revisions[index] = bumped.clone();
            revision::sort_revisions(revisions);
            bumped
        }
        UpdateRevisionChoice::Create => {
            let created = create_revision(api, &name, candidate, &mut collision).await?;
            ctx.event_about(
                cs,
                &created,
                EventType::Normal,
                "RevisionCreated",
                format!(
                    "created revision {}",
                    created.metadata.name.clone().unwrap_or_default()
                ),
            )
            .await;
            revisions.push(created.clone());
            revision::sort_revisions(revisions);
            created
        }
    };
    let current_name = cs
        .status
        .as_ref()
        .map(|s| s.current_revision.clone())
        .unwrap_or_default();
    let current = revisions
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(current_name.as_str()))
        .cloned()
        .unwrap_or_else(|| update.clone());
    Ok((current, update, collision))
}

async fn create_revision(
    api: &Api<ControllerRevision>,
    parent: &str,
    candidate: ControllerRevision,
    collision: &mut i32,
) -> Result<ControllerRevision, Error> {
    loop {
        let mut obj = candidate.clone();
        let name = revision::name_for_collision(parent, &candidate, *collision)?;
        obj.metadata.name = Some(name.clone());
        match api.create(&PostParams::default(), &obj).await {
            Ok(c) => return Ok(c),
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                let existing = api.get(&name).await?;
                if existing.data.as_ref().map(|d| &d.0) == obj.data.as_ref().map(|d| &d.0) {
                    return Ok(existing);
                }
                // Same name, different template: a hash collision; try the next name.
                *collision += 1;
                tracing::info!(revision = %name, collision = *collision, "revision name collision");
            }
            Err(e) => return Err(e.into()),
        }
    }
}

pub(super) fn template_of(rev: &ControllerRevision) -> Result<PodTemplateSpec, Error> {
    let v = revision::template_from_revision(rev)?;
    serde_json::from_value(v).map_err(|e| Error::Template(e.to_string()))
}
