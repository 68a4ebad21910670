//! Deciding whether a rollout is done, and the `-o json` schema that reports it.
//!
//! `decide` is pure: the same view and pod summary always give the same answer, which is what
//! the table tests (`tests.rs`) pin down.

use crate::error::exit;
use crate::view::RolloutView;
use crate::view::verdict::{Decision, Outcome, PodSummary};
use kruise_api::keys;
use serde::Serialize;

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
    let spec = v.kind.spec();
    if let Some(verdict) = (spec.failure)(v) {
        return verdict;
    }
    // Both Deployments and CloneSets (progressDeadlineSeconds) report a stuck rollout this way.
    if let Some(c) = v.condition(keys::CLONESET_CONDITION_PROGRESSING)
        && c.reason == keys::CLONESET_REASON_PROGRESS_DEADLINE_EXCEEDED
    {
        return d(
            Outcome::Failed,
            format!(
                "{} {:?} exceeded its progress deadline",
                v.kind.type_name(),
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
            format!(" ({})", spec.on_delete_note)
        } else {
            String::new()
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
    if let Some(wait) = (spec.settle)(v, pods) {
        return wait;
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
                v.kind.type_name(),
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
    /// While the rollout is not done: the Pods it waits on, each with the reason that holds it
    /// (at most [`HELD_LIMIT`]); absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<crate::view::verdict::Held>,
}

/// How many held Pods `rollout status` names.
pub const HELD_LIMIT: usize = 10;

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
            held: if decision.outcome == Outcome::Complete {
                Vec::new()
            } else {
                pods.held.clone()
            },
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

pub mod held;

#[cfg(test)]
mod tests;
