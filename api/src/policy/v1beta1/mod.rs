//! policy.kruise.io/v1beta1: the storage version of PodUnavailableBudget. The controller and
//! the webhooks read v1alpha1; the API server converts through the manager's `/convert`.

mod podunavailablebudget;

pub use crate::policy::v1alpha1::{PubOperation, TargetReference};
pub use podunavailablebudget::{
    PodUnavailableBudget, PodUnavailableBudgetSpec, PodUnavailableBudgetStatus,
};
