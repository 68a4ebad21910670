//! The PodUnavailableBudget controller (upstream `pkg/controller/podunavailablebudget`): keeps
//! each budget's status from its Pods and marks them with `kruise.io/related-pub`.
//!
//! Imports flow one way: `controller` (wiring on the shared [`runner`](crate::runner)) →
//! `reconcile` (targets → annotate → status) → `targets` (which Pods, how many expected; the
//! only place that resolves workloads) and `status` (the conflict-safe write) → `plan` (pure:
//! the budget arithmetic of [`kruise_api::policy::v1alpha1::pubcontrol`] applied to one
//! budget) → `context`, `error`.

mod context;
pub mod controller;
mod error;
pub mod plan;
mod reconcile;
mod status;
mod targets;

#[cfg(test)]
mod plan_tests;
