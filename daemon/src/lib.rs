//! kruise-daemon: the per-node agent. It speaks CRI to the local container runtime and only
//! touches its own node's objects. One module per duty; `criruntime` is the runtime client. The
//! duties that reconcile objects (containermeta, containerrecreate) run on the controller runner
//! of `kruise-runtime`, like the manager's controllers.

pub mod apitypes;
pub mod containermeta;
pub mod containerrecreate;
pub mod criruntime;
pub mod cristatus;
pub mod events;
pub mod imagepuller;
pub mod metrics;
pub mod podprobe;
pub mod prestop;
