//! The WorkloadSpread controller (upstream `pkg/controller/workloadspread`): recomputes each
//! subset's status from the Pods the Pod webhook placed (`replicas`, `missingReplicas`, and
//! the `creatingPods` / `deletingPods` reservations, expired after upstream's timeouts), and
//! sets `controller.kubernetes.io/pod-deletion-cost` on the Pods of ReplicaSets, Deployments
//! and CloneSets so that a scale-down removes Pods over a subset's cap first, then Pods of the
//! later subsets.
//!
//! Imports flow one way: `controller` (wiring on the shared [`runner`](crate::runner)) →
//! `reconcile` (workload → Pods → deletion costs → status) → `plan` (pure) → `context`,
//! `error`.

mod context;
pub mod controller;
mod error;
pub mod plan;
mod reconcile;

pub use context::Context;
pub use controller::run;

#[cfg(test)]
mod plan_tests;
