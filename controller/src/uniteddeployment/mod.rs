//! The UnitedDeployment controller (upstream `pkg/controller/uniteddeployment`): one workload
//! per subset (CloneSet, Advanced StatefulSet, StatefulSet or Deployment, built from the
//! template), the total replicas split between the subsets as upstream's allocators do (with
//! the `Adaptive` schedule strategy, a subset whose Pods stay unschedulable is marked
//! `Schedulable=False` and keeps only its ready Pods, the rest going to the next subsets), the
//! Manual partitions passed down, revisions in ControllerRevisions, and the status.
//!
//! Imports flow one way: `controller` (wiring on the shared [`runner`](crate::runner)) →
//! `reconcile` (revisions → subsets → allocation → writes → status) → `schedule` (the Adaptive
//! strategy's reads and Pod labels) → `status`, `child` (building and reading subset
//! workloads), `legacy` (templates an earlier build stored), `adaptive`, `reserve` and `plan`
//! (pure) → `context`, `error`.

mod adaptive;
mod child;
mod context;
pub mod controller;
mod error;
mod legacy;
pub mod plan;
mod reconcile;
mod reserve;
mod revisions;
mod schedule;
mod status;

#[cfg(test)]
mod adaptive_tests;
#[cfg(test)]
mod reserve_tests;
#[cfg(test)]
mod tests;
