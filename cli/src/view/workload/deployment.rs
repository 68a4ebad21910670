//! apps/v1 Deployment: `spec.paused`, no partition; revisions are ReplicaSets.

use super::{History, Kind, KindSpec, PodSource, Restart};
use crate::view::verdict::{Decision, Outcome, PodSummary};
use crate::view::{Layout, RolloutView, flag, get, int_or_percent, knobs, s};
use kruise_api::keys::k8s;
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::Deployment,
    wire_kind: "Deployment",
    type_name: "deployment",
    human: "Deployment",
    group: "apps",
    plural: "deployments",
    bare: &["deploy", "deployment", "deployments"],
    grouped: &[],
    namespaced: true,
    pods: PodSource::Selected,
    ordered: false,
    partition: false,
    pause: true,
    history: History::ReplicaSets,
    restart: Restart::TemplateAnnotation,
    on_delete_note: super::ON_DELETE_NOTE,
    containers_path: "/spec/template/spec/containers",
    read,
    failure: super::no_decision,
    settle,
    image_change,
    sort_pods: super::by_name,
    revision_label: None,
};

fn read(obj: &Value, v: &mut RolloutView) {
    v.read_replica_counters(obj);
    v.layout = Layout::Deployment;
    let strategy = get(obj, &["spec", "strategy"])
        .cloned()
        .unwrap_or(Value::Null);
    let k = knobs(&strategy, Layout::Deployment);
    let type_ = s(&strategy, &["type"]);
    v.pod_update_policy = if type_.is_empty() {
        "RollingUpdate".to_string()
    } else {
        type_
    };
    v.paused = get(obj, &["spec"]).is_some_and(|sp| flag(sp, "paused"));
    v.max_unavailable = int_or_percent(&k, "maxUnavailable");
    v.max_surge = int_or_percent(&k, "maxSurge");
    // A Deployment's revision is an annotation; the Pods' ReplicaSet hash is not comparable.
    let rev = s(
        obj,
        &[
            "metadata",
            "annotations",
            k8s::DEPLOYMENT_REVISION_ANNOTATION,
        ],
    );
    v.current_revision = rev.clone();
    v.update_revision = rev;
}

fn settle(v: &RolloutView, _: &PodSummary) -> Option<Decision> {
    (v.status_replicas > v.updated_replicas).then(|| Decision {
        outcome: Outcome::Progressing,
        message: format!(
            "waiting: {} old pods pending termination",
            v.status_replicas - v.updated_replicas
        ),
    })
}

fn image_change(_: &RolloutView) -> String {
    "pods will be RECREATED (Deployments always replace pods)".to_string()
}
