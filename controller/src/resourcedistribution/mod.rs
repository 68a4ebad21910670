//! The ResourceDistribution controller (upstream `pkg/controller/resourcedistribution`): copies
//! one Secret or ConfigMap into every namespace a distribution targets, keeps the copies equal
//! to it (hash annotation), removes them from namespaces no longer targeted, never touches a
//! same-named object it does not own, and reports per-namespace failures in the status.
//! Deleting the distribution deletes the copies through their owner references.
//!
//! Imports flow one way: `controller` (wiring on the shared [`runner`](crate::runner): the
//! distributions, Namespace events, events of the copies) → `reconcile` (read → plan → apply →
//! status → Events) → `plan` (pure: which namespaces, what to do in each, the copy to write)
//! and `status` (pure status, conflict-safe write) → `context`, `error`.

mod context;
pub mod controller;
mod error;
pub mod plan;
mod reconcile;
pub mod status;

#[cfg(test)]
mod plan_tests;
