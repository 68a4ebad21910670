//! The ControllerRevisions of a SidecarSet (upstream `sidecarcontrol/history_control.go`,
//! and `registerLatestRevision` / `truncateHistory` of `sidecarset_processor.go`).
//!
//! A SidecarSet is cluster-scoped, so its revisions live in the manager's namespace, labelled
//! [`keys::SIDECARSET_NAME_LABEL`] with its name and owned by it. A revision records the fields
//! injection uses ([`wire::revision_data`]) and carries the SidecarSet's annotations (its hashes
//! among them), so the webhook can inject a stored revision (`injectionStrategy.revision`).
//! The create / bump / collision flow is the workloads' shared one ([`crate::history`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kruise_api::apps::v1beta1::SidecarSet;
use kruise_api::keys::{self, k8s::CONTROLLER_REVISION_HASH_KEY};
use kruise_api::sidecarset as wire;
use kube::api::DeleteParams;
use kube::{Api, Client, ResourceExt};

use super::error::Error;
use crate::history::{self as shared, Origin};
use crate::revision::{self, RevisionError};

/// Revisions kept when `revisionHistoryLimit` is unset (upstream default).
const DEFAULT_HISTORY_LIMIT: i32 = 10;

/// The label selector of the SidecarSet's revisions (upstream `GetRevisionSelector`).
pub fn selector(name: &str) -> String {
    format!("{}={name}", keys::SIDECARSET_NAME_LABEL)
}

/// A new (not yet created) revision of `set` numbered `number` (upstream `NewRevision`).
pub fn new_revision(
    set: &SidecarSet,
    namespace: &str,
    number: i64,
    collision: i32,
) -> Result<ControllerRevision, Error> {
    let name = set.name_any();
    let data = wire::revision_data(&set.spec)?;
    let hash = revision::hash_revision(&data, Some(collision))?;
    let mut labels: BTreeMap<String, String> = set.labels().clone();
    labels.insert(CONTROLLER_REVISION_HASH_KEY.to_owned(), hash.clone());
    labels.insert(keys::SIDECARSET_NAME_LABEL.to_owned(), name.clone());
    let custom = if set.spec.custom_version.is_empty() {
        set.labels()
            .get(keys::SIDECARSET_CUSTOM_VERSION_LABEL)
            .cloned()
            .unwrap_or_default()
    } else {
        set.spec.custom_version.clone()
    };
    if !custom.is_empty() {
        labels.insert(keys::SIDECARSET_CUSTOM_VERSION_LABEL.to_owned(), custom);
    }
    let mut annotations = set.annotations().clone();
    // The webhook's hashes, as injection of this revision must write them.
    for key in [
        keys::SIDECARSET_HASH_ANNOTATION,
        keys::SIDECARSET_HASH_WITHOUT_IMAGE_ANNOTATION,
    ] {
        annotations.insert(key.to_owned(), wire::current_hash(set, key)?);
    }
    Ok(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(revision::revision_name(&name, &hash)),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: keys::APPS_V1BETA1.to_owned(),
                kind: "SidecarSet".to_owned(),
                name,
                uid: set.uid().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision: number,
    })
}

/// Revisions to delete so that at most `limit` (at least 1) remain, oldest first, never one in
/// `active` (upstream `truncateHistory`). `revisions` must be sorted.
pub fn to_truncate(
    revisions: &[ControllerRevision],
    limit: i32,
    active: &BTreeSet<String>,
) -> Vec<String> {
    let limit = usize::try_from(limit.max(1)).unwrap_or(1);
    let excess = revisions.len().saturating_sub(limit);
    revisions
        .iter()
        .filter_map(|r| r.metadata.name.clone())
        .filter(|n| !active.contains(n))
        .take(excess)
        .collect()
}

/// The revisions still in use: the latest, the one injection is pinned to, and those the
/// Pods were injected from (upstream `filterActiveRevisions`).
pub fn active_revisions(
    set: &SidecarSet,
    latest: &str,
    revisions: &[ControllerRevision],
    pods: &[&Pod],
) -> BTreeSet<String> {
    let name = set.name_any();
    let mut active = BTreeSet::from([latest.to_owned()]);
    if let Some(r) = set
        .spec
        .injection_strategy
        .revision
        .as_ref()
        .and_then(|r| r.revision_name.clone())
    {
        active.insert(r);
    }
    let mut hashes = BTreeSet::new();
    for pod in pods {
        let Some(v) = pod.annotations().get(keys::SIDECARSET_HASH_ANNOTATION) else {
            continue;
        };
        let Some(entry) = wire::parse_hash_annotation(keys::SIDECARSET_HASH_ANNOTATION, v)
            .ok()
            .and_then(|mut m| m.remove(&name))
        else {
            continue;
        };
        if !entry.controller_revision.is_empty() {
            active.insert(entry.controller_revision);
        }
        hashes.insert(entry.hash);
    }
    for r in revisions {
        let h = r
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(keys::SIDECARSET_HASH_ANNOTATION));
        if let (Some(h), Some(n)) = (h, &r.metadata.name)
            && hashes.contains(h)
        {
            active.insert(n.clone());
        }
    }
    active
}

/// What [`register_latest`] settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// `status.latestRevision`.
    pub latest: String,
    /// `status.collisionCount`.
    pub collision_count: i32,
    /// Whether the revision was created (or bumped) now.
    pub origin: Origin,
    /// Revisions deleted beyond the history limit.
    pub deleted: Vec<String>,
}

/// Makes the revision of the current spec exist in `namespace` and trims the history (upstream
/// `registerLatestRevision` then `truncateHistory`).
pub async fn register_latest(
    client: &Client,
    namespace: &str,
    set: &SidecarSet,
    pods: &[&Pod],
) -> Result<Registered, Error> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), namespace);
    let uid = set.uid().unwrap_or_default();
    let mut revisions: Vec<ControllerRevision> =
        shared::list_owned::<Error>(&api, &selector(&set.name_any()), &uid).await?;
    let mut collision = set
        .status
        .as_ref()
        .and_then(|s| s.collision_count)
        .unwrap_or(0);
    let number = revision::next_revision_number(&revisions);
    let candidate = new_revision(set, namespace, number, collision)?;
    let (latest, origin) =
        create_or_reuse(&api, set, candidate, &mut revisions, &mut collision).await?;
    let latest = latest.metadata.name.unwrap_or_default();
    let active = active_revisions(set, &latest, &revisions, pods);
    let limit = set
        .spec
        .revision_history_limit
        .unwrap_or(DEFAULT_HISTORY_LIMIT);
    let deleted = to_truncate(&revisions, limit, &active);
    for name in &deleted {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Registered {
        latest,
        collision_count: collision,
        origin,
        deleted,
    })
}

/// The one place the revision is created, reused or bumped: the workloads' shared flow.
async fn create_or_reuse(
    api: &Api<ControllerRevision>,
    set: &SidecarSet,
    candidate: ControllerRevision,
    revisions: &mut Vec<ControllerRevision>,
    collision: &mut i32,
) -> Result<(ControllerRevision, Origin), Error> {
    shared::ensure_update_revision::<Error>(
        api,
        &set.name_any(),
        candidate,
        revisions,
        collision,
        None,
    )
    .await
}

impl From<RevisionError> for Error {
    fn from(e: RevisionError) -> Self {
        Error::Revision(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(image: &str) -> SidecarSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "mesh", "uid": "u1",
                "labels": {keys::SIDECARSET_CUSTOM_VERSION_LABEL: "blue"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": image}]}
        }))
        .expect("set")
    }

    fn named(name: &str, number: i64, hash: &str) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                annotations: Some(BTreeMap::from([(
                    keys::SIDECARSET_HASH_ANNOTATION.to_owned(),
                    hash.to_owned(),
                )])),
                ..Default::default()
            },
            data: None,
            revision: number,
        }
    }

    #[test]
    fn revision_is_labelled_named_and_owned_as_upstream() {
        let s = set("e:1");
        let r = new_revision(&s, "kruise-system", 3, 0).expect("revision");
        let labels = r.metadata.labels.clone().expect("labels");
        assert_eq!(labels[keys::SIDECARSET_NAME_LABEL], "mesh");
        assert_eq!(labels[keys::SIDECARSET_CUSTOM_VERSION_LABEL], "blue");
        let hash = &labels[CONTROLLER_REVISION_HASH_KEY];
        assert_eq!(
            r.metadata.name.as_deref(),
            Some(format!("mesh-{hash}").as_str())
        );
        assert_eq!(r.metadata.namespace.as_deref(), Some("kruise-system"));
        assert_eq!(r.revision, 3);
        let owner = &r.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("SidecarSet", "u1")
        );
        let ann = r.metadata.annotations.clone().expect("annotations");
        assert_eq!(
            ann[keys::SIDECARSET_HASH_ANNOTATION],
            wire::sidecarset_hash(&s.spec).expect("hash")
        );
        // Another image: other data, other name; another collision count: another name.
        let other = new_revision(&set("e:2"), "kruise-system", 4, 0).expect("revision");
        assert_ne!(other.metadata.name, r.metadata.name);
        let bumped = new_revision(&s, "kruise-system", 3, 1).expect("revision");
        assert_ne!(bumped.metadata.name, r.metadata.name);
        assert_eq!(bumped.data, r.data);
    }

    #[test]
    fn truncation_keeps_the_limit_and_every_active_revision() {
        let revs: Vec<ControllerRevision> = (1..=5)
            .map(|i| named(&format!("r{i}"), i, &format!("h{i}")))
            .collect();
        let active = BTreeSet::from(["r5".to_owned(), "r1".to_owned()]);
        assert_eq!(to_truncate(&revs, 2, &active), vec!["r2", "r3", "r4"]);
        assert_eq!(to_truncate(&revs, 10, &active), Vec::<String>::new());
        // A limit of 0 still keeps one.
        let only_latest = BTreeSet::from(["r5".to_owned()]);
        assert_eq!(
            to_truncate(&revs, 0, &only_latest),
            vec!["r1", "r2", "r3", "r4"]
        );
    }

    #[test]
    fn active_revisions_are_latest_pinned_and_those_pods_carry() {
        let mut s = set("e:1");
        s.spec.injection_strategy.revision =
            serde_json::from_value(json!({"revisionName": "r2"})).expect("revision");
        let revs: Vec<ControllerRevision> = (1..=4)
            .map(|i| named(&format!("r{i}"), i, &format!("h{i}")))
            .collect();
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "annotations": {
            keys::SIDECARSET_HASH_ANNOTATION:
                r#"{"mesh":{"updateTimestamp":"2026-01-01T00:00:00Z","hash":"h1","sidecarSetName":"mesh"}}"#
        }}}))
        .expect("pod");
        let active = active_revisions(&s, "r4", &revs, &[&pod]);
        let want: BTreeSet<String> = ["r1", "r2", "r4"].iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(active, want);
    }
}
