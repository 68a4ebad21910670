//! kruise-daemon: the per-node agent. It speaks CRI to the local container runtime and only
//! touches its own node's objects. One module per duty; `criruntime` is the runtime client.

pub mod apitypes;
// One backoff curve for every error policy of manager and daemon.
pub use kruise_runtime::backoff;
pub mod containermeta;
pub mod containerrecreate;
pub mod criruntime;
pub mod events;
pub mod imagepuller;
pub mod metrics;
pub mod prestop;
