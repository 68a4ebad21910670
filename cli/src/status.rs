//! Deciding whether a rollout is done, and the `-o json` schema that reports it.
//!
//! `decide` is pure: the same view and pod summary always give the same answer, which is what
//! the table tests below pin down.

use crate::error::exit;
use crate::target::Kind;
use crate::view::{PodView, RolloutView};
use kruise_api::keys::{self, k8s};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Outcome {
    /// Every expected pod is updated and ready and nothing is mid-update.
    Complete,
    /// Still moving.
    Progressing,
    /// Paused before reaching the expected number of updated pods.
    Paused,
    /// The controller reported a failure.
    Failed,
    /// `--timeout` elapsed (set by the watcher, never by `decide`).
    TimedOut,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub outcome: Outcome,
    pub message: String,
}

/// What the decision needs from the pods: the ones still in the middle of an in-place update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSummary {
    pub in_place_updating: Vec<String>,
}

impl PodSummary {
    pub fn from_pods<'a>(pods: impl IntoIterator<Item = &'a PodView>) -> Self {
        let mut in_place_updating: Vec<String> = pods
            .into_iter()
            .filter(|p| !p.terminating && p.in_place_in_progress())
            .map(|p| p.name.clone())
            .collect();
        in_place_updating.sort();
        PodSummary { in_place_updating }
    }
}

fn d(outcome: Outcome, message: impl Into<String>) -> Decision {
    Decision {
        outcome,
        message: message.into(),
    }
}

pub fn decide(v: &RolloutView, pods: &PodSummary) -> Decision {
    if v.observed_generation < v.generation {
        return d(
            Outcome::Progressing,
            format!(
                "waiting for the controller to observe generation {} (observed {})",
                v.generation, v.observed_generation
            ),
        );
    }
    if v.kind == Kind::CloneSet
        && let Some(c) = v.condition(keys::CLONESET_CONDITION_FAILED_UPDATE)
        && c.status == k8s::CONDITION_TRUE
    {
        return d(
            Outcome::Failed,
            format!("update failed: {} {}", c.reason, c.message)
                .trim_end()
                .to_string(),
        );
    }
    // Both Deployments and CloneSets (progressDeadlineSeconds) report a stuck rollout this way.
    if let Some(c) = v.condition(keys::CLONESET_CONDITION_PROGRESSING)
        && c.reason == keys::CLONESET_REASON_PROGRESS_DEADLINE_EXCEEDED
    {
        return d(
            Outcome::Failed,
            format!(
                "{} {:?} exceeded its progress deadline",
                v.kind.as_str().to_lowercase(),
                v.name
            ),
        );
    }
    let expected = v.expected_updated();
    if v.updated_replicas < expected {
        if v.paused {
            return d(
                Outcome::Paused,
                format!(
                    "rollout paused with {} of {} expected pods updated",
                    v.updated_replicas, expected
                ),
            );
        }
        let hint = if v.on_delete {
            " (OnDelete: pods update only when deleted)"
        } else {
            ""
        };
        return d(
            Outcome::Progressing,
            format!(
                "waiting: {} of {} expected pods updated{hint}",
                v.updated_replicas, expected
            ),
        );
    }
    let ready = match v.updated_ready_replicas {
        Some(r) => r,
        // Deployments do not report updated-ready; available pods of the new ReplicaSet count.
        None => v.available_replicas,
    };
    if v.kind == Kind::Deployment && v.status_replicas > v.updated_replicas {
        return d(
            Outcome::Progressing,
            format!(
                "waiting: {} old pods pending termination",
                v.status_replicas - v.updated_replicas
            ),
        );
    }
    if ready < expected {
        return d(
            Outcome::Progressing,
            format!("waiting: {ready} of {expected} updated pods ready"),
        );
    }
    if !pods.in_place_updating.is_empty() {
        let n = pods.in_place_updating.len();
        let first = &pods.in_place_updating[0];
        let more = if n > 1 {
            format!(" and {} more", n - 1)
        } else {
            String::new()
        };
        return d(
            Outcome::Progressing,
            format!("waiting: in-place update still running on {first}{more}"),
        );
    }
    if v.kind == Kind::CloneSet && v.status_replicas > v.replicas {
        return d(
            Outcome::Progressing,
            format!(
                "waiting: {} extra pods to be deleted",
                v.status_replicas - v.replicas
            ),
        );
    }
    if expected < v.replicas {
        d(
            Outcome::Complete,
            format!(
                "partitioned rollout complete: {expected} of {} pods updated (partition {} keeps {})",
                v.replicas,
                v.partition
                    .as_ref()
                    .map(|p| p.to_string())
                    .unwrap_or_default(),
                v.replicas - expected
            ),
        )
    } else {
        d(
            Outcome::Complete,
            format!(
                "{} {:?} successfully rolled out",
                v.kind.as_str().to_lowercase(),
                v.name
            ),
        )
    }
}

/// One line of `rollout status -o json`. Field names are a stable contract (schemaVersion 1):
/// new fields may be added, none are renamed or removed.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub schema_version: u32,
    pub kind: String,
    pub api_version: String,
    pub namespace: String,
    pub name: String,
    pub outcome: Outcome,
    /// True on the last line: the command exits with `exit_code` right after.
    pub done: bool,
    pub exit_code: Option<i32>,
    pub message: String,
    pub generation: i64,
    pub observed_generation: i64,
    pub replicas: i64,
    pub partition: Option<String>,
    pub paused: bool,
    pub expected_updated_replicas: i64,
    pub updated_replicas: i64,
    pub updated_ready_replicas: Option<i64>,
    pub ready_replicas: i64,
    pub available_replicas: i64,
    pub current_revision: String,
    pub update_revision: String,
    pub pods_updating_in_place: Vec<String>,
}

impl StatusReport {
    pub fn new(v: &RolloutView, pods: &PodSummary, decision: &Decision) -> Self {
        StatusReport {
            schema_version: 1,
            kind: v.kind.as_str().to_string(),
            api_version: v.api_version.clone(),
            namespace: v.namespace.clone(),
            name: v.name.clone(),
            outcome: decision.outcome,
            done: false,
            exit_code: None,
            message: decision.message.clone(),
            generation: v.generation,
            observed_generation: v.observed_generation,
            replicas: v.replicas,
            partition: v.partition.as_ref().map(|p| p.to_string()),
            paused: v.paused,
            expected_updated_replicas: v.expected_updated(),
            updated_replicas: v.updated_replicas,
            updated_ready_replicas: v.updated_ready_replicas,
            ready_replicas: v.ready_replicas,
            available_replicas: v.available_replicas,
            current_revision: v.current_revision.clone(),
            update_revision: v.update_revision.clone(),
            pods_updating_in_place: pods.in_place_updating.clone(),
        }
    }
}

/// The exit code for a final outcome.
pub fn exit_code(outcome: Outcome, success_on_pause: bool, watching: bool) -> i32 {
    match outcome {
        Outcome::Complete => exit::OK,
        Outcome::Paused if success_on_pause => exit::OK,
        Outcome::Paused => exit::PAUSED,
        Outcome::Failed => exit::FAILED,
        Outcome::TimedOut => exit::TIMEOUT,
        Outcome::Progressing if watching => exit::TIMEOUT,
        Outcome::Progressing => exit::PROGRESSING,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cs(
        spec_extra: serde_json::Value,
        status: serde_json::Value,
        generation: i64,
    ) -> RolloutView {
        let mut rolling = json!({"podUpdatePolicy": "InPlaceIfPossible"});
        if let (Some(r), Some(e)) = (rolling.as_object_mut(), spec_extra.as_object()) {
            for (k, v) in e {
                r.insert(k.clone(), v.clone());
            }
        }
        RolloutView::from_json(&json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "CloneSet",
            "metadata": {"name": "web", "namespace": "default", "generation": generation},
            "spec": {"replicas": 10, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling}},
            "status": status,
        }))
    }

    fn st(observed: i64, updated: i64, updated_ready: i64) -> serde_json::Value {
        json!({"observedGeneration": observed, "replicas": 10, "readyReplicas": 10, "availableReplicas": 10,
               "updatedReplicas": updated, "updatedReadyReplicas": updated_ready,
               "currentRevision": "web-1", "updateRevision": "web-2"})
    }

    #[test]
    fn decision_table() {
        let none = PodSummary::default();
        let busy = PodSummary {
            in_place_updating: vec!["web-abcde".into(), "web-fghij".into()],
        };
        let failed = {
            let mut s = st(2, 4, 4);
            s["conditions"] = json!([{"type": "FailedUpdate", "status": "True", "reason": "InPlaceOnly", "message": "cannot update in place"}]);
            s
        };
        let cases: Vec<(&str, RolloutView, &PodSummary, Outcome, &str)> = vec![
            (
                "stale observedGeneration",
                cs(json!({}), st(1, 10, 10), 2),
                &none,
                Outcome::Progressing,
                "observe generation 2",
            ),
            (
                "done",
                cs(json!({}), st(2, 10, 10), 2),
                &none,
                Outcome::Complete,
                "successfully rolled out",
            ),
            (
                "updated but not ready",
                cs(json!({}), st(2, 10, 8), 2),
                &none,
                Outcome::Progressing,
                "8 of 10 updated pods ready",
            ),
            (
                "not all updated",
                cs(json!({}), st(2, 6, 6), 2),
                &none,
                Outcome::Progressing,
                "6 of 10 expected",
            ),
            (
                "paused midway",
                cs(json!({"paused": true}), st(2, 6, 6), 2),
                &none,
                Outcome::Paused,
                "paused with 6 of 10",
            ),
            (
                "paused but already done",
                cs(json!({"paused": true}), st(2, 10, 10), 2),
                &none,
                Outcome::Complete,
                "successfully",
            ),
            (
                "partition int reached",
                cs(json!({"partition": 3}), st(2, 7, 7), 2),
                &none,
                Outcome::Complete,
                "partition 3 keeps 3",
            ),
            (
                "partition percent reached",
                cs(json!({"partition": "30%"}), st(2, 7, 7), 2),
                &none,
                Outcome::Complete,
                "partition 30% keeps 3",
            ),
            (
                "partition not ready",
                cs(json!({"partition": "30%"}), st(2, 7, 5), 2),
                &none,
                Outcome::Progressing,
                "5 of 7",
            ),
            (
                "partition 99% still moves one",
                cs(json!({"partition": "99%"}), st(2, 0, 0), 2),
                &none,
                Outcome::Progressing,
                "0 of 1",
            ),
            (
                "in-place pods still busy",
                cs(json!({}), st(2, 10, 10), 2),
                &busy,
                Outcome::Progressing,
                "web-abcde and 1 more",
            ),
            (
                "failed update",
                cs(json!({}), failed, 2),
                &none,
                Outcome::Failed,
                "cannot update in place",
            ),
        ];
        for (name, view, pods, outcome, needle) in cases {
            let got = decide(&view, pods);
            assert_eq!(got.outcome, outcome, "{name}: {got:?}");
            assert!(
                got.message.contains(needle),
                "{name}: {:?} lacks {needle:?}",
                got.message
            );
        }
    }

    #[test]
    fn deployment_decisions() {
        let dep = |status: serde_json::Value| {
            RolloutView::from_json(&json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "api", "namespace": "default", "generation": 4},
                "spec": {"replicas": 3}, "status": status}))
        };
        let none = PodSummary::default();
        let ok = dep(
            json!({"observedGeneration": 4, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}),
        );
        assert_eq!(decide(&ok, &none).outcome, Outcome::Complete);
        let old = dep(
            json!({"observedGeneration": 4, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
        );
        assert!(
            decide(&old, &none)
                .message
                .contains("1 old pods pending termination")
        );
        let dead = dep(
            json!({"observedGeneration": 4, "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
        );
        assert_eq!(decide(&dead, &none).outcome, Outcome::Failed);
    }

    #[test]
    fn exit_codes() {
        assert_eq!(exit_code(Outcome::Complete, false, true), 0);
        assert_eq!(exit_code(Outcome::Paused, false, true), exit::PAUSED);
        assert_eq!(exit_code(Outcome::Paused, true, true), 0);
        assert_eq!(exit_code(Outcome::Failed, true, true), exit::FAILED);
        assert_eq!(exit_code(Outcome::TimedOut, false, true), exit::TIMEOUT);
        assert_eq!(
            exit_code(Outcome::Progressing, false, false),
            exit::PROGRESSING
        );
    }

    #[test]
    fn json_schema_is_stable() {
        let v = cs(json!({"partition": "30%"}), st(2, 7, 7), 2);
        let pods = PodSummary::default();
        let mut r = StatusReport::new(&v, &pods, &decide(&v, &pods));
        r.done = true;
        r.exit_code = Some(0);
        let got = serde_json::to_value(&r).unwrap();
        let want = json!({
            "schemaVersion": 1, "kind": "CloneSet", "apiVersion": "apps.kruise.io/v1beta1",
            "namespace": "default", "name": "web", "outcome": "Complete", "done": true, "exitCode": 0,
            "message": "partitioned rollout complete: 7 of 10 pods updated (partition 30% keeps 3)",
            "generation": 2, "observedGeneration": 2, "replicas": 10, "partition": "30%", "paused": false,
            "expectedUpdatedReplicas": 7, "updatedReplicas": 7, "updatedReadyReplicas": 7,
            "readyReplicas": 10, "availableReplicas": 10, "currentRevision": "web-1", "updateRevision": "web-2",
            "podsUpdatingInPlace": []
        });
        assert_eq!(got, want);
    }
}
