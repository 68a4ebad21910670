//! apps/v1 DaemonSet: status (as kubectl's `daemonSetStatusViewer`), history and undo.

use super::{History, Kind, KindSpec, PodSource, Restart};
use crate::math::IntOrPercent;
use crate::view::{Layout, RolloutView, get, i, int_or_percent, knobs, s};
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::DaemonSet,
    wire_kind: "DaemonSet",
    type_name: "daemonset",
    human: "DaemonSet",
    group: "apps",
    plural: "daemonsets",
    bare: &["ds", "daemonset", "daemonsets"],
    grouped: &[],
    namespaced: true,
    pods: PodSource::Owned,
    ordered: false,
    partition: false,
    pause: false,
    history: History::ControllerRevisions,
    restart: Restart::TemplateAnnotation,
    on_delete_note: super::ON_DELETE_NOTE,
    containers_path: "/spec/template/spec/containers",
    read,
    failure: super::no_decision,
    settle: super::settled,
    image_change: super::recreates,
    sort_pods: super::by_node,
    revision_label: None,
};

/// The counters both DaemonSets report: desired Pods are the nodes that should run one.
pub(crate) fn read_counters(obj: &Value, v: &mut RolloutView) -> Value {
    let status = obj.get("status").cloned().unwrap_or(Value::Null);
    v.replicas = i(&status, &["desiredNumberScheduled"]);
    v.status_replicas = i(&status, &["currentNumberScheduled"]);
    v.ready_replicas = i(&status, &["numberReady"]);
    v.available_replicas = i(&status, &["numberAvailable"]);
    v.updated_replicas = i(&status, &["updatedNumberScheduled"]);
    v.layout = Layout::Nested;
    let strategy = get(obj, &["spec", "updateStrategy"])
        .cloned()
        .unwrap_or(Value::Null);
    let type_ = s(&strategy, &["type"]);
    v.on_delete = type_ == "OnDelete";
    v.pod_update_policy = if type_.is_empty() {
        "RollingUpdate".to_string()
    } else {
        type_
    };
    let k = knobs(&strategy, Layout::Nested);
    // Both default maxUnavailable to 1 and maxSurge to 0.
    v.max_unavailable = int_or_percent(&k, "maxUnavailable").or(Some(IntOrPercent::Int(1)));
    v.max_surge = int_or_percent(&k, "maxSurge");
    k
}

fn read(obj: &Value, v: &mut RolloutView) {
    read_counters(obj, v);
}
