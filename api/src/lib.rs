//! Kruise-rs API types, wire-compatible with OpenKruise v1.9.
//!
//! Modules:
//! - [`keys`]: every well-known name (annotations, labels, conditions, finalizers, env, groups,
//!   installation object names). Defined once, here; [`keys::k8s`] holds the names Kubernetes
//!   owns.
//! - [`appspub`]: types shared by all workloads (upstream `apis/apps/pub`): `InPlaceUpdateState`,
//!   `UpdateSpec`, `RuntimeContainerMetaSet`, `InPlaceUpdateStrategy`, `Lifecycle`,
//!   `UpdatePriorityStrategy`, `UpdateScatterStrategy`, `PodReadinessMessage`, with the parsing
//!   of their wire formats (in-place state with its old-key fallback, lifecycle label and
//!   timestamp, readiness messages, container launch priority).
//! - [`apps::v1beta1`] / [`apps::v1alpha1`]: the apps.kruise.io kinds (`CloneSet`, ...), each
//!   with its `…Spec`/`…Status` types; v1beta1 is the storage version.
//! - [`features`]: OpenKruise's feature gates (wire names, defaults, the `--feature-gates`
//!   syntax and the rules between gates), parsed once at start-up.
//! - [`crds`]: every CustomResourceDefinition, versions merged (used by the `crdgen` binary).
//! - [`hash`]: the Go-compatible env-from-metadata hash of `runtime-containers-meta`, computed
//!   by the daemon and compared by the manager.
//! - [`condition`]: get, set and remove over any kind's conditions, with upstream's rules.
//! - [`image`]: image references (registry, repository, tag, digest) with Docker's defaults.
//! - [`pod`]: Pod conditions and readiness gates.
//! - [`revision`]: which revision a pod's labels name.
//! - [`selector`]: label selector validation and matching.
//! - [`sidecarset`]: SidecarSet wire formats on Pods (hash annotations, hot-upgrade pair) and
//!   the SidecarSet hashes.
//! - [`error`]: the crate's error type.
//!
//! Every wire format more than one crate reads or writes is parsed here, once.

pub mod apps;
pub mod appspub;
pub mod condition;
pub mod crds;
pub mod cron;
pub mod error;
pub mod features;
pub mod hash;
pub mod image;
pub mod keys;
pub mod pod;
pub mod policy;
pub mod revision;
mod schema;
pub mod selector;
mod serde_util;
pub mod sidecarset;
pub mod vct_hash;

pub use error::{Error, Result};
