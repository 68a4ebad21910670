//! Revision I/O (upstream `sync/api.go` revision half and `history`): list the CloneSet's
//! ControllerRevisions, pick or create the update revision, and read a revision's Pod template.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kruise_api::apps::v1beta1::CloneSet;
use kruise_api::keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH_ANNOTATION as VCT_HASH;
use kruise_api::vct_hash::volume_claim_templates_hash;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::active::{Active, Inputs};
use super::context::Context;
use super::error::Error;
use super::spec::template_labels;
use crate::history::{self, Origin};
use crate::revision;

/// The current and update revisions among the CloneSet's, creating or bumping the update
/// revision as needed. A result that needed no write is kept (see
/// [`ActiveMemo`](super::active::ActiveMemo)); one that created or bumped a revision is worked
/// out again until the cache shows that write.
pub(super) async fn active_revisions(
    ctx: &Context,
    cs: &CloneSet,
    api: &Api<ControllerRevision>,
    ns: &str,
    uid: &str,
) -> Result<Arc<Active>, Error> {
    let cached = ctx.revisions.owned_versions(ns, &cs.spec.selector, uid);
    if let Some(active) = ctx.active.get(uid, cs, &cached) {
        return Ok(active);
    }
    let mut revisions = ctx.revisions.owned(ns, &cs.spec.selector, uid);
    let (current, update, collision, origin) =
        work_out_revisions(ctx, cs, api, &mut revisions).await?;
    let active = Arc::new(Active {
        revisions,
        current,
        update,
        collision,
    });
    if let (Origin::Existing, Some(inputs)) = (origin, Inputs::of(cs, cached)) {
        ctx.active.put(uid, inputs, active.clone());
    }
    Ok(active)
}

/// The current and update revisions, creating or bumping the update revision as needed, and
/// how the update revision came to be.
async fn work_out_revisions(
    ctx: &Context,
    cs: &CloneSet,
    api: &Api<ControllerRevision>,
    revisions: &mut Vec<ControllerRevision>,
) -> Result<(ControllerRevision, ControllerRevision, i32, Origin), Error> {
    // Upstream records the volumeClaimTemplates' hash on every revision it makes, so that
    // `RecreatePodWhenChangeVCTInCloneSetGate` can tell a claim change from an image change.
    let vct_hash = volume_claim_templates_hash(&cs.spec.volume_claim_templates);
    let mut annotations = cs.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(VCT_HASH.to_owned(), vct_hash.clone());
    let src = history::TemplateSource {
        owner: cs,
        template: &cs.spec.template,
        labels: &template_labels(cs),
        annotations: &annotations,
        collision_count: cs.status.as_ref().and_then(|s| s.collision_count),
        hash_label: None,
    };
    let (mut update, origin, collision) =
        history::update_revision::<_, Error>(api, src, revisions).await?;
    // A rollback to an older revision takes the claims' hash of now (upstream: the last equal
    // revision gets the update revision's hash), so the claims of today are what it compares.
    if origin == Origin::Bumped && update.annotations().get(VCT_HASH) != Some(&vct_hash) {
        let name = update.name_any();
        update = api
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {VCT_HASH: vct_hash}}})),
            )
            .await?;
        if let Some(r) = revisions.iter_mut().find(|r| r.name_any() == name) {
            *r = update.clone();
        }
    }
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
    Ok((current, update, collision, origin))
}

pub(super) fn template_of(rev: &ControllerRevision) -> Result<PodTemplateSpec, Error> {
    let v = revision::template_from_revision(rev)?;
    serde_json::from_value(v).map_err(|e| Error::Template(e.to_string()))
}
