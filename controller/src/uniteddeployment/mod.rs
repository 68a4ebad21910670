//! The UnitedDeployment controller (upstream `pkg/controller/uniteddeployment`): one workload
//! per subset (CloneSet, Advanced StatefulSet, StatefulSet or Deployment, built from the
//! template), the total replicas split between the subsets as upstream's allocators do, the
//! Manual partitions passed down, revisions in ControllerRevisions, and the status.
//!
//! Imports flow one way: `controller` (wiring on the shared [`runner`](crate::runner)) →
//! `reconcile` (revisions → subsets → allocation → writes → status) → `status`, `child`
//! (building and reading subset workloads), `plan` (pure) → `context`, `error`.

mod child;
mod context;
pub mod controller;
mod error;
pub mod plan;
mod reconcile;
mod revisions;
mod status;

pub use context::Context;
pub use controller::{run, start};

#[cfg(test)]
mod tests;
