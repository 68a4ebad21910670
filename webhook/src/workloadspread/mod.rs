//! WorkloadSpread admission, after upstream's `pkg/webhook/workloadspread` (validation only,
//! [`validation`]) and the Pod side of `pkg/util/workloadspread` ([`subset`]: which subset a
//! new Pod takes and how the status records it). The Pod webhook's slots are in
//! [`crate::pod::workload_spread`].
//!
//! [`WsLookup`] is what the handlers read and write in the cluster; its defaults describe a
//! cluster without WorkloadSpreads, so test doubles of other kinds need not implement it.

pub mod conversion;
pub mod subset;
pub mod validation;

use std::future::Future;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::apps::v1alpha1::{CustomWorkloadWhiteList, WorkloadSpread};

/// The result of a status write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsWrite {
    /// Stored.
    Written,
    /// Someone wrote in between: read again and retry.
    Conflict,
    /// The WorkloadSpread is gone.
    Gone,
}

/// WorkloadSpreads as the webhook reads and writes them.
pub trait WsLookup: Sync {
    /// The WorkloadSpreads of a namespace, from the watch cache where there is one: read on
    /// every Pod create, so a Pod no WorkloadSpread concerns pays only this.
    fn workload_spreads(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<Vec<WorkloadSpread>, String>> + Send {
        std::future::ready(Ok(Vec::new()))
    }
    /// The same read from the API server (the conflict check of the validation).
    fn workload_spreads_live(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<WorkloadSpread>, String>> + Send {
        self.workload_spreads(namespace)
    }
    /// One WorkloadSpread, read from the API server (the reservation re-reads after a
    /// conflict).
    fn workload_spread(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> impl Future<Output = Result<Option<WorkloadSpread>, String>> + Send {
        std::future::ready(Ok(None))
    }
    /// The replicas of the workload `ws` targets (see
    /// `kruise_api::apps::v1alpha1::workload_replicas`, `targetFilter.replicasPathList`
    /// included), `None` when it does not exist: read only when a percentage cap has no status
    /// yet for a new Pod's revision.
    fn workload_replicas(
        &self,
        _ws: &WorkloadSpread,
    ) -> impl Future<Output = Result<Option<i32>, String>> + Send {
        std::future::ready(Ok(None))
    }
    /// The custom workload kinds a WorkloadSpread may target, from the `kruise-configuration`
    /// ConfigMap (read only when a target or a Pod's owner is not a built-in kind).
    fn ws_whitelist(&self) -> impl Future<Output = Result<CustomWorkloadWhiteList, String>> + Send {
        std::future::ready(Ok(CustomWorkloadWhiteList::default()))
    }
    /// The controller of the object `owner` names (one step up a Pod's owner chain, towards a
    /// custom workload), `None` when it is gone or has none.
    fn owner_controller(
        &self,
        _namespace: &str,
        _owner: &OwnerReference,
    ) -> impl Future<Output = Result<Option<OwnerReference>, String>> + Send {
        std::future::ready(Ok(None))
    }
    /// Replaces the status (optimistic: the object's resourceVersion is sent).
    fn write_workload_spread_status(
        &self,
        _ws: &WorkloadSpread,
    ) -> impl Future<Output = Result<WsWrite, String>> + Send {
        std::future::ready(Ok(WsWrite::Gone))
    }
}

#[cfg(test)]
mod tests;
