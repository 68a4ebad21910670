//! The shared in-place update engine: a pure core and a thin I/O shell.
//!
//! Imports flow one way, bottom to top:
//!
//! ```text
//! spec · batches · completion · conditions · patch   pure building blocks (no client, no clock)
//!                      ↑
//!                    hooks                           what a workload varies (InPlaceHooks)
//!                      ↑
//!                    plan                            pure decisions: the pod to write, the step
//!                      ↑
//!                    apply                           the only I/O: writes, conflict re-plans
//! ```
//!
//! [`spec`] diffs two revisions into an `UpdateSpec` or a [`NotInPlace`] reason; [`batches`]
//! splits containers by launch priority; [`completion`] decides whether the kubelet has
//! finished; [`conditions`] handles InPlaceUpdateReady and readiness; [`patch`] writes a batch
//! of the spec into the pod. [`hooks`] is the trait a workload implements (CloneSet today,
//! Advanced StatefulSet and Advanced DaemonSet next), with those blocks as defaults. [`plan`]
//! builds the pod to write for Update, grace periods and later batches. Only [`apply`] talks
//! to the API server.
//!
//! How a workload controller drives it (CloneSet shown; other workloads pass their own hooks):
//!
//! ```text
//! let hooks = CloneSetHooks;
//! let opts = UpdateOptions { grace_period_seconds, lifecycle_state: Some(Updating), ..Default::default() };
//! // every pod, every reconcile, before choosing update targets:
//! let r = control.refresh(&hooks, &pod, &opts, Timestamp::now()).await?;   // requeue_after, new_resource_version
//! let done = hooks.pod_update_completed(&pod).is_ok();                     // lifecycle Updating -> Normal
//! // choosing how to update one pod:
//! match inplace::can_update_in_place(&hooks, old_rev, &update_rev, &opts) { Ok(()) => .., Err(reason) => .. }
//! match control.update(&hooks, &pod, old_rev, &update_rev, &opts, Timestamp::now()).await? {
//!     UpdateOutcome::Updated { new_resource_version, requeue_after } => ..,
//!     UpdateOutcome::NotInPlace(reason) => .., // recreate, or an error Event under InPlaceOnly
//! }
//! ```

pub mod apply;
pub mod batches;
pub mod completion;
pub mod conditions;
pub mod hash;
pub mod hooks;
mod jsondiff;
pub mod patch;
pub mod plan;
pub mod qos;
pub mod quantity;
pub mod spec;

pub use apply::{ApplyError, InPlaceControl, InPlaceObserver, RefreshOutcome, UpdateOutcome};
pub use completion::NotCompleted;
pub use hooks::{CloneSetHooks, InPlaceHooks};
pub use patch::EngineError;
pub use plan::{GraceStep, PodWrite, RefreshStep, can_update_in_place};
pub use spec::{Features, NotInPlace, UpdateOptions};

#[cfg(test)]
mod tests;
