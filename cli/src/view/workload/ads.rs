//! Advanced DaemonSet (`apps.kruise.io` DaemonSet, `ads`, `daemon`): one Pod per node, a
//! partition of nodes, in place when rollingUpdateType is InPlaceIfPossible.

use super::{History, Kind, KindSpec, PodOrder, PodSource, Restart};
use crate::view::verdict::{Decision, Outcome, PodSummary};
use crate::view::{RolloutView, flag, int_or_percent, s};
use kruise_api::keys;
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::AdvancedDaemonSet,
    wire_kind: "DaemonSet",
    type_name: "ads",
    human: "Advanced DaemonSet",
    group: keys::APPS_GROUP,
    plural: "daemonsets",
    bare: &["ads", "daemon"],
    grouped: &["ds", "daemonset", "daemonsets"],
    namespaced: true,
    pods: PodSource::Owned,
    ordered: false,
    partition: true,
    pause: true,
    history: History::ControllerRevisions,
    restart: Restart::InPlace(PodOrder::ByNode),
    on_delete_note: super::ON_DELETE_NOTE,
    containers_path: "/spec/template/spec/containers",
    read,
    failure: super::no_decision,
    settle,
    image_change,
    sort_pods: super::by_node,
    revision_label: None,
};

fn read(obj: &Value, v: &mut RolloutView) {
    let k = super::daemonset::read_counters(obj, v);
    // Upstream's field is `rollingUpdateType`; Standard when unset.
    let ty = s(&k, &["rollingUpdateType"]);
    v.pod_update_policy = if ty.is_empty() {
        "Standard".to_string()
    } else {
        ty
    };
    v.partition = int_or_percent(&k, "partition");
    v.paused = flag(&k, "paused");
    // v1alpha1 carries it as an annotation.
    let annotation = [
        "metadata",
        "annotations",
        keys::DAEMONSET_PROGRESSIVE_CREATE_POD_ANNOTATION,
    ];
    v.partitioned_scaling = crate::view::get(obj, &["spec", "scaleStrategy"])
        .is_some_and(|st| flag(st, "partitionedScaling"))
        || s(obj, &annotation) == "true";
    // v1beta1 reports `updateRevision`, v1alpha1 `daemonSetHash` (the hash Pods carry as
    // controller-revision-hash; the ControllerRevision is `NAME-HASH`).
    let rev = s(obj, &["status", "updateRevision"]);
    v.update_revision = if rev.is_empty() {
        s(obj, &["status", "daemonSetHash"])
    } else {
        rev
    };
}

fn image_change(v: &RolloutView) -> String {
    let in_place = v.pod_update_policy == "InPlaceIfPossible";
    let how = super::in_place_or_recreate(v, in_place, "rollingUpdateType");
    format!("{how}; node by node")
}

/// With partitioned scaling the partition also keeps nodes without their Pod: the rollout is as
/// far as it goes, and says how many nodes the partition holds.
fn settle(v: &RolloutView, _: &PodSummary) -> Option<Decision> {
    if !v.partitioned_scaling || v.status_replicas >= v.replicas {
        return None;
    }
    let partition = v
        .partition
        .as_ref()
        .map(|p| p.to_string())
        .unwrap_or_default();
    Some(Decision {
        outcome: Outcome::Complete,
        message: format!(
            "partitioned scaling: {} of {} nodes have a pod ({} held by partition {partition})",
            v.status_replicas,
            v.replicas,
            v.replicas - v.status_replicas
        ),
    })
}
