//! apps/v1 StatefulSet: status (as kubectl's `statefulSetStatusViewer`), history and undo.

use super::{History, Kind, KindSpec, PodSource, Restart};
use crate::math::IntOrPercent;
use crate::view::verdict::{Decision, Outcome, PodSummary};
use crate::view::{Layout, RolloutView, get, int_or_percent, knobs, s};
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::StatefulSet,
    wire_kind: "StatefulSet",
    type_name: "statefulset",
    human: "StatefulSet",
    group: "apps",
    plural: "statefulsets",
    bare: &["sts", "statefulset", "statefulsets"],
    grouped: &[],
    namespaced: true,
    pods: PodSource::Owned,
    ordered: true,
    partition: true,
    pause: false,
    history: History::ControllerRevisions,
    restart: Restart::TemplateAnnotation,
    on_delete_note: super::ON_DELETE_NOTE,
    containers_path: "/spec/template/spec/containers",
    read,
    failure: super::no_decision,
    settle,
    image_change: super::recreates,
    sort_pods: super::by_ordinal,
    revision_label: None,
};

/// Reads the knobs apps/v1 and Advanced StatefulSets share: `updateStrategy.type` and
/// `rollingUpdate.{partition,maxUnavailable}` (maxUnavailable defaults to 1 in both).
pub(crate) fn read_strategy(obj: &Value, v: &mut RolloutView) -> Value {
    v.read_replica_counters(obj);
    v.layout = Layout::Nested;
    let strategy = get(obj, &["spec", "updateStrategy"])
        .cloned()
        .unwrap_or(Value::Null);
    let type_ = s(&strategy, &["type"]);
    v.on_delete = type_ == "OnDelete";
    let k = knobs(&strategy, Layout::Nested);
    v.partition = int_or_percent(&k, "partition");
    v.max_unavailable = int_or_percent(&k, "maxUnavailable").or(Some(IntOrPercent::Int(1)));
    v.pod_update_policy = if type_.is_empty() {
        "RollingUpdate".to_string()
    } else {
        type_
    };
    k
}

fn read(obj: &Value, v: &mut RolloutView) {
    read_strategy(obj, v);
}

/// Upstream kubectl `statefulSetStatusViewer`: every Pod ready, and without a partition the
/// current revision caught up with the update revision.
pub(crate) fn settle(v: &RolloutView, _: &PodSummary) -> Option<Decision> {
    if v.ready_replicas < v.replicas {
        return Some(Decision {
            outcome: Outcome::Progressing,
            message: format!("waiting: {} of {} pods ready", v.ready_replicas, v.replicas),
        });
    }
    if v.partition.is_none() && v.current_revision != v.update_revision {
        return Some(Decision {
            outcome: Outcome::Progressing,
            message: format!(
                "waiting: {} pods at revision {}, current revision is still {}",
                v.updated_replicas, v.update_revision, v.current_revision
            ),
        });
    }
    if v.status_replicas > v.replicas {
        return Some(Decision {
            outcome: Outcome::Progressing,
            message: format!(
                "waiting: {} extra pods to be deleted",
                v.status_replicas - v.replicas
            ),
        });
    }
    None
}
