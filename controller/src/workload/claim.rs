//! Which pods a workload owns: pods it controls that still match its selector; orphans that match
//! are adopted, controlled pods that no longer match are released (upstream's ref manager).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{Api, Client, Resource};
use serde_json::{Value, json};

use kruise_api::selector;

use super::podpatch::{PodPart, patch_pod};
use super::podutil;
use crate::podcache::controller_uid;

/// What to do with the pods of a namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claims {
    pub owned: Vec<usize>,
    pub adopt: Vec<usize>,
    pub release: Vec<usize>,
}

/// Sort `pods` (all pods of the owner's namespace) into owned, to adopt and to release: a pod
/// is the owner's when it matches `selector` and `is_member` (upstream's claim filter; a
/// StatefulSet claims only `NAME-ORDINAL`). Nothing is adopted while the owner is being
/// deleted, and pods being deleted are never adopted.
pub fn plan(
    owner_uid: &str,
    selector: &LabelSelector,
    owner_deleting: bool,
    pods: &[&Pod],
    is_member: &dyn Fn(&Pod) -> bool,
) -> Claims {
    let empty = Default::default();
    let mut c = Claims::default();
    for (i, pod) in pods.iter().enumerate() {
        let matches =
            selector::matches(selector, podutil::labels(pod).unwrap_or(&empty)) && is_member(pod);
        match controller_uid(pod) {
            Some(uid) if uid == owner_uid => {
                if matches {
                    c.owned.push(i);
                } else {
                    c.release.push(i);
                }
            }
            Some(_) => {}
            None => {
                if matches && !owner_deleting && pod.metadata.deletion_timestamp.is_none() {
                    c.adopt.push(i);
                }
            }
        }
    }
    c
}

/// Strategic merge patch that adds `owner` as the controller of a pod (guarded by the pod's UID
/// so a recreated pod of the same name is not adopted by mistake).
pub fn adopt_patch(
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    pod_uid: &str,
) -> Value {
    json!({ "metadata": { "ownerReferences": [owner], "uid": pod_uid } })
}

/// The pods `owner` owns among `all` (the pods of its namespace), after releasing those that no
/// longer match and adopting matching orphans (upstream `ClaimPods`). A pod gone or taken by
/// another owner meanwhile is simply not claimed.
pub async fn claim_pods<K>(
    client: &Client,
    owner: &K,
    selector: &LabelSelector,
    all: &[Arc<Pod>],
    is_member: &(dyn Fn(&Pod) -> bool + Sync),
) -> Result<Vec<Arc<Pod>>, kube::Error>
where
    K: Resource<DynamicType = ()> + Sync,
{
    let meta = owner.meta();
    let (Some(ns), Some(uid)) = (meta.namespace.as_deref(), meta.uid.as_deref()) else {
        return Ok(Vec::new());
    };
    let refs: Vec<&Pod> = all.iter().map(|p| p.as_ref()).collect();
    let plan = plan(
        uid,
        selector,
        meta.deletion_timestamp.is_some(),
        &refs,
        is_member,
    );
    let mut owned: Vec<Arc<Pod>> = plan.owned.iter().map(|&i| all[i].clone()).collect();
    if plan.adopt.is_empty() && plan.release.is_empty() {
        return Ok(owned);
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    for &i in &plan.release {
        let pod = refs[i];
        let patch = release_patch(uid, pod.metadata.uid.as_deref().unwrap_or_default());
        match patch_pod(&api, pod, PodPart::Object, patch).await {
            Ok(_) => tracing::info!(
                pod = podutil::name(pod),
                "released pod that no longer matches the selector"
            ),
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_invalid() => {}
            Err(e) => return Err(e),
        }
    }
    if let Some(reference) = owner.controller_owner_ref(&()) {
        for &i in &plan.adopt {
            let pod = refs[i];
            let patch = adopt_patch(&reference, pod.metadata.uid.as_deref().unwrap_or_default());
            match patch_pod(&api, pod, PodPart::Object, patch).await {
                Ok(p) => {
                    tracing::info!(pod = podutil::name(pod), "adopted orphan pod");
                    owned.push(Arc::new(p));
                }
                // Gone, or already taken by someone else (the UID guard failed): not ours.
                Err(kube::Error::Api(s))
                    if s.is_not_found() || s.is_invalid() || s.is_conflict() => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(owned)
}

/// Strategic merge patch that removes the owner reference with `owner_uid`.
pub fn release_patch(owner_uid: &str, pod_uid: &str) -> Value {
    json!({ "metadata": { "ownerReferences": [{ "$patch": "delete", "uid": owner_uid }], "uid": pod_uid } })
}

#[cfg(test)]
mod tests {
    use super::super::podutil::testpod::pod;
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    fn owned_by(mut p: Pod, uid: &str) -> Pod {
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps.kruise.io/v1beta1".into(),
            kind: "CloneSet".into(),
            name: "cs".into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        p
    }

    #[test]
    fn owned_adopt_release() {
        let sel = LabelSelector {
            match_labels: Some([("app".to_string(), "x".to_string())].into()),
            ..Default::default()
        };
        let mut deleting = pod("d").label("app", "x").build();
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let pods = [
            owned_by(pod("a").label("app", "x").build(), "me"),
            owned_by(pod("b").label("app", "y").build(), "me"),
            pod("c").label("app", "x").build(),
            owned_by(pod("e").label("app", "x").build(), "other"),
            deleting,
            pod("f").label("app", "y").build(),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let all = |_: &Pod| true;
        let c = plan("me", &sel, false, &refs, &all);
        assert_eq!(c.owned, vec![0]);
        assert_eq!(c.release, vec![1]);
        assert_eq!(c.adopt, vec![2]);
        assert!(plan("me", &sel, true, &refs, &all).adopt.is_empty());
        // A claim filter (a StatefulSet's NAME-ORDINAL): an owned pod outside it is released,
        // an orphan outside it is left alone.
        let only_a = |p: &Pod| podutil::name(p) == "a";
        let c = plan("me", &sel, false, &refs, &only_a);
        assert_eq!((c.owned, c.release, c.adopt), (vec![0], vec![1], vec![]));
        let only_c = |p: &Pod| podutil::name(p) == "c";
        let c = plan("me", &sel, false, &refs, &only_c);
        assert_eq!((c.owned, c.release, c.adopt), (vec![], vec![0, 1], vec![2]));
    }

    #[test]
    fn patches() {
        let p = release_patch("me", "pod-uid");
        assert_eq!(p["metadata"]["ownerReferences"][0]["$patch"], "delete");
        assert_eq!(p["metadata"]["uid"], "pod-uid");
        let o = OwnerReference {
            uid: "me".into(),
            controller: Some(true),
            ..Default::default()
        };
        assert_eq!(
            adopt_patch(&o, "u")["metadata"]["ownerReferences"][0]["uid"],
            "me"
        );
    }
}
