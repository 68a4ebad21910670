//! The Advanced DaemonSet controller (upstream `pkg/controller/daemonset`): one Pod per
//! eligible node, bound by node affinity, replaced node by node within maxUnavailable /
//! maxSurge / partition / selector, in place through the shared engine when it can.
//!
//! Pure decisions: `nodes` (which nodes run a Pod), `pod` (new Pods, their node, the
//! [`AdsHooks`](pod::AdsHooks) of the engine), `plan` (the manage loop and the rolling update),
//! `status`. The I/O shell: `controller` (wiring: DaemonSet watch, Node store, Pod events) →
//! `reconcile` (revisions, the plan's writes, status). Lifecycle hooks (preDelete,
//! inPlaceUpdate) use CloneSet's update step and lifecycle writer; the plan counts a
//! pre-deleting Pod as none, as upstream does.

mod context;
pub mod controller;
pub mod nodes;
pub mod plan;
pub mod pod;
mod reconcile;
pub mod status;
