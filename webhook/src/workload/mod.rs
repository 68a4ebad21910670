//! What the workload kinds (CloneSet, Advanced StatefulSet, Advanced DaemonSet) share, below
//! them all so that no kind's folder imports another's: Pod-template defaults, the label
//! selector and the shared rules.

pub mod defaults;
pub mod selector;
pub mod validation;
