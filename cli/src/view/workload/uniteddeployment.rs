//! UnitedDeployment (`apps.kruise.io`, `ud`): one child workload per subset. Its Pods belong to
//! the children, are selected by the UnitedDeployment's selector, carry the UnitedDeployment's
//! revision in `apps.kruise.io/controller-revision-hash` and their subset in
//! `apps.kruise.io/subset-name`; the live view lists them subset by subset. Partitions are per
//! subset (`updateStrategy.manualUpdate.partitions`), so there is no single partition to drive.

use super::{History, Kind, KindSpec, PodSource, Restart};
use crate::view::verdict::{Decision, Outcome, PodSummary};
use crate::view::{RolloutView, get, i, s};
use kruise_api::keys;
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::UnitedDeployment,
    wire_kind: "UnitedDeployment",
    type_name: "ud",
    human: "UnitedDeployment",
    group: keys::APPS_GROUP,
    plural: "uniteddeployments",
    bare: &["ud", "uniteddeployment", "uniteddeployments"],
    grouped: &[],
    namespaced: true,
    pods: PodSource::Selected,
    ordered: false,
    partition: false,
    pause: false,
    history: History::Unsupported,
    restart: Restart::Unsupported,
    on_delete_note: super::ON_DELETE_NOTE,
    // The common template; the others (advancedStatefulSetTemplate, statefulSetTemplate,
    // deploymentTemplate) hold their containers at the same depth under their own key.
    containers_path: "/spec/template/cloneSetTemplate/spec/template/spec/containers",
    read,
    failure: super::no_decision,
    settle,
    image_change,
    sort_pods: super::by_subset,
    revision_label: Some(keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL),
};

/// The child template the UnitedDeployment sets, as `(key, template)`.
fn child_template(obj: &Value) -> Option<(&str, &Value)> {
    let templates = get(obj, &["spec", "template"])?.as_object()?;
    templates
        .iter()
        .find(|(_, t)| t.is_object())
        .map(|(k, t)| (k.as_str(), t))
}

fn read(obj: &Value, v: &mut RolloutView) {
    v.read_replica_counters(obj);
    let status = obj.get("status").cloned().unwrap_or(Value::Null);
    v.updated_ready_replicas = Some(i(&status, &["updatedReadyReplicas"]));
    // v1beta1 (the version discovery prefers) keeps the update revision in `updatedRevision`,
    // v1alpha1 under `updateStatus`; neither has availableReplicas.
    v.update_revision = s(&status, &["updatedRevision"]);
    if v.update_revision.is_empty() {
        v.update_revision = s(&status, &["updateStatus", "updatedRevision"]);
    }
    v.available_replicas = v.ready_replicas;
    let Some((key, template)) = child_template(obj) else {
        return;
    };
    let strategy = get(template, &["spec", "updateStrategy"])
        .cloned()
        .unwrap_or(Value::Null);
    v.pod_update_policy = match key {
        // A v1beta1 CloneSet spec in both versions, as upstream's (one written for an earlier
        // Kruise-rs may still hold v1alpha1's flat one).
        "cloneSetTemplate" => {
            let nested = s(&strategy, &["rollingUpdate", "podUpdatePolicy"]);
            if nested.is_empty() {
                s(&strategy, &["type"])
            } else {
                nested
            }
        }
        "advancedStatefulSetTemplate" => s(&strategy, &["rollingUpdate", "podUpdatePolicy"]),
        _ => String::new(),
    };
    if v.pod_update_policy.is_empty() || v.pod_update_policy == "RollingUpdate" {
        v.pod_update_policy = "ReCreate".to_owned();
    }
}

/// Done once every subset's workload has the UnitedDeployment's replicas (the shared checks
/// count Pods on the update revision, ready).
fn settle(v: &RolloutView, _: &PodSummary) -> Option<Decision> {
    (v.status_replicas > v.replicas).then(|| Decision {
        outcome: Outcome::Progressing,
        message: format!(
            "waiting: {} extra pods to be deleted",
            v.status_replicas - v.replicas
        ),
    })
}

fn image_change(v: &RolloutView) -> String {
    let in_place = matches!(
        v.pod_update_policy.as_str(),
        "InPlaceIfPossible" | "InPlaceOnly"
    );
    super::in_place_or_recreate(v, in_place, "the subsets' podUpdatePolicy")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_counters_revision_and_the_childs_policy() {
        let obj = json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "UnitedDeployment",
            "metadata": {"name": "web", "namespace": "shop", "generation": 2},
            "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                "template": {"cloneSetTemplate": {"spec": {
                    "updateStrategy": {"type": "InPlaceIfPossible"}}}}},
            "status": {"observedGeneration": 2, "replicas": 4, "readyReplicas": 3,
                "updatedReplicas": 2, "updatedReadyReplicas": 2, "currentRevision": "web-a",
                "updateStatus": {"updatedRevision": "web-b"}}
        });
        let v = RolloutView::from_json(&obj);
        assert_eq!(v.kind, Kind::UnitedDeployment);
        assert_eq!(
            (v.replicas, v.ready_replicas, v.updated_replicas),
            (4, 3, 2)
        );
        assert_eq!(v.update_revision, "web-b");
        assert_eq!(v.current_revision, "web-a");
        assert_eq!(v.pod_update_policy, "InPlaceIfPossible");
        assert!(image_change(&v).contains("IN PLACE"));
    }

    #[test]
    fn reads_the_v1beta1_revision_and_nested_policy() {
        let obj = json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "UnitedDeployment",
            "metadata": {"name": "web", "namespace": "shop", "generation": 1},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"cloneSetTemplate": {"spec": {"updateStrategy":
                    {"rollingUpdate": {"podUpdatePolicy": "InPlaceOnly"}}}}}},
            "status": {"observedGeneration": 1, "replicas": 2, "currentRevision": "web-a",
                "updatedRevision": "web-b", "subsetStatuses": [{"name": "a", "replicas": 2}]}
        });
        let v = RolloutView::from_json(&obj);
        assert_eq!(v.update_revision, "web-b");
        assert_eq!(v.pod_update_policy, "InPlaceOnly");
    }

    #[test]
    fn pods_read_the_uniteddeployments_revision_and_sort_by_subset() {
        let pod = |name: &str, subset: &str| {
            let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {
                    "controller-revision-hash": "web-a-cs-123",
                    keys::KRUISE_CONTROLLER_REVISION_HASH_LABEL: "web-b",
                    keys::SUBSET_NAME_LABEL: subset}}
            }))
            .expect("pod");
            crate::view::PodView::from_pod(&p).for_kind(Kind::UnitedDeployment)
        };
        let mut pods = vec![pod("x-2", "b"), pod("x-1", "a"), pod("x-0", "b")];
        assert!(pods.iter().all(|p| p.is_updated("web-b")));
        super::super::by_subset(&mut pods);
        let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["x-1", "x-0", "x-2"]);
        let cs = crate::view::PodView::from_pod(
            &serde_json::from_value(json!({
                "metadata": {"name": "x", "labels": {"controller-revision-hash": "web-a-cs-123"}}
            }))
            .expect("pod"),
        )
        .for_kind(Kind::CloneSet);
        assert_eq!(
            cs.revision, "web-a-cs-123",
            "other kinds keep their own label"
        );
    }
}
