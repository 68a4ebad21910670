//! SidecarSet admission: injection into new Pods ([`inject`], called from the Pod mutating
//! handler; [`revision`] decides which get a pinned revision), SidecarSet defaulting and
//! validation ([`validate`]), and v1alpha1 ⇄ v1beta1 conversion ([`conversion`]).
//!
//! The Pod and SidecarSet handlers read the cluster (every SidecarSet, the Pod's namespace)
//! through [`SidecarSetLookup`]; everything they decide is pure and tested without one.

pub mod cache;
pub mod conversion;
pub mod inject;
pub mod revision;
pub mod validate;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps::v1beta1::{SidecarSet, SidecarSetInjectRevision};
use kube::core::admission::Operation;
use serde_json::Value;

use crate::review::{Outcome, Request, diff};

/// Where the handlers read SidecarSets and namespaces. The defaults describe a cluster
/// without SidecarSets (test doubles of the other lookups use them).
pub trait SidecarSetLookup: Sync {
    /// Every SidecarSet.
    fn sidecar_sets(&self) -> impl Future<Output = Result<Vec<SidecarSet>, String>> + Send {
        std::future::ready(Ok(Vec::new()))
    }
    /// The ControllerRevision `injectionStrategy.revision` names for `set` (upstream
    /// `getControllerRevision`): by name, or the newest with the custom version; `None` when
    /// there is none (injection then uses the current spec, as upstream).
    fn injection_revision(
        &self,
        _set: &SidecarSet,
        _rev: &SidecarSetInjectRevision,
    ) -> impl Future<Output = Result<Option<ControllerRevision>, String>> + Send {
        std::future::ready(Ok(None))
    }
    /// A SidecarSet create or update is being admitted (a cache of them is stale for a while).
    fn sidecar_set_changing(&self) {}
    /// The labels of a namespace (empty when it does not exist).
    fn namespace_labels(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, String>, String>> + Send {
        std::future::ready(Ok(BTreeMap::new()))
    }
}

/// SidecarSet defaulting: records the SidecarSet's hashes in its annotations.
pub fn mutate(req: &Request) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let Some(raw) = req.object.as_ref().filter(|o| o.is_object()) else {
        return Outcome::bad_request("SidecarSet request carries no object");
    };
    let set = match validate::decode(raw) {
        Ok(s) => s,
        Err(e) => return Outcome::bad_request(e),
    };
    let hashes = match validate::hash_annotations(&set.spec) {
        Ok(h) => h,
        Err(e) => return Outcome::bad_request(e),
    };
    let mut after = raw.clone();
    let Some(meta) = after
        .as_object_mut()
        .map(|o| {
            o.entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()))
        })
        .and_then(Value::as_object_mut)
    else {
        return Outcome::bad_request("metadata: must be an object");
    };
    let ann = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    if ann.is_null() {
        *ann = Value::Object(Default::default());
    }
    let Some(ann) = ann.as_object_mut() else {
        return Outcome::bad_request("metadata.annotations: must be an object");
    };
    for (k, v) in hashes {
        ann.insert(k, Value::String(v));
    }
    let patch = diff(raw, &after);
    if patch.0.is_empty() {
        Outcome::Allow
    } else {
        Outcome::Patch(patch)
    }
}

/// SidecarSet validation: the rules of [`validate::violations`], then the conflict with the
/// other SidecarSets.
pub async fn validate_set<C: SidecarSetLookup>(req: Request, cluster: &C) -> Outcome {
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Outcome::Allow;
    }
    let Some(raw) = req.object.as_ref() else {
        return Outcome::bad_request("SidecarSet request carries no object");
    };
    let set = match validate::decode(raw) {
        Ok(s) => s,
        Err(e) => return Outcome::bad_request(e),
    };
    let errs = validate::violations(&set.spec);
    if !errs.is_empty() {
        return Outcome::invalid(errs.join("; "));
    }
    let name = set.metadata.name.as_deref().unwrap_or(&req.name);
    // A pin to a revision that does not exist would silently inject the latest spec.
    if let Some(rev) = set
        .spec
        .injection_strategy
        .revision
        .as_ref()
        .filter(|r| revision::is_pinned(r))
    {
        match cluster.injection_revision(&set, rev).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Outcome::invalid(revision::not_found(
                    name,
                    rev,
                    &revision::revisions_namespace(),
                ));
            }
            Err(e) => return Outcome::forbidden(e),
        }
    }
    cluster.sidecar_set_changing();
    let others = match cluster.sidecar_sets().await {
        Ok(s) => s,
        Err(e) => return Outcome::forbidden(e),
    };
    match validate::conflict(name, &set.spec, &others) {
        Some(msg) => Outcome::invalid(msg),
        None => Outcome::Allow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use serde_json::json;

    /// A cluster with these SidecarSets and one stored revision, `mesh-1`, whose proxy image
    /// is `e:1`.
    struct Cluster(Vec<SidecarSet>);

    impl SidecarSetLookup for Cluster {
        async fn sidecar_sets(&self) -> Result<Vec<SidecarSet>, String> {
            Ok(self.0.clone())
        }

        async fn injection_revision(
            &self,
            _set: &SidecarSet,
            rev: &SidecarSetInjectRevision,
        ) -> Result<Option<ControllerRevision>, String> {
            let found = rev.revision_name.as_deref() == Some("mesh-1")
                || rev.custom_version.as_deref() == Some("blue");
            Ok(found.then(|| ControllerRevision {
                metadata: kube::api::ObjectMeta {
                    name: Some("mesh-1".into()),
                    ..Default::default()
                },
                data: Some(RawExtension(json!({"spec": {
                    "containers": [{"name": "proxy", "image": "e:1"}]}}))),
                revision: 1,
            }))
        }
    }

    fn set(strategy: Value, revision: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
            "metadata": {"name": "mesh"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "containers": [{"name": "proxy", "image": "e:2"}],
                "updateStrategy": strategy,
                "injectionStrategy": {"revision": revision}}})
    }

    fn request(resource: &str, namespace: Option<&str>, object: Value) -> Request {
        Request {
            uid: "u".into(),
            operation: Operation::Create,
            group: String::new(),
            version: "v1".into(),
            kind: String::new(),
            resource: resource.into(),
            sub_resource: None,
            namespace: namespace.map(str::to_owned),
            name: String::new(),
            object: Some(object),
            old_object: None,
            dry_run: false,
        }
    }

    fn message(o: &Outcome) -> String {
        match o {
            Outcome::Deny { message, .. } => message.clone(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_pin_to_a_missing_revision_is_refused_naming_the_field() {
        let cluster = Cluster(Vec::new());
        let missing = set(json!({}), json!({"revisionName": "mesh-9"}));
        let out = validate_set(request("sidecarsets", None, missing), &cluster).await;
        let m = message(&out);
        assert!(
            m.starts_with("spec.injectionStrategy.revision.revisionName: Not found: \"mesh-9\""),
            "{m}"
        );
        let version = set(json!({}), json!({"customVersion": "green"}));
        let m = message(&validate_set(request("sidecarsets", None, version), &cluster).await);
        assert!(m.contains("customVersion: Not found: \"green\""), "{m}");
        for ok in [
            json!({"revisionName": "mesh-1"}),
            json!({"customVersion": "blue", "policy": "Partial"}),
        ] {
            let out =
                validate_set(request("sidecarsets", None, set(json!({}), ok)), &cluster).await;
            assert!(matches!(out, Outcome::Allow), "{out:?}");
        }
    }

    /// The proxy image the Pod webhook injects into a Pod with these labels.
    async fn injected_image(set: &Value, labels: Value) -> String {
        let decoded = validate::decode(set).expect("set");
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "team", "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "a:1"}]}});
        let out = crate::pod::mutate_pod(
            request("pods", Some("team"), pod.clone()),
            &Cluster(vec![decoded]),
            &kruise_api::features::FeatureGates::default(),
        )
        .await;
        let Outcome::Patch(patch) = out else {
            panic!("expected an injection, got {out:?}");
        };
        let mut after = pod;
        json_patch::patch(&mut after, &patch).expect("patch applies");
        after["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == "proxy")
            .and_then(|c| c["image"].as_str())
            .expect("proxy injected")
            .to_owned()
    }

    #[tokio::test]
    async fn partial_injects_the_pinned_revision_only_outside_the_update_selector() {
        let partial = set(
            json!({"selector": {"matchLabels": {"canary": "true"}}}),
            json!({"revisionName": "mesh-1", "policy": "Partial"}),
        );
        assert_eq!(injected_image(&partial, json!({"app": "web"})).await, "e:1");
        assert_eq!(
            injected_image(&partial, json!({"app": "web", "canary": "true"})).await,
            "e:2"
        );
        // Always: the pinned revision for every new Pod.
        let always = set(
            json!({"selector": {"matchLabels": {"canary": "true"}}}),
            json!({"revisionName": "mesh-1"}),
        );
        assert_eq!(
            injected_image(&always, json!({"app": "web", "canary": "true"})).await,
            "e:1"
        );
    }
}
