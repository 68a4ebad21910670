//! ControllerRevision I/O shared by the workloads that keep their template in revisions
//! (CloneSet, Advanced StatefulSet, Advanced DaemonSet): list a parent's revisions, and make the
//! update revision exist — reuse an equal one, bump an older equal one (a rollback), or create a
//! new one, moving its name on by the collision count when the name is taken by other data.
//! Upstream: `history.NewHistory` (`ListControllerRevisions`, `CreateControllerRevision`,
//! `UpdateControllerRevision`) and each workload's `getActiveRevisions`.
//!
//! The pure parts (data, hash, naming, equality, truncation) live in [`crate::revision`].
//! The functions are generic over the caller's error type so that each workload keeps its own.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde_json::json;

use crate::revision::{self, Parent, RevisionError, UpdateRevisionChoice};

/// Whether the object `uid` is the controller owner of `rev`.
pub fn controlled_by(rev: &ControllerRevision, uid: &str) -> bool {
    rev.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

/// The revisions matching `selector` that `uid` controls, sorted oldest first.
pub async fn list_owned<E>(
    api: &Api<ControllerRevision>,
    selector: &str,
    uid: &str,
) -> Result<Vec<ControllerRevision>, E>
where
    E: From<kube::Error>,
{
    let mut revs: Vec<ControllerRevision> = api
        .list(&ListParams::default().labels(selector))
        .await?
        .items
        .into_iter()
        .filter(|r| controlled_by(r, uid))
        .collect();
    revision::sort_revisions(&mut revs);
    Ok(revs)
}

/// How the update revision came to be; a created one deserves an Event from the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The newest revision already held this template.
    Existing,
    /// An older revision held it (a rollback): its number was bumped to the newest.
    Bumped,
    /// No revision held it: created now (or found created by an earlier attempt).
    Created,
}

/// A workload's current template, as its update revision records it.
pub struct TemplateSource<'a, K> {
    /// The workload: the revision's controller owner; its name prefixes the revision's.
    pub owner: &'a K,
    pub template: &'a PodTemplateSpec,
    /// Labels the revision carries (the template's, as each workload chooses them).
    pub labels: &'a BTreeMap<String, String>,
    /// The owner's annotations the revision records (upstream copies them; DaemonSet does not).
    pub annotations: &'a BTreeMap<String, String>,
    /// `status.collisionCount`.
    pub collision_count: Option<i32>,
    /// See [`ensure_update_revision`].
    pub hash_label: Option<&'a str>,
}

/// The update revision of `src`'s template (upstream's `newRevision` and the create-or-reuse of
/// each workload's `getActiveRevisions`), with how it came to be and the collision count to
/// record in status.
pub async fn update_revision<K, E>(
    api: &Api<ControllerRevision>,
    src: TemplateSource<'_, K>,
    revisions: &mut Vec<ControllerRevision>,
) -> Result<(ControllerRevision, Origin, i32), E>
where
    K: Resource<DynamicType = ()>,
    E: From<kube::Error> + From<RevisionError>,
{
    let meta = src.owner.meta();
    let (Some(namespace), Some(name), Some(uid)) = (
        meta.namespace.as_deref(),
        meta.name.as_deref(),
        meta.uid.as_deref(),
    ) else {
        return Err(RevisionError::Unowned.into());
    };
    let (api_version, kind) = (K::api_version(&()), K::kind(&()));
    let parent = Parent {
        api_version: &api_version,
        kind: &kind,
        name,
        namespace,
        uid,
    };
    let mut collision = src.collision_count.unwrap_or(0);
    let template = serde_json::to_value(src.template).map_err(RevisionError::from)?;
    let candidate = revision::new_revision(
        &parent,
        &template,
        src.labels,
        src.annotations,
        revision::next_revision_number(revisions),
        collision,
    )?;
    let (rev, origin) = ensure_update_revision::<E>(
        api,
        name,
        candidate,
        revisions,
        &mut collision,
        src.hash_label,
    )
    .await?;
    Ok((rev, origin, collision))
}

/// The revision for `candidate` (built by [`revision::new_revision`] with `*collision`),
/// as [`revision::choose_update_revision`] decides. `revisions` (sorted) gets the bumped or
/// created revision and stays sorted; `*collision` grows with every name taken by other data.
/// `hash_label`: a label that carries the final hash (the suffix of the name), for workloads
/// whose Pods are matched by it (upstream DaemonSet's `controller-revision-hash`).
pub async fn ensure_update_revision<E>(
    api: &Api<ControllerRevision>,
    parent_name: &str,
    candidate: ControllerRevision,
    revisions: &mut Vec<ControllerRevision>,
    collision: &mut i32,
    hash_label: Option<&str>,
) -> Result<(ControllerRevision, Origin), E>
where
    E: From<kube::Error> + From<RevisionError>,
{
    let (rev, origin) = match revision::choose_update_revision(revisions, &candidate) {
        UpdateRevisionChoice::UseExisting(i) => {
            return Ok((revisions[i].clone(), Origin::Existing));
        }
        UpdateRevisionChoice::Bump { index, new_number } => {
            let name = revisions[index].metadata.name.clone().unwrap_or_default();
            tracing::info!(revision = %name, new_number, "rolling back to an earlier revision");
            let bumped = api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "revision": new_number })),
                )
                .await?;
            revisions[index] = bumped.clone();
            (bumped, Origin::Bumped)
        }
        UpdateRevisionChoice::Create => {
            let created =
                create_with_collisions::<E>(api, parent_name, &candidate, collision, hash_label)
                    .await?;
            revisions.push(created.clone());
            (created, Origin::Created)
        }
    };
    revision::sort_revisions(revisions);
    Ok((rev, origin))
}

/// Creates `candidate` under the name its data and `*collision` give. A name already taken by
/// the same data is that revision (an earlier attempt made it); by other data it is a hash
/// collision, and the next count is tried.
async fn create_with_collisions<E>(
    api: &Api<ControllerRevision>,
    parent_name: &str,
    candidate: &ControllerRevision,
    collision: &mut i32,
    hash_label: Option<&str>,
) -> Result<ControllerRevision, E>
where
    E: From<kube::Error> + From<RevisionError>,
{
    loop {
        let mut obj = candidate.clone();
        let name = revision::name_for_collision(parent_name, candidate, *collision)?;
        if let (Some(key), Some((_, hash))) = (hash_label, name.rsplit_once('-')) {
            obj.metadata
                .labels
                .get_or_insert_default()
                .insert(key.to_owned(), hash.to_owned());
        }
        obj.metadata.name = Some(name.clone());
        match api.create(&PostParams::default(), &obj).await {
            Ok(created) => return Ok(created),
            Err(kube::Error::Api(s)) if s.is_already_exists() => {
                let existing = api.get(&name).await?;
                if existing.data.as_ref().map(|d| &d.0) == obj.data.as_ref().map(|d| &d.0) {
                    return Ok(existing);
                }
                *collision += 1;
                tracing::info!(revision = %name, collision = *collision, "revision name collision");
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The revision named `name`, else `fallback` (a workload without a recorded current revision
/// treats the update revision as current).
pub fn named_or(
    revisions: &[ControllerRevision],
    name: &str,
    fallback: &ControllerRevision,
) -> ControllerRevision {
    revisions
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))
        .cloned()
        .unwrap_or_else(|| fallback.clone())
}
