//! policy.kruise.io/v1alpha1: PodUnavailableBudget, and the budget arithmetic the webhook and
//! the controller share ([`pubcontrol`]).

mod podunavailablebudget;
pub mod pubcontrol;

pub use podunavailablebudget::{
    PodUnavailableBudget, PodUnavailableBudgetSpec, PodUnavailableBudgetStatus, PubOperation,
    TargetReference, parse_group,
};

#[cfg(test)]
mod pubcontrol_tests;
