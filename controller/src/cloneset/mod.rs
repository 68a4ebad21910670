//! The CloneSet controller, split along upstream's seams (`pkg/controller/cloneset`).
//!
//! Pure decisions, time a parameter: `diff`, `scale`, `update`, `status`, `spec` (what the spec
//! asks for) and `pod` (new Pods and PVCs). What other workloads share with CloneSet (Pod
//! helpers, the lifecycle state machine and writer, the per-Pod update step, update order,
//! int-or-percent math, claims, specified delete, image pre-download) lives below it in
//! [`crate::workload`].
//!
//! The I/O shell, imports flowing one way: `controller` (wiring on the shared
//! [`runner`](crate::runner)) → `reconcile` (gates → sync → status → GC) → `sync` with its halves
//! `sync_scale` and `sync_update` (and the `lifecycle` writes both make, through the shared writer) → `revisions`, `pvc` →
//! `context` (Events, expectations) → `error` (with the runner's retry floor and metric label).
//!
//! Wire formats (selectors, Pod conditions and readiness gates, the lifecycle label and
//! timestamp, the in-place grace annotation) are read and written with `kruise_api`'s helpers,
//! never parsed here.

mod active;
mod context;
pub mod controller;
pub mod diff;
mod error;
pub mod hooks;
pub mod lifecycle;
pub mod pod;
mod pvc;
mod reconcile;
mod revisions;
pub mod scale;
pub mod spec;
pub mod status;
mod sync;
mod sync_scale;
mod sync_update;
pub mod update;
