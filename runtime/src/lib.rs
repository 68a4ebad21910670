//! kruise-runtime: the parts of a controller loop that the manager's and the daemon's controllers
//! share, so both run, retry, throttle and count their reconciles the same way.
//!
//! - [`runner`]: the one way to run a controller (watch, queue, reconcile, error policy, spans),
//!   [`KubeError`](runner::KubeError), the failed API call every controller's error wraps,
//!   and the finalizer helpers of the controllers that write their own.
//! - [`backoff`]: per-object exponential backoff for every error policy, reset on success.
//! - [`metrics`]: the reconcile counts, errors and durations the runner records.
//! - [`stored`]: a kind watched, read and written at the version the API server stores, converted
//!   in process to the version the code is written against (no conversion webhook call per event).
//! - [`ratelimit`]: client-side QPS/burst for the Kubernetes client (client-go's flags).

pub mod backoff;
pub mod metrics;
pub mod ratelimit;
pub mod runner;
pub mod stored;
