//! Revision I/O (upstream `sync/api.go` revision half and `history`): list the CloneSet's
//! ControllerRevisions, pick or create the update revision, and read a revision's Pod template.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kruise_api::apps::v1beta1::CloneSet;
use kruise_api::keys::CLONESET_VOLUME_CLAIM_TEMPLATE_HASH_ANNOTATION as VCT_HASH;
use kruise_api::vct_hash::volume_claim_templates_hash;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::context::Context;
use super::error::Error;
use super::spec::template_labels;
use crate::history::{self, Origin};
use crate::revision;

/// The revisions a reconcile works with (see [`active_revisions`]).
pub(super) struct Active {
    /// The CloneSet's revisions, oldest first, the update revision among them.
    pub revisions: Vec<ControllerRevision>,
    pub current: ControllerRevision,
    pub update: ControllerRevision,
    /// The collision count to record in status.
    pub collision: i32,
}

/// What an [`Active`] was worked out from; equal inputs give an equal result. The template,
/// its labels and the volumeClaimTemplates are the spec, which `metadata.generation` stands
/// for; the revisions are named with their resourceVersions, as the cache shows them.
struct Inputs {
    generation: i64,
    annotations: Option<BTreeMap<String, String>>,
    collision_count: Option<i32>,
    current_revision: Option<String>,
    cached: Vec<(String, String)>,
}

impl Inputs {
    /// `cs` and the cache's `cached` revisions as they are now; `None` without a generation
    /// (only the API server sets it), which is then never taken as unchanged.
    fn of(cs: &CloneSet, cached: Vec<(String, String)>) -> Option<Self> {
        Some(Self {
            generation: cs.metadata.generation?,
            annotations: cs.metadata.annotations.clone(),
            collision_count: cs.status.as_ref().and_then(|s| s.collision_count),
            current_revision: cs.status.as_ref().map(|s| s.current_revision.clone()),
            cached,
        })
    }

    /// Whether `cs` and `cached` are what these inputs were taken from (compared in place, as
    /// this runs on every reconcile).
    fn unchanged(&self, cs: &CloneSet, cached: &[(String, String)]) -> bool {
        let status = cs.status.as_ref();
        cs.metadata.generation == Some(self.generation)
            && status.and_then(|s| s.collision_count) == self.collision_count
            && status.map(|s| s.current_revision.as_str()) == self.current_revision.as_deref()
            && self.cached == cached
            && cs.metadata.annotations == self.annotations
    }
}

/// The last [`Active`] of each CloneSet (by uid) that was read from the cache alone, reused
/// while its [`Inputs`] stay equal. Working it out copied every revision out of the cache and
/// serialized and hashed the template on each reconcile, and a rollout reconciles on every Pod
/// event: about a twentieth of the manager's CPU in a 10-Pod rollout.
#[derive(Default)]
pub struct ActiveMemo(Mutex<HashMap<String, (Inputs, Arc<Active>)>>);

impl ActiveMemo {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Inputs, Arc<Active>)>> {
        // Nothing is left half-written under the lock: a panic elsewhere leaves it usable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self, uid: &str, cs: &CloneSet, cached: &[(String, String)]) -> Option<Arc<Active>> {
        self.lock()
            .get(uid)
            .filter(|(i, _)| i.unchanged(cs, cached))
            .map(|(_, a)| a.clone())
    }

    fn put(&self, uid: &str, inputs: Inputs, active: Arc<Active>) {
        self.lock().insert(uid.to_owned(), (inputs, active));
    }

    /// Drops the entry of a deleted CloneSet.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Keeps only the entries of the CloneSets `exists` says are there (by uid).
    pub fn retain(&self, exists: impl Fn(&str) -> bool) {
        self.lock().retain(|uid, _| exists(uid));
    }
}

/// The current and update revisions among the CloneSet's, creating or bumping the update
/// revision as needed. A result that needed no write is kept (see [`ActiveMemo`]); one that
/// created or bumped a revision is worked out again until the cache shows that write.
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

#[cfg(test)]
mod tests {
    use super::*;
    use kruise_api::apps::v1beta1::CloneSetStatus;

    fn cloneset() -> CloneSet {
        let mut cs = crate::cloneset::spec::tests::cs();
        cs.metadata.generation = Some(3);
        cs.metadata.annotations = Some(BTreeMap::from([("a".to_owned(), "1".to_owned())]));
        cs.status = Some(CloneSetStatus {
            collision_count: Some(0),
            current_revision: "cs-1".to_owned(),
            ..Default::default()
        });
        cs
    }

    /// A change to a CloneSet or to the cache's list of its revisions.
    type Change = fn(&mut CloneSet, &mut Vec<(String, String)>);

    fn cached() -> Vec<(String, String)> {
        vec![("cs-1".to_owned(), "10".to_owned())]
    }

    fn active() -> Arc<Active> {
        Arc::new(Active {
            revisions: Vec::new(),
            current: ControllerRevision::default(),
            update: ControllerRevision::default(),
            collision: 0,
        })
    }

    #[test]
    fn a_kept_result_is_reused_only_while_everything_it_read_is_unchanged() {
        let memo = ActiveMemo::default();
        let cs = cloneset();
        let kept = active();
        memo.put(
            "u",
            Inputs::of(&cs, cached()).expect("inputs"),
            kept.clone(),
        );
        let hit = memo.get("u", &cs, &cached()).expect("unchanged");
        assert!(Arc::ptr_eq(&hit, &kept));
        assert!(memo.get("other", &cs, &cached()).is_none());

        let changes: [(&str, Change); 6] = [
            ("spec (generation)", |cs, _| {
                cs.metadata.generation = Some(4)
            }),
            ("annotations", |cs, _| {
                cs.metadata.annotations = Some(BTreeMap::from([("a".to_owned(), "2".to_owned())]));
            }),
            ("collision count", |cs, _| {
                cs.status.as_mut().expect("status").collision_count = Some(1);
            }),
            ("current revision", |cs, _| {
                cs.status.as_mut().expect("status").current_revision = "cs-2".to_owned();
            }),
            ("a revision changed", |_, c| c[0].1 = "11".to_owned()),
            ("a revision added", |_, c| {
                c.push(("cs-2".to_owned(), "12".to_owned()))
            }),
        ];
        for (what, change) in changes {
            let (mut cs, mut c) = (cloneset(), cached());
            change(&mut cs, &mut c);
            assert!(memo.get("u", &cs, &c).is_none(), "{what}");
        }

        memo.forget("u");
        assert!(memo.get("u", &cs, &cached()).is_none(), "forgotten");
    }

    #[test]
    fn a_cloneset_without_a_generation_is_never_taken_as_unchanged() {
        let mut cs = cloneset();
        cs.metadata.generation = None;
        assert!(Inputs::of(&cs, cached()).is_none());
    }
}
