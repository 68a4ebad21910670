//! What a rollout's state comes to: the outcome and message `decide` (module `status`) returns,
//! and what it needs from the Pods. The kinds' hooks answer in these types too, which is why they
//! live here, below both the kinds and the decision.

use super::PodView;
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
    /// For each Pod the rollout waits on, the one reason that holds it (`status::held`).
    pub held: Vec<Held>,
}

/// A Pod the rollout waits on and why, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Held {
    pub pod: String,
    pub reason: String,
}

impl PodSummary {
    pub fn from_pods<'a>(pods: impl IntoIterator<Item = &'a PodView>) -> Self {
        let mut in_place_updating: Vec<String> = pods
            .into_iter()
            .filter(|p| !p.terminating && p.in_place_in_progress())
            .map(|p| p.name.clone())
            .collect();
        in_place_updating.sort();
        PodSummary {
            in_place_updating,
            held: Vec::new(),
        }
    }
}
