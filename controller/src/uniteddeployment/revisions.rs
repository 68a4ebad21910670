//! The revisions of a UnitedDeployment (upstream `revision.go`): a ControllerRevision per
//! template, its data a patch replacing `spec.template`, named `<ud>-<hash>`; old ones pruned
//! past `revisionHistoryLimit`. The current revision is the one `status.currentRevision`
//! names, else the update revision.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_api::apps::v1alpha1::UnitedDeployment;
use kruise_api::keys::k8s::CONTROLLER_REVISION_HASH_KEY;
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::context::Context;
use super::error::Error;
use super::legacy;
use super::plan::revisions_to_prune;
use crate::history;
use crate::revision::{self, RevisionError};

/// Upstream's default `revisionHistoryLimit`.
const DEFAULT_HISTORY_LIMIT: i32 = 10;

/// The current and update revision names, and the collision count to record.
pub struct Revisions {
    pub current: String,
    pub update: String,
    pub collision_count: i32,
}

/// The revision data of `ud`'s template (upstream `getUnitedDeploymentPatch`).
pub(super) fn revision_data(ud: &UnitedDeployment) -> Result<Value, RevisionError> {
    let mut template = serde_json::to_value(&ud.spec.template)?;
    if let Some(t) = template.as_object_mut() {
        t.insert("$patch".into(), json!("replace"));
    }
    Ok(json!({ "spec": { "template": template } }))
}

/// The labels a revision carries: the template's labels (the selector matches them).
fn template_labels(ud: &UnitedDeployment) -> BTreeMap<String, String> {
    let t = &ud.spec.template;
    [
        t.stateful_set_template
            .as_ref()
            .and_then(|x| x.metadata.as_ref()),
        t.advanced_stateful_set_template
            .as_ref()
            .and_then(|x| x.metadata.as_ref()),
        t.clone_set_template
            .as_ref()
            .and_then(|x| x.metadata.as_ref()),
        t.deployment_template
            .as_ref()
            .and_then(|x| x.metadata.as_ref()),
    ]
    .into_iter()
    .flatten()
    .find_map(|m| m.labels.clone())
    .unwrap_or_default()
}

/// A new (not yet created) revision of `ud` with number `number`.
fn candidate(
    ud: &UnitedDeployment,
    number: i64,
    collision: i32,
) -> Result<ControllerRevision, RevisionError> {
    let (Some(ns), Some(uid)) = (ud.namespace(), ud.uid()) else {
        return Err(RevisionError::Unowned);
    };
    let data = revision_data(ud)?;
    let hash = revision::hash_revision(&data, Some(collision))?;
    let mut labels = template_labels(ud);
    labels.insert(CONTROLLER_REVISION_HASH_KEY.to_owned(), hash.clone());
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision::revision_name(&ud.name_any(), &hash)),
            namespace: Some(ns),
            labels: Some(labels),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps.kruise.io/v1alpha1".into(),
                kind: "UnitedDeployment".into(),
                name: ud.name_any(),
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision: number,
    })
}

/// What [`sync`] found: the revisions, or a CloneSet template an earlier build's revision
/// restores (written first; see [`legacy`](super::legacy)).
pub enum Synced {
    Revisions(Revisions),
    Restore(Value),
}

/// Upstream `constructUnitedDeploymentRevisions`: prune, then make the update revision exist.
pub async fn sync(ctx: &Context, ud: &UnitedDeployment) -> Result<Synced, Error> {
    let ns = ud.namespace().unwrap_or_default();
    let api: Api<ControllerRevision> = Api::namespaced(ctx.client.clone(), &ns);
    let uid = ud.uid().unwrap_or_default();
    let selector = ud
        .spec
        .selector
        .as_ref()
        .and_then(kruise_api::selector::to_selector_string)
        .unwrap_or_default();
    let mut revs = history::list_owned::<Error>(&api, &selector, &uid).await?;
    let status = ud.status.clone().unwrap_or_default();
    let updated = status
        .update_status
        .as_ref()
        .map(|u| u.updated_revision.clone())
        .unwrap_or_default();
    let names: Vec<String> = revs
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .collect();
    let limit = ud
        .spec
        .revision_history_limit
        .unwrap_or(DEFAULT_HISTORY_LIMIT);
    let prune = revisions_to_prune(&names, &[&status.current_revision, &updated], limit);
    for name in &prune {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    revs.retain(|r| !r.metadata.name.as_ref().is_some_and(|n| prune.contains(n)));
    if let Some(t) = revs
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(updated.as_str()))
        .and_then(|r| legacy::restored_template(ud, r))
    {
        return Ok(Synced::Restore(t));
    }
    for r in &mut revs {
        if let Some(now) = legacy::as_written_now(r) {
            *r = now;
        }
    }
    let mut collision = status.collision_count.unwrap_or(0);
    let cand = candidate(ud, revision::next_revision_number(&revs), collision)?;
    let (update, _) = history::ensure_update_revision::<Error>(
        &api,
        &ud.name_any(),
        cand,
        &mut revs,
        &mut collision,
        None,
    )
    .await?;
    let update = update.metadata.name.unwrap_or_default();
    let current = revs
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .find(|n| *n == status.current_revision)
        .unwrap_or_else(|| update.clone());
    Ok(Synced::Revisions(Revisions {
        current,
        update,
        collision_count: collision,
    }))
}
