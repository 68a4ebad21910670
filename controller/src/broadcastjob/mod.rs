//! The BroadcastJob controller (upstream `pkg/controller/broadcastjob`): one Pod run to
//! completion on every eligible node.
//!
//! Pure decisions, time a parameter: [`plan`] (node eligibility, Pod counts, the step of a
//! reconcile with its status and Events). The I/O shell, imports flowing one way:
//! [`controller`] (wiring on the shared [`runner`](crate::runner): the job, Node and Pod
//! watches) → `reconcile` (expectations gate → plan → writes → Events → status) → `context`
//! (clients, caches, expectations, Events, the error). Node fitness and binding a Pod to its
//! node are shared with Advanced DaemonSet in [`crate::workload::nodes`].

mod context;
pub mod controller;
pub mod error;
pub mod plan;
mod reconcile;
