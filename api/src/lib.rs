//! Kruise-rs API types, wire-compatible with OpenKruise v1.9.
//!
//! Modules:
//! - [`keys`]: every well-known name (annotations, labels, conditions, finalizers, env, groups,
//!   installation object names). Defined once, here.
//! - [`appspub`]: types shared by all workloads (upstream `apis/apps/pub`): `InPlaceUpdateState`,
//!   `UpdateSpec`, `RuntimeContainerMetaSet`, `InPlaceUpdateStrategy`, `Lifecycle`,
//!   `UpdatePriorityStrategy`, `UpdateScatterStrategy`, `PodReadinessMessage`.
//! - [`apps::v1beta1`] / [`apps::v1alpha1`]: the apps.kruise.io kinds (`CloneSet`, ...), each
//!   with its `…Spec`/`…Status` types; v1beta1 is the storage version.
//! - [`crds`]: every CustomResourceDefinition, versions merged (used by the `crdgen` binary).
//! - [`hash`]: the Go-compatible env-from-metadata hash of `runtime-containers-meta`, computed
//!   by the daemon and compared by the manager.
//! - [`error`]: the crate's error type.

pub mod apps;
pub mod appspub;
pub mod crds;
pub mod error;
pub mod hash;
pub mod keys;
mod schema;
mod serde_util;

pub use error::{Error, Result};
