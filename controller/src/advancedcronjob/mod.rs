//! The AdvancedCronJob controller (upstream `pkg/controller/advancedcronjob`): a Job,
//! BroadcastJob or ImageListPullJob created at each point of a cron schedule.
//!
//! Pure decisions, the clock a parameter: [`plan`] (missed points, starting deadline,
//! concurrency policy, history limits, status, requeue to the next point). The I/O shell:
//! [`controller`] (wiring on the shared [`runner`](crate::runner): the AdvancedCronJob watch and
//! one store per kind of run, whose events wake the owner) → `reconcile` (plan → prune → replace
//! → create → status) → `children` (the three kinds of run) → `context` (clients, stores, the
//! clock, Events, the error).

mod children;
mod context;
pub mod controller;
pub mod error;
pub mod plan;
mod reconcile;
