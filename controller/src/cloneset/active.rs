//! The memo of each CloneSet's current and update revisions (see [`ActiveMemo`]): what
//! `revisions::active_revisions` worked out, kept with what it was worked out from.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps::v1beta1::CloneSet;

/// The revisions a reconcile works with.
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
pub(super) struct Inputs {
    generation: i64,
    annotations: Option<BTreeMap<String, String>>,
    collision_count: Option<i32>,
    current_revision: Option<String>,
    cached: Vec<(String, String)>,
}

impl Inputs {
    /// `cs` and the cache's `cached` revisions as they are now; `None` without a generation
    /// (only the API server sets it), which is then never taken as unchanged.
    pub(super) fn of(cs: &CloneSet, cached: Vec<(String, String)>) -> Option<Self> {
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

    pub(super) fn get(
        &self,
        uid: &str,
        cs: &CloneSet,
        cached: &[(String, String)],
    ) -> Option<Arc<Active>> {
        self.lock()
            .get(uid)
            .filter(|(i, _)| i.unchanged(cs, cached))
            .map(|(_, a)| a.clone())
    }

    pub(super) fn put(&self, uid: &str, inputs: Inputs, active: Arc<Active>) {
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
