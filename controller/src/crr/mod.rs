//! ContainerRecreateRequest, manager side (the daemon in kruise-daemon does the recreating;
//! the contract is in daemon/README.md).
//!
//! For each request this controller, one step per reconcile ([`plan::next_step`]):
//! - fills in what the CRR mutating webhook does (labels `crr.apps.kruise.io/active`,
//!   `node-name`, `pod-uid`; strategy defaults; each container's preStop, ports and
//!   `statusContext`) when a request lacks it, i.e. was created while the webhook was off
//!   (`--disable-webhook`): the daemon only watches requests carrying those labels. It is the
//!   webhook's own pure function, [`kruise_webhook::crr::admit::admit`];
//! - completes requests whose pod is gone or was recreated, that the daemon never picked up
//!   within a minute, or that passed `activeDeadlineSeconds`;
//! - while Recreating, keeps `status.containerStatusSnapshot` current (the daemon marks a
//!   container Succeeded only from it) and, with `unreadyGracePeriodSeconds`, holds the pod
//!   not-ready through a KruisePodReady key under finalizer `crr.apps.kruise.io/unready-acquired`
//!   before setting condition PreRecreateGrace;
//! - once finished, releases the key and finalizer, drops the active label, and deletes the
//!   request `ttlSecondsAfterFinished` after completion.
//!
//! Entry point: [`controller::CONTROLLER`] in the manager's registry; Pods come from the
//! shared [`PodCache`](crate::podcache::PodCache).
//! RBAC: `containerrecreaterequests` get/list/watch/update/patch/delete,
//! `containerrecreaterequests/status` patch; `pods` get (cache fallback), `pods/status` patch.

pub mod context;
pub mod controller;
pub mod error;
pub mod plan;
mod reconcile;
