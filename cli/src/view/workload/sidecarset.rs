//! SidecarSet (`apps.kruise.io`, cluster-scoped): sidecar containers injected into the Pods its
//! selector matches, upgraded in place when only their images change.

use super::{History, Kind, KindSpec, PodSource, Restart};
use crate::view::{Layout, RolloutView, flag, get, i, int_or_percent, s};
use kruise_api::keys;
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::SidecarSet,
    wire_kind: "SidecarSet",
    type_name: "sidecarset",
    human: "SidecarSet",
    group: keys::APPS_GROUP,
    plural: "sidecarsets",
    bare: &["sidecarset", "sidecarsets"],
    grouped: &[],
    namespaced: false,
    pods: PodSource::SelectedClusterWide,
    ordered: false,
    partition: true,
    pause: true,
    history: History::Unsupported,
    restart: Restart::Unsupported,
    on_delete_note: "updateStrategy NotUpdate: running pods keep their sidecar; only new pods get the new image",
    containers_path: "/spec/containers",
    read,
    failure: super::no_decision,
    settle: super::settled,
    image_change,
    sort_pods: super::by_name,
    revision_label: None,
};

fn read(obj: &Value, v: &mut RolloutView) {
    let status = obj.get("status").cloned().unwrap_or(Value::Null);
    // Desired = the Pods it matches; done = every one of them (past the partition) upgraded.
    v.replicas = i(&status, &["matchedPods"]);
    v.status_replicas = v.replicas;
    v.ready_replicas = i(&status, &["readyPods"]);
    v.available_replicas = v.ready_replicas;
    v.updated_replicas = i(&status, &["updatedPods"]);
    v.updated_ready_replicas = Some(i(&status, &["updatedReadyPods"]));
    v.sidecar_hash = current_hash(obj);
    // latestRevision names a ControllerRevision; without it the hash is the revision.
    let latest = s(&status, &["latestRevision"]);
    v.update_revision = if latest.is_empty() {
        v.sidecar_hash.clone()
    } else {
        latest
    };
    v.layout = Layout::Flat;
    let strategy = get(obj, &["spec", "updateStrategy"])
        .cloned()
        .unwrap_or(Value::Null);
    let type_ = s(&strategy, &["type"]);
    v.on_delete = type_ == "NotUpdate";
    v.pod_update_policy = if type_.is_empty() {
        "RollingUpdate".to_string()
    } else {
        type_
    };
    v.partition = int_or_percent(&strategy, "partition");
    v.max_unavailable =
        int_or_percent(&strategy, "maxUnavailable").or(Some(crate::math::IntOrPercent::Int(1)));
    v.paused = flag(&strategy, "paused");
}

/// The hash upgraded Pods record for the set: the webhook's annotation on the SidecarSet, else
/// computed from its containers as the webhook would (upstream `SidecarSetHash`).
fn current_hash(obj: &Value) -> String {
    let recorded = s(
        obj,
        &["metadata", "annotations", keys::SIDECARSET_HASH_ANNOTATION],
    );
    if !recorded.is_empty() {
        return recorded;
    }
    serde_json::from_value::<kruise_api::apps::v1beta1::SidecarSet>(obj.clone())
        .ok()
        .and_then(|set| kruise_api::sidecarset::sidecarset_hash(&set.spec).ok())
        .unwrap_or_default()
}

fn image_change(_: &RolloutView) -> String {
    "matched pods will have their sidecar updated IN PLACE (image-only change: only the sidecar restarts, pods keep name, IP and node)".to_string()
}
