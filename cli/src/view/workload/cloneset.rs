//! CloneSet (`apps.kruise.io`): v1alpha1 keeps its knobs flat in `updateStrategy`, v1beta1 under
//! `updateStrategy.rollingUpdate`.

use super::{History, Kind, KindSpec, PodOrder, PodSource, Restart};
use crate::view::verdict::{Decision, Outcome, PodSummary};
use crate::view::{Layout, RolloutView, flag, get, i, int_or_percent, knobs, s};
use kruise_api::keys::{self, k8s};
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::CloneSet,
    wire_kind: "CloneSet",
    type_name: "cloneset",
    human: "CloneSet",
    group: keys::APPS_GROUP,
    plural: "clonesets",
    bare: &["clone", "clones", "cloneset", "clonesets"],
    grouped: &[],
    namespaced: true,
    pods: PodSource::Owned,
    ordered: false,
    partition: true,
    pause: true,
    history: History::ControllerRevisions,
    restart: Restart::InPlace(PodOrder::UnreadyFirst),
    on_delete_note: super::ON_DELETE_NOTE,
    containers_path: "/spec/template/spec/containers",
    read,
    failure,
    settle,
    image_change,
    sort_pods: super::by_name,
    revision_label: None,
};

fn read(obj: &Value, v: &mut RolloutView) {
    v.read_replica_counters(obj);
    v.updated_ready_replicas = Some(i(obj, &["status", "updatedReadyReplicas"]));
    let strategy = get(obj, &["spec", "updateStrategy"])
        .cloned()
        .unwrap_or(Value::Null);
    // The served version decides the shape; fall back on the data for unknown versions.
    v.layout = if v.api_version.ends_with("/v1alpha1") {
        Layout::Flat
    } else if v.api_version.ends_with("/v1beta1") || strategy.get("rollingUpdate").is_some() {
        Layout::Nested
    } else {
        Layout::Flat
    };
    let k = knobs(&strategy, v.layout);
    let type_ = s(&strategy, &["type"]);
    // v1alpha1 names the policy in `type`, v1beta1 in `rollingUpdate.podUpdatePolicy`.
    let policy = match v.layout {
        Layout::Flat => type_.clone(),
        _ => s(&k, &["podUpdatePolicy"]),
    };
    v.pod_update_policy = if policy.is_empty() {
        "ReCreate".to_string()
    } else {
        policy
    };
    v.on_delete = type_ == "OnDelete";
    v.paused = flag(&k, "paused");
    v.partition = int_or_percent(&k, "partition");
    v.max_unavailable = int_or_percent(&k, "maxUnavailable");
    v.max_surge = int_or_percent(&k, "maxSurge");
    v.grace_period_seconds = i(&k, &["inPlaceUpdateStrategy", "gracePeriodSeconds"]);
}

fn failure(v: &RolloutView) -> Option<Decision> {
    let c = v.condition(keys::CLONESET_CONDITION_FAILED_UPDATE)?;
    (c.status == k8s::CONDITION_TRUE).then(|| Decision {
        outcome: Outcome::Failed,
        message: format!("update failed: {} {}", c.reason, c.message)
            .trim_end()
            .to_string(),
    })
}

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
    super::in_place_or_recreate(v, in_place, "podUpdatePolicy")
}
