//! SidecarSet admission: injection into new Pods ([`inject`], called from the Pod mutating
//! handler, [`crate::pod`]; [`revision`] decides which get a pinned revision), SidecarSet
//! defaulting ([`defaults`]) and validation ([`validation`]), v1alpha1 ⇄ v1beta1 conversion
//! ([`conversion`]) and the watch cache of SidecarSets the Pod handler reads ([`cache`]).
//!
//! The Pod and SidecarSet handlers read the cluster (every SidecarSet, the Pod's namespace)
//! through [`SidecarSetLookup`]; everything they decide is pure and tested without one.

pub mod cache;
pub mod conversion;
pub mod defaults;
pub mod inject;
pub mod quantity;
pub mod resources;
pub mod revision;
pub mod validation;
pub mod whitelist;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kruise_api::apps::v1beta1::{SidecarSet, SidecarSetInjectRevision};

/// Where the handlers read SidecarSets and namespaces. The defaults describe a cluster
/// without SidecarSets (test doubles of the other lookups use them).
pub trait SidecarSetLookup: Sync {
    /// Every SidecarSet.
    /// Shared, not copied: a Pod create reads every SidecarSet but clones none of them.
    fn sidecar_sets(
        &self,
    ) -> impl Future<Output = Result<Vec<std::sync::Arc<SidecarSet>>, String>> + Send {
        std::future::ready(Ok(Vec::new()))
    }
    /// The ControllerRevision `injectionStrategy.revision` names for `set` (upstream
    /// `getControllerRevision`): by name, or the newest with the custom version; `None` when
    /// there is none (injection then uses the current spec, as upstream).
    fn injection_revision(
        &self,
        _set: &SidecarSet,
        _rev: &SidecarSetInjectRevision,
    ) -> impl Future<Output = Result<Option<ControllerRevision>, String>> + Send {
        std::future::ready(Ok(None))
    }
    /// A SidecarSet create or update is being admitted (a cache of them is stale for a while).
    fn sidecar_set_changing(&self) {}
    /// The data of the `kruise-configuration` ConfigMap in the manager's namespace (empty
    /// when it does not exist), where the `patchPodMetadata` whitelist lives.
    fn kruise_configuration(
        &self,
    ) -> impl Future<Output = Result<BTreeMap<String, String>, String>> + Send {
        std::future::ready(Ok(BTreeMap::new()))
    }
    /// The labels of a namespace (empty when it does not exist).
    fn namespace_labels(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, String>, String>> + Send {
        std::future::ready(Ok(BTreeMap::new()))
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod inject_tests;

#[cfg(test)]
mod resources_tests;
