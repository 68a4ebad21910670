//! policy.kruise.io/v1beta1: served, not stored (v1alpha1 is, as OpenKruise v1.9.0). The controller and
//! the webhooks read v1alpha1; the API server converts through the manager's `/convert`.

mod podunavailablebudget;

pub use crate::policy::v1alpha1::{PubOperation, TargetReference};
pub use podunavailablebudget::{
    PodUnavailableBudget, PodUnavailableBudgetSpec, PodUnavailableBudgetStatus,
};
