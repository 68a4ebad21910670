//! PersistentPodState admission, after upstream's `pkg/webhook/persistentpodstate`: validation
//! only ([`validation`]); upstream registers no defaulting webhook for the kind, and its one
//! default (`persistentPodStateRetentionPolicy` empty means `WhenScaled`) is read, not written.
//! The Pod side (steering a recreated Pod back to its recorded topology) is in
//! [`crate::pod::persistent_pod_state`].
//!
//! [`PpsLookup`] is what the handlers read in the cluster; the defaults describe a cluster
//! without PersistentPodStates, so test doubles of the other kinds need not implement it.

pub mod conversion;
pub mod validation;

use std::future::Future;

use kruise_api::apps::v1alpha1::{PersistentPodState, PpsWorkloadWhiteList};

/// PersistentPodStates as the webhook reads them.
pub trait PpsLookup: Sync {
    /// The PersistentPodStates of a namespace (from the watch cache where there is one): read
    /// on every Pod create of a StatefulSet.
    fn persistent_pod_states(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<Vec<PersistentPodState>, String>> + Send {
        std::future::ready(Ok(Vec::new()))
    }
    /// The same read from the API server: one created a moment ago must be seen by the
    /// conflict check of the next, which a watch may not show yet.
    fn persistent_pod_states_live(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<PersistentPodState>, String>> + Send {
        self.persistent_pod_states(namespace)
    }
    /// The custom workload kinds a PersistentPodState may target, from the
    /// `kruise-configuration` ConfigMap: read only for a target that is not a StatefulSet.
    fn pps_whitelist(&self) -> impl Future<Output = Result<PpsWorkloadWhiteList, String>> + Send {
        std::future::ready(Ok(PpsWorkloadWhiteList::default()))
    }
}

#[cfg(test)]
mod tests;
