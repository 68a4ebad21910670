//! The EphemeralJob controller (upstream `pkg/controller/ephemeraljob`): ephemeral containers
//! injected into the Pods a selector picks, at most `parallelism` unfinished at once, and
//! followed to their end.
//!
//! Pure decisions, time a parameter: [`plan`] (targets, name conflicts, container and Pod
//! states, status, where to inject next). The I/O shell: [`controller`] (wiring on the shared
//! [`runner`](crate::runner): the job watch and the Pod events of the shared cache) →
//! `reconcile` (finalizer → TTL → injections gate → plan → Events → injections → status) →
//! `context` (clients, cache, expectations, Events, the error).

mod context;
pub mod controller;
pub mod error;
pub mod plan;
mod reconcile;
