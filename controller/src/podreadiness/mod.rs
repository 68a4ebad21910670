//! The pod-readiness controller: a pod that carries the `KruisePodReady` readiness gate (the
//! webhook injects it) but no such condition yet gets the condition set to True, so it can
//! become Ready. Later writers add not-ready keys to hold it down.
//!
//! It runs on the shared runner ([`crate::runner`]) over the Pod cache's store: a failed patch
//! is requeued with the pod's exponential backoff instead of being given up after a few tries.

pub mod context;
pub mod controller;
pub mod error;
pub mod plan;
mod reconcile;
