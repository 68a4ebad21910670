//! BroadcastJob (`apps.kruise.io`, `bcj`): one Pod run to completion on every eligible node.
//! Read as a rollout whose "updated and ready" Pods are the succeeded ones, so `rollout status`
//! waits for the job and `rollout watch` lists one row per node; the job's own Complete and
//! Failed conditions decide when it has ended.

use super::{History, Kind, KindSpec, PodSource, Restart};
use crate::view::verdict::{Decision, Outcome, PodSummary};
use crate::view::{Layout, RolloutView, flag, get, i, s};
use kruise_api::keys::{self, k8s};
use serde_json::Value;

pub static SPEC: KindSpec = KindSpec {
    kind: Kind::BroadcastJob,
    wire_kind: "BroadcastJob",
    type_name: "broadcastjob",
    human: "BroadcastJob",
    group: keys::APPS_GROUP,
    plural: "broadcastjobs",
    bare: &["bcj", "broadcastjob", "broadcastjobs"],
    grouped: &[],
    namespaced: true,
    pods: PodSource::Owned,
    ordered: false,
    partition: false,
    pause: true,
    history: History::Unsupported,
    restart: Restart::Unsupported,
    on_delete_note: "a BroadcastJob never replaces its Pods: only Pods created from now on use the new template",
    containers_path: "/spec/template/spec/containers",
    read,
    failure,
    settle,
    image_change,
    sort_pods: super::by_node,
    revision_label: None,
};

fn read(obj: &Value, v: &mut RolloutView) {
    let status = obj.get("status").cloned().unwrap_or(Value::Null);
    v.replicas = i(&status, &["desired"]);
    v.status_replicas = i(&status, &["active"]) + i(&status, &["succeeded"]);
    let succeeded = i(&status, &["succeeded"]);
    v.updated_replicas = succeeded;
    v.ready_replicas = succeeded;
    v.available_replicas = succeeded;
    v.updated_ready_replicas = Some(succeeded);
    // A job has no observedGeneration: its status is current once the controller wrote a phase.
    let phase = s(&status, &["phase"]);
    v.observed_generation = if phase.is_empty() {
        v.generation - 1
    } else {
        v.generation
    };
    v.layout = Layout::Deployment;
    v.pod_update_policy = phase.clone();
    // Held by the user, or by failurePolicy Pause after a failed Pod; a `paused` phase alone may
    // be stale right after a resume.
    let spec = get(obj, &["spec"]).unwrap_or(&Value::Null);
    v.paused = flag(spec, "paused")
        || (phase == "paused"
            && s(spec, &["failurePolicy", "type"]) == "Pause"
            && i(&status, &["failed"]) > 0);
    v.selector = Some(format!(
        "{}={}",
        keys::BROADCASTJOB_NAME_LABEL,
        s(obj, &["metadata", "name"])
    ));
}

/// The job's own verdict: its Failed or Complete condition.
fn failure(v: &RolloutView) -> Option<Decision> {
    let ended = |type_: &str| {
        v.condition(type_)
            .filter(|c| c.status == k8s::CONDITION_TRUE)
    };
    if let Some(c) = ended("Failed") {
        return Some(Decision {
            outcome: Outcome::Failed,
            message: format!("job failed: {}", c.message),
        });
    }
    ended("Complete").map(|c| Decision {
        outcome: Outcome::Complete,
        message: format!("job completed: {}", c.message),
    })
}

/// No eligible node yet (or none counted yet): still waiting, never "0 of 0 done".
fn settle(v: &RolloutView, _: &PodSummary) -> Option<Decision> {
    (v.replicas == 0).then(|| Decision {
        outcome: Outcome::Progressing,
        message: "waiting: no node runs the job's Pod yet".to_string(),
    })
}

fn image_change(_: &RolloutView) -> String {
    "running pods keep their image; pods created from now on (new nodes) use the new one"
        .to_string()
}

#[cfg(test)]
mod tests {
    use crate::status::decide;
    use crate::view::RolloutView;
    use crate::view::verdict::{Outcome, PodSummary};
    use serde_json::json;

    fn job(spec: serde_json::Value, status: serde_json::Value) -> RolloutView {
        RolloutView::from_json(&json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "BroadcastJob",
            "metadata": {"name": "warm", "namespace": "ns", "generation": 1},
            "spec": spec, "status": status,
        }))
    }

    fn outcome(v: &RolloutView) -> (Outcome, String) {
        let d = decide(v, &PodSummary::default());
        (d.outcome, d.message)
    }

    #[test]
    fn a_job_reads_as_a_rollout_of_succeeded_pods() {
        let v = job(
            json!({}),
            json!({"desired": 3, "active": 1, "succeeded": 2, "failed": 0, "phase": "running"}),
        );
        assert_eq!(v.kind, super::Kind::BroadcastJob);
        assert_eq!(
            (v.replicas, v.updated_replicas, v.updated_ready_replicas),
            (3, 2, Some(2))
        );
        assert_eq!(v.selector.as_deref(), Some("broadcastjob-name=warm"));
        assert_eq!(outcome(&v).0, Outcome::Progressing);
        assert_eq!(v.paused_patch(true), json!({"spec": {"paused": true}}));
        // Before the controller's first status: not "0 of 0 done".
        assert_eq!(
            outcome(&job(json!({}), json!(null))).0,
            Outcome::Progressing
        );
        let none = job(json!({}), json!({"desired": 0, "phase": "running"}));
        assert_eq!(outcome(&none).0, Outcome::Progressing);
        let paused = job(
            json!({"paused": true}),
            json!({"desired": 3, "phase": "paused"}),
        );
        assert_eq!(outcome(&paused).0, Outcome::Paused);
        let done = job(
            json!({}),
            json!({"desired": 3, "succeeded": 2, "failed": 1, "phase": "completed",
            "conditions": [{"type": "Complete", "status": "True", "message": "Job completed, 2 pods succeeded, 1 pods failed"}]}),
        );
        assert_eq!(
            outcome(&done),
            (
                Outcome::Complete,
                "job completed: Job completed, 2 pods succeeded, 1 pods failed".into()
            )
        );
        let failed = job(
            json!({}),
            json!({"desired": 3, "failed": 1, "phase": "failed",
            "conditions": [{"type": "Failed", "status": "True", "message": "boom"}]}),
        );
        assert_eq!(
            outcome(&failed),
            (Outcome::Failed, "job failed: boom".into())
        );
    }

    #[test]
    fn bcj_is_a_target() {
        let t: crate::target::Target = "bcj/warm".parse().expect("target");
        assert_eq!(t.kind, super::Kind::BroadcastJob);
    }
}
