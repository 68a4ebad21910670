//! Daemon Pods: a new Pod of a revision bound to its node by node affinity (upstream
//! `NewPod` with `ReplaceDaemonSetPodNodeNameNodeAffinity`), the node a Pod belongs to, and the
//! in-place hooks Advanced DaemonSet needs.

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kruise_api::apps::v1beta1::DaemonSet;
use kruise_api::keys;
use kube::{Resource, ResourceExt};

use super::nodes as daemon_nodes;
use crate::inplace::InPlaceHooks;
use crate::workload::nodes;

/// The in-place hooks of Advanced DaemonSet: Pods carry the revision's hash (its
/// `controller-revision-hash` label) rather than the revision name, and are compared by it
/// (upstream `getInPlaceUpdateOptions` and `EqualToRevisionHash("", …)`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AdsHooks;

impl InPlaceHooks for AdsHooks {
    fn revision_name(&self, revision: &k8s_openapi::api::apps::v1::ControllerRevision) -> String {
        revision_hash(revision)
    }

    fn write_revision(&self, pod: &mut Pod, revision: &str) {
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(
                keys::CONTROLLER_REVISION_HASH_LABEL.to_owned(),
                revision.to_owned(),
            );
    }

    fn equals_revision(&self, pod: &Pod, revision: &str) -> bool {
        pod_hash(pod) == Some(revision)
    }
}

/// The hash a revision's Pods carry: its `controller-revision-hash` label (upstream ADS writes
/// it on revisions), else the `controller.kubernetes.io/hash` the shared history writes.
pub fn revision_hash(rev: &k8s_openapi::api::apps::v1::ControllerRevision) -> String {
    let labels = rev.metadata.labels.as_ref();
    labels
        .and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH_LABEL))
        .or_else(|| labels.and_then(|l| l.get(keys::k8s::CONTROLLER_REVISION_HASH_KEY)))
        .cloned()
        .unwrap_or_default()
}

/// The revision hash a Pod carries.
pub fn pod_hash(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(keys::CONTROLLER_REVISION_HASH_LABEL)
        .map(String::as_str)
}

/// A new Pod of `ds` for `node` at revision `hash`, named `name`: the template's metadata and
/// spec, the revision label, the node-affinity binding, the daemon tolerations, and the
/// InPlaceUpdateReady readiness gate (upstream only updates gated Pods in place).
pub fn new_pod(ds: &DaemonSet, tpl: &PodTemplateSpec, hash: &str, node: &str, name: &str) -> Pod {
    let mut tpl = tpl.clone();
    nodes::bind_to_node(tpl.spec.get_or_insert_default(), node);
    let meta = tpl.metadata.clone().unwrap_or_default();
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.namespace = ds.namespace();
    pod.metadata.labels = meta.labels;
    pod.metadata.annotations = meta.annotations;
    pod.metadata.finalizers = meta.finalizers;
    pod.metadata.owner_references = ds.controller_owner_ref(&()).map(|o| vec![o]);
    let mut spec = tpl.spec.unwrap_or_default();
    spec.tolerations = Some(daemon_nodes::with_daemon_tolerations(&spec));
    pod.spec = Some(spec);
    AdsHooks.write_revision(&mut pod, hash);
    kruise_api::pod::add_readiness_gate(&mut pod, keys::INPLACE_UPDATE_READY);
    pod
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::nodes::{pod_name, target_node};
    use serde_json::json;

    fn ds() -> DaemonSet {
        serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
            "metadata": {"name": "agent", "namespace": "ns", "uid": "u1"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                         "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                             "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "Exists"}]}]}}}}}}
        }))
        .expect("ds")
    }

    #[test]
    fn new_pod_is_bound_by_affinity_not_node_name() {
        let d = ds();
        let pod = new_pod(&d, &d.spec.template, "h1", "node-7", "agent-abcde");
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name, None, "the scheduler binds the pod");
        assert_eq!(target_node(&pod), Some("node-7"));
        let v = serde_json::to_value(spec).expect("json");
        assert_eq!(
            v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-7"]}]}])
        );
        assert_eq!(pod_hash(&pod), Some("h1"));
        assert!(AdsHooks.equals_revision(&pod, "h1"));
        assert!(!AdsHooks.equals_revision(&pod, "agent-h1"));
        assert!(kruise_api::pod::has_readiness_gate(
            &pod,
            keys::INPLACE_UPDATE_READY
        ));
        let owner = &pod.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("DaemonSet", Some(true))
        );
        assert!(spec.tolerations.as_ref().expect("tolerations").len() >= 6);
    }

    #[test]
    fn bound_pod_reports_its_node_name() {
        let d = ds();
        let mut pod = new_pod(&d, &d.spec.template, "h1", "node-7", "agent-abcde");
        pod.spec.as_mut().expect("spec").node_name = Some("node-7".into());
        assert_eq!(target_node(&pod), Some("node-7"));
        assert_eq!(target_node(&Pod::default()), None);
    }

    #[test]
    fn revision_hash_reads_either_label() {
        let rev = |k: &str| k8s_openapi::api::apps::v1::ControllerRevision {
            metadata: kube::api::ObjectMeta {
                labels: Some([(k.to_owned(), "abc".to_owned())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            revision_hash(&rev(keys::CONTROLLER_REVISION_HASH_LABEL)),
            "abc"
        );
        assert_eq!(
            revision_hash(&rev(keys::k8s::CONTROLLER_REVISION_HASH_KEY)),
            "abc"
        );
        assert_eq!(revision_hash(&rev("other")), "");
    }

    #[test]
    fn pod_names_are_valid_and_distinct() {
        let a = pod_name(&"x".repeat(80));
        assert_eq!(a.len(), 63);
        assert_ne!(pod_name("agent"), pod_name("agent"));
    }
}
