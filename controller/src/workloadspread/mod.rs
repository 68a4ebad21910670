//! The WorkloadSpread controller (upstream `pkg/controller/workloadspread`): recomputes each
//! subset's status from the Pods the Pod webhook placed (`replicas`, `missingReplicas`, and
//! the `creatingPods` / `deletingPods` reservations, expired after upstream's timeouts), and
//! sets `controller.kubernetes.io/pod-deletion-cost` on the Pods of ReplicaSets, Deployments
//! and CloneSets so that a scale-down removes Pods over a subset's cap first, then Pods of the
//! later subsets. Under `Adaptive` it closes a subset whose Pods cannot be scheduled and
//! deletes them so they are placed elsewhere ([`adaptive`]); Pods from before the
//! WorkloadSpread are adopted by their node's subset ([`existing`]); custom workload kinds come
//! from the `kruise-configuration` whitelist.
//!
//! Imports flow one way: `controller` (wiring on the shared [`runner`](crate::runner)) →
//! `reconcile` (workload → Pods → adoption → deletion costs → status → rescheduling) → `plan`,
//! `adaptive`, `existing` (pure) → `context`, `error`.

pub mod adaptive;
mod context;
pub mod controller;
mod error;
pub mod existing;
pub mod plan;
mod reconcile;

#[cfg(test)]
mod adaptive_tests;
#[cfg(test)]
mod plan_tests;
