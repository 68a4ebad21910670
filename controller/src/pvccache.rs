//! PersistentVolumeClaims, kept by one watch for the CloneSets that make them from
//! volumeClaimTemplates (upstream reads them from its informer cache). A LIST per reconcile was
//! an API round trip before every decision of such a CloneSet, with every claim of the
//! CloneSet in its answer: each Pod event of an in-place update waited on it before
//! InPlaceUpdateReady could be set.
//!
//! A reconcile may run before the watch shows a claim just created or deleted. Its writes stay
//! safe: creating a claim that exists answers AlreadyExists, which is taken as done; deleting
//! one that is gone answers NotFound, likewise; a claim not seen yet is neither handed over nor
//! deleted until it is.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::Client;
use tokio_util::sync::CancellationToken;

use crate::watchcache::{self, Watched};

/// The watched PersistentVolumeClaims; [`owned`] picks one workload's.
pub type PvcCache = Watched<PersistentVolumeClaim>;

/// Starts the watch on `namespace` (all namespaces when `None`); it stops when `shutdown` is
/// cancelled.
pub fn start(client: Client, namespace: Option<&str>, shutdown: CancellationToken) -> PvcCache {
    watchcache::start(client, namespace, "persistentvolumeclaim", shutdown)
}

/// The claims in `namespace` that `selector` selects and the controller `uid` owns, not being
/// deleted (what the LIST by selector used to return, filtered the same way).
pub fn owned(
    cache: &PvcCache,
    namespace: &str,
    selector: &LabelSelector,
    uid: &str,
) -> Vec<PersistentVolumeClaim> {
    owned_claims(&cache.state(), namespace, selector, uid)
}

/// See [`owned`].
fn owned_claims(
    all: &[Arc<PersistentVolumeClaim>],
    namespace: &str,
    sel: &LabelSelector,
    uid: &str,
) -> Vec<PersistentVolumeClaim> {
    watchcache::owned(all, namespace, sel, uid)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| p.as_ref().clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::collections::BTreeMap;

    fn claim(
        ns: &str,
        name: &str,
        owner: &str,
        controller: bool,
        app: &str,
    ) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: crate::watchcache::test_meta(ns, name, owner, controller, app),
            ..Default::default()
        }
    }

    #[test]
    fn picks_the_owned_selected_live_claims_of_the_namespace() {
        let sel = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "web".to_string())])),
            ..Default::default()
        };
        let mut deleting = claim("ns", "data-web-e", "u1", true, "web");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let all: Vec<Arc<PersistentVolumeClaim>> = [
            claim("ns", "data-web-a", "u1", true, "web"),
            // Another namespace, another owner, a non-controller owner, another selector,
            // one being deleted.
            claim("other", "data-web-b", "u1", true, "web"),
            claim("ns", "data-web-c", "u2", true, "web"),
            claim("ns", "data-web-d", "u1", false, "web"),
            claim("ns", "data-db-a", "u1", true, "db"),
            deleting,
            claim("ns", "data-web-f", "u1", true, "web"),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let mut names: Vec<String> = owned_claims(&all, "ns", &sel, "u1")
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        names.sort();
        assert_eq!(names, ["data-web-a", "data-web-f"]);
    }
}
