//! The Advanced StatefulSet controller (upstream `pkg/controller/statefulset`).
//!
//! Pure decisions, time a parameter: `identity` (ordinals, their range with reserveOrdinals and
//! ordinals.start, pod and PVC names, the Pod and PVCs of one ordinal), `plan` (replicas vs
//! condemned, what to create and delete under OrderedReady or Parallel, which pods to update
//! within partition and maxUnavailable), `status`.
//!
//! The I/O shell: `controller` (wiring on the shared runner) → `reconcile` (gates, revisions,
//! in-place refresh, scale, update, status) → `revisions` (on the shared
//! [`crate::revision`]) → `lifecycle` (CloneSet's lifecycle hooks, written for this set) →
//! `context` → `error`. In-place updates go through the shared engine
//! ([`crate::inplace`]) with [`hooks::AstsHooks`].

mod context;
pub mod controller;
mod error;
pub mod hooks;
pub mod identity;
mod lifecycle;
pub mod plan;
mod reconcile;
mod revisions;
pub mod status;
