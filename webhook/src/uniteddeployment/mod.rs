//! UnitedDeployment admission (v1alpha1), after upstream's `pkg/webhook/uniteddeployment`:
//! defaulting ([`defaults`], upstream `SetDefaultsUnitedDeployment`) and validation
//! ([`validation`]: one template, the selector, the subsets' names, placement and replica
//! rules, the Adaptive schedule strategy's rules, the partitions, and what may not change in an
//! update).
//! v1beta1 converts to and from v1alpha1 (the storage version) in [`conversion`].

pub mod conversion;
pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
