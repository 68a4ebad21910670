//! The CloneSet controller, split along upstream's seams (`pkg/controller/cloneset`).
//!
//! Pure decisions, time a parameter: `diff`, `scale`, `update`, `update_step`, `status`, `claim`,
//! `spec` (what the spec asks for), `pod` (new Pods and PVCs) and `podutil`.
//!
//! The I/O shell, imports flowing one way: `controller` (wiring on the shared
//! [`runner`](crate::runner)) → `reconcile` (gates → sync → status → GC) → `sync` with its halves
//! `sync_scale` and `sync_update` (and the `lifecycle` writes both make) → `revisions`, `pvc` →
//! `context` (Events, expectations) → `error` (with the runner's retry floor and metric label).
//!
//! Wire formats (selectors, Pod conditions and readiness gates, the lifecycle label and
//! timestamp, the in-place grace annotation) are read and written with `kruise_api`'s helpers,
//! never parsed here.

pub mod claim;
mod context;
pub mod controller;
pub mod diff;
mod error;
pub mod lifecycle;
pub mod pod;
pub mod podutil;
mod pvc;
mod reconcile;
pub mod revcache;
mod revisions;
pub mod scale;
pub mod spec;
pub mod status;
mod sync;
mod sync_scale;
mod sync_update;
pub mod update;
pub mod update_step;
