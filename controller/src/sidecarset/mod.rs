//! The SidecarSet controller (upstream `pkg/controller/sidecarset/`): keeps each SidecarSet's
//! status and upgrades the sidecars of its Pods in place when only their images changed.
//!
//! [`plan`] decides (pure); the rest reads the Pod cache and writes: for a Pod to upgrade,
//! first the `KruisePodReady` condition goes False under our key (the Pod leaves Service), then
//! one patch sets the new images, the Pod's hash entries and the in-place state; once the
//! kubelet runs the new images the key is removed again. Hot-upgrade sidecars ([`hot`]) never
//! leave Service: the idle container of the pair gets the new image, and once it runs and is
//! ready the working-container annotation flips to it and the old one goes to the empty image.
//!
//! CloneSet's shape, imports flowing one way: `controller` (wiring on the shared runner:
//! SidecarSet watch, Namespace store, Pod events) → `reconcile` (named steps: gates → matched
//! Pods → revisions → plan → sync → status) → `sync` (the Pod writes: readiness key, upgrade,
//! hot flip) and `status` → `context` (Events, write expectations) → `error`.

mod context;
pub mod controller;
pub mod error;
pub mod history;
pub mod hot;
pub mod metadata;
pub mod plan;
mod reconcile;
mod status;
mod sync;
pub mod upgradable;
