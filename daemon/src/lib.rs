//! kruise-daemon: the per-node agent. It speaks CRI to the local container runtime and only
//! touches its own node's objects. One module per duty; `criruntime` is the runtime client.

pub mod apitypes;
// The manager's per-object backoff, compiled from the same file: one curve for every error
// policy of manager and daemon, without the daemon linking the manager.
#[path = "../../controller/src/backoff.rs"]
pub mod backoff;
pub mod containermeta;
pub mod containerrecreate;
pub mod criruntime;
pub mod events;
pub mod imagepuller;
pub mod metrics;
pub mod prestop;
