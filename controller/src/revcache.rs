//! The workloads' ControllerRevisions (CloneSet, Advanced StatefulSet, Advanced DaemonSet), kept
//! by one watch shared by their controllers (upstream reads them from its informer cache). A LIST per reconcile was one API round trip before every decision: the
//! first reconcile after a template change waited on it before creating the new revision and
//! patching Pods, and every Pod event's reconcile waited on it before setting
//! InPlaceUpdateReady.
//!
//! A reconcile may run before the watch shows a revision this controller has just created or
//! changed. Every write it then makes is still safe: creating an existing revision answers
//! AlreadyExists and the existing one is used (see `history::ensure_update_revision`), and
//! deleting a revision that is already gone answers NotFound.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kruise_api::selector;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::revision;
use crate::watchcache::{self, Watched};

/// The watched ControllerRevisions of every workload kind; [`RevisionCache::owned`] picks one
/// workload's.
#[derive(Clone)]
pub struct RevisionCache {
    watched: Watched<ControllerRevision>,
}

impl RevisionCache {
    /// Starts the watch on `namespace` (all namespaces when `None`); it stops when `shutdown` is
    /// cancelled.
    pub fn start(client: Client, namespace: Option<&str>, shutdown: CancellationToken) -> Self {
        Self {
            watched: watchcache::start(client, namespace, "controllerrevision", shutdown),
        }
    }

    /// Waits until the first list has been loaded: before that, a workload would look as if it
    /// had no revisions at all.
    pub async fn wait_synced(&self) {
        self.watched.wait_synced().await;
    }

    /// The revisions in `namespace` that `selector` selects and the controller `uid` owns,
    /// oldest first (what the LIST by selector used to return, filtered the same way).
    pub fn owned(
        &self,
        namespace: &str,
        selector: &LabelSelector,
        uid: &str,
    ) -> Vec<ControllerRevision> {
        owned_revisions(&self.watched.state(), namespace, selector, uid)
    }

    /// The name and resourceVersion of each revision [`RevisionCache::owned`] returns, sorted
    /// by name: while this list is the same, so are those revisions, and it copies none of them.
    pub fn owned_versions(
        &self,
        namespace: &str,
        selector: &LabelSelector,
        uid: &str,
    ) -> Vec<(String, String)> {
        let all = self.watched.state();
        let mut versions: Vec<(String, String)> = watchcache::owned(&all, namespace, selector, uid)
            .map(|r| {
                (
                    r.metadata.name.clone().unwrap_or_default(),
                    r.metadata.resource_version.clone().unwrap_or_default(),
                )
            })
            .collect();
        versions.sort_unstable();
        versions
    }

    /// The revisions in `namespace` that `selector` selects and no controller owns: what a
    /// workload adopts (a StatefulSet deleted with `--cascade=orphan` leaves its revisions so).
    pub fn orphans(&self, namespace: &str, selector: &LabelSelector) -> Vec<ControllerRevision> {
        orphan_revisions(&self.watched.state(), namespace, selector)
    }
}

/// See [`RevisionCache::orphans`].
fn orphan_revisions(
    all: &[Arc<ControllerRevision>],
    namespace: &str,
    sel: &LabelSelector,
) -> Vec<ControllerRevision> {
    let empty = Default::default();
    all.iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(namespace))
        .filter(|r| {
            !r.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true))
        })
        .filter(|r| selector::matches(sel, r.metadata.labels.as_ref().unwrap_or(&empty)))
        .map(|r| r.as_ref().clone())
        .collect()
}

/// See [`RevisionCache::owned`].
fn owned_revisions(
    all: &[Arc<ControllerRevision>],
    namespace: &str,
    sel: &LabelSelector,
    uid: &str,
) -> Vec<ControllerRevision> {
    let mut revs: Vec<ControllerRevision> = watchcache::owned(all, namespace, sel, uid)
        .map(|r| r.as_ref().clone())
        .collect();
    revision::sort_revisions(&mut revs);
    revs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn rev(
        ns: &str,
        name: &str,
        number: i64,
        owner: &str,
        controller: bool,
        app: &str,
    ) -> Arc<ControllerRevision> {
        Arc::new(ControllerRevision {
            metadata: crate::watchcache::test_meta(ns, name, owner, controller, app),
            revision: number,
            ..Default::default()
        })
    }

    #[test]
    fn picks_the_owned_selected_revisions_of_the_namespace_oldest_first() {
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            ..Default::default()
        };
        let all = vec![
            rev("ns", "web-b", 2, "u1", true, "web"),
            rev("ns", "web-a", 1, "u1", true, "web"),
            // Another namespace, another owner, a non-controller owner, another selector.
            rev("other", "web-c", 3, "u1", true, "web"),
            rev("ns", "db-a", 1, "u2", true, "web"),
            rev("ns", "web-d", 4, "u1", false, "web"),
            rev("ns", "web-e", 5, "u1", true, "db"),
        ];
        let names: Vec<String> = owned_revisions(&all, "ns", &sel, "u1")
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        assert_eq!(names, ["web-a", "web-b"]);
    }

    #[test]
    fn orphans_are_the_selected_revisions_without_a_controller() {
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            ..Default::default()
        };
        let mut bare = rev("ns", "web-f", 6, "u1", true, "web");
        Arc::make_mut(&mut bare).metadata.owner_references = None;
        let all = vec![
            rev("ns", "web-a", 1, "u1", true, "web"),
            // A non-controller owner does not keep a revision from being adopted.
            rev("ns", "web-d", 4, "u1", false, "web"),
            bare,
            rev("other", "web-g", 7, "u1", false, "web"),
            rev("ns", "db-h", 8, "u1", false, "db"),
        ];
        let names: Vec<String> = orphan_revisions(&all, "ns", &sel)
            .into_iter()
            .filter_map(|r| r.metadata.name)
            .collect();
        assert_eq!(names, ["web-d", "web-f"]);
    }
}
