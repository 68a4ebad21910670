//! Advanced StatefulSet (`apps.kruise.io` StatefulSet, `asts`): ordered Pods, a partition of
//! ordinals, in-place updates by podUpdatePolicy.

use super::{History, Kind, KindSpec, PodOrder, PodSource, Restart};
use crate::view::verdict::{Decision, PodSummary};
use crate::view::{RolloutView, flag, i, s};
use kruise_api::keys;
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::AdvancedStatefulSet,
    wire_kind: "StatefulSet",
    type_name: "asts",
    human: "Advanced StatefulSet",
    group: keys::APPS_GROUP,
    plural: "statefulsets",
    bare: &["asts"],
    grouped: &["sts", "statefulset", "statefulsets"],
    namespaced: true,
    pods: PodSource::Owned,
    ordered: true,
    partition: true,
    pause: true,
    history: History::ControllerRevisions,
    restart: Restart::InPlace(PodOrder::OrdinalDescending),
    on_delete_note: super::ON_DELETE_NOTE,
    containers_path: "/spec/template/spec/containers",
    read,
    failure: super::no_decision,
    settle,
    image_change,
    sort_pods: super::by_ordinal,
    revision_label: None,
};

fn read(obj: &Value, v: &mut RolloutView) {
    let k = super::statefulset::read_strategy(obj, v);
    v.updated_ready_replicas = Some(i(obj, &["status", "updatedReadyReplicas"]));
    let policy = s(&k, &["podUpdatePolicy"]);
    v.pod_update_policy = if policy.is_empty() {
        "ReCreate".to_string()
    } else {
        policy
    };
    v.paused = flag(&k, "paused");
    v.grace_period_seconds = i(&k, &["inPlaceUpdateStrategy", "gracePeriodSeconds"]);
    v.volume_claims = volume_claims(obj);
}

/// `status.volumeClaims`, in the order the controller wrote them.
fn volume_claims(obj: &Value) -> Vec<VolumeClaims> {
    crate::view::get(obj, &["status", "volumeClaims"])
        .and_then(Value::as_array)
        .map(|claims| {
            claims
                .iter()
                .map(|c| VolumeClaims {
                    name: s(c, &["volumeClaimName"]),
                    compatible: i(c, &["compatibleReplicas"]),
                    compatible_ready: i(c, &["compatibleReadyReplicas"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Done once the ordinals above the partition run the update revision and are ready (the
/// shared checks) and no Pod is left over from a scale-down. Ordinals below the partition may
/// be anything: that is what the partition keeps.
fn settle(v: &RolloutView, _: &PodSummary) -> Option<Decision> {
    (v.status_replicas > v.replicas).then(|| Decision {
        outcome: crate::view::verdict::Outcome::Progressing,
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
    let how = super::in_place_or_recreate(v, in_place, "podUpdatePolicy");
    format!("{how}; highest ordinal first")
}

/// One entry of an Advanced StatefulSet's `status.volumeClaims`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaims {
    /// The claim template's name.
    pub name: String,
    /// Pods whose claim requests at least the template's size.
    pub compatible: i64,
    /// Of those, the Pods whose claim's capacity reached it.
    pub compatible_ready: i64,
}
