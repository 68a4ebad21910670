//! PodUnavailableBudget admission, after upstream's `pkg/webhook/podunavailablebudget`: only
//! validation ([`validation`]); upstream registers no defaulting webhook for the kind. The
//! Pod side of the budget (the related-pub annotation, charging deletes, evictions and
//! updates) is in [`crate::pod`].
//!
//! [`PubLookup`] is what the handlers read and write in the cluster; the defaults describe a
//! cluster without budgets, so test doubles of the other kinds need not implement it.

pub mod conversion;
pub mod validation;

use std::future::Future;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kruise_api::policy::v1alpha1::{PodUnavailableBudget, TargetReference};

/// How a status write ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusWrite {
    /// Stored.
    Written,
    /// Someone wrote in between: read again and retry.
    Conflict,
    /// The budget is gone.
    Gone,
}

/// Budgets as the webhook reads and writes them.
pub trait PubLookup: Sync {
    /// The budgets of a namespace (from a watch cache where there is one).
    fn budgets(
        &self,
        _namespace: &str,
    ) -> impl Future<Output = Result<Vec<PodUnavailableBudget>, String>> + Send {
        std::future::ready(Ok(Vec::new()))
    }
    /// The budgets of a namespace read from the API server: a budget created a moment ago
    /// must be seen by the overlap check of the next one, which a watch may not show yet.
    fn budgets_live(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<PodUnavailableBudget>, String>> + Send {
        self.budgets(namespace)
    }
    /// One budget read from the API server (fresh, for a charge).
    fn budget(
        &self,
        _namespace: &str,
        _name: &str,
    ) -> impl Future<Output = Result<Option<PodUnavailableBudget>, String>> + Send {
        std::future::ready(Ok(None))
    }
    /// Writes the budget's status, guarded by its resourceVersion.
    fn write_budget_status(
        &self,
        _budget: &PodUnavailableBudget,
    ) -> impl Future<Output = Result<StatusWrite, String>> + Send {
        std::future::ready(Ok(StatusWrite::Gone))
    }
    /// Records that the budget refused an operation on `pod` (upstream's Warning Event
    /// [`kruise_api::keys::PUB_REASON_PREVENT_POD_DELETION`] on the Pod). Must not delay the
    /// answer: the refusal stands whether or not the Event is written. `username` asked; the
    /// refusal is counted under it ([`crate::metrics::ProtectionMetrics::budget_refused`]).
    fn refused(&self, _pod: &Pod, _username: &str) {}
    /// The workload a Pod's controller belongs to, as a budget's `targetRef` names it: a
    /// ReplicaSet owned by a Deployment is that Deployment; any other owner is itself
    /// (upstream `GetScaleAndSelectorForRef` on the Pod's controller).
    fn workload_of(
        &self,
        _namespace: &str,
        owner: &OwnerReference,
    ) -> impl Future<Output = Result<Option<TargetReference>, String>> + Send {
        std::future::ready(Ok(Some(TargetReference {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
        })))
    }
}

#[cfg(test)]
mod tests;
