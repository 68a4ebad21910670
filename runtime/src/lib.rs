//! kruise-runtime: the parts of a controller loop that the manager's and the daemon's controllers
//! share, so both retry and throttle the same way.
//!
//! - [`backoff`]: per-object exponential backoff for every error policy, reset on success.
//! - [`ratelimit`]: client-side QPS/burst for the Kubernetes client (client-go's flags).

pub mod backoff;
pub mod ratelimit;
