//! The SidecarTerminator (upstream `pkg/controller/sidecarterminator`, gate `SidecarTerminator`):
//! once the main containers of a job Pod (restartPolicy Never, or OnFailure with the main
//! containers succeeded) are done, it stops the sidecars that carry
//! `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true` through a ContainerRecreateRequest that
//! kruise-daemon carries out (the kubelet does not start them again: the Pod does not restart
//! containers that way), so the Pod — and its Job — finishes. With
//! `KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE=true` it first sets the Pod's phase from the main
//! containers (condition SidecarTerminated), so the sidecar's exit code does not decide it. On
//! virtual-kubelet nodes it replaces the image of `_WITH_IMAGE` sidecars instead.
//!
//! Imports flow one way: `controller` (wiring on the shared [`runner`](crate::runner) over the
//! Pod cache) → `reconcile` (read the node → plan → act, Events) → `plan` (pure) and `context`.

mod context;
pub mod controller;
mod error;
pub mod plan;
mod reconcile;
