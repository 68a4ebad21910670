//! The Advanced StatefulSet controller (upstream `pkg/controller/statefulset`).
//!
//! Pure decisions, time a parameter: `identity` (ordinals, their range with reserveOrdinals and
//! ordinals.start, pod and PVC names, the Pod and PVCs of one ordinal), `plan` (replicas vs
//! condemned, what to create and delete under OrderedReady or Parallel, which pods to update
//! within partition and maxUnavailable), `status`, `claims` (claims against their templates:
//! resizing under `StatefulSetAutoResizePVCGate`, `status.volumeClaims`).
//!
//! The I/O shell: `controller` (wiring on the shared runner) → `reconcile` (gates, settings,
//! revisions, sync, status, history) → `sync` (named steps: in-place refresh, scale, update) and
//! `revisions` (on the shared [`crate::revision`]) → `settings` (what the spec asks, checked
//! once) → `lifecycle` (the shared [`crate::workload`] lifecycle hooks, written for this set) →
//! `context` → `error`. In-place updates go through the shared engine
//! ([`crate::inplace`]) with [`hooks::AstsHooks`].

pub mod claims;
mod context;
pub mod controller;
mod error;
pub mod hooks;
pub mod identity;
mod lifecycle;
pub mod plan;
mod reconcile;
mod resize;
mod revisions;
mod settings;
pub mod status;
mod sync;
