//! The Advanced DaemonSet controller (upstream `pkg/controller/daemonset`): one Pod per
//! eligible node, bound by node affinity, replaced node by node within maxUnavailable /
//! maxSurge / partition / selector, in place through the shared engine when it can.
//!
//! Pure decisions: `nodes` (which nodes run a Pod), `pod` (new Pods, their node, the
//! [`AdsHooks`](pod::AdsHooks) of the engine), `plan` (the manage loop and the rolling update),
//! `status`. The I/O shell, imports flowing one way, as CloneSet's: `controller` (wiring on the
//! shared runner: DaemonSet watch, Node store, Pod events) → `reconcile` (named steps: gates →
//! revisions → plan → sync → history → status) → `sync` (the plan's Pod writes) and
//! `revisions` → `context` (Events, expectations, the error). Lifecycle hooks (preDelete,
//! inPlaceUpdate) use the shared [`crate::workload`] update step and lifecycle writer; the plan
//! counts a pre-deleting Pod as none, as upstream does. `predownload` asks the nodes to pull a
//! rollout's new images first (gate `PreDownloadImageForDaemonSetUpdate`), through the shared
//! [`crate::workload::predownload`].

mod context;
pub mod controller;
pub mod error;
pub mod nodes;
pub mod plan;
pub mod pod;
pub mod predownload;
mod reconcile;
mod revisions;
pub mod status;
mod sync;
