//! policy.kruise.io kinds, one module per version (as in `k8s_openapi::api::policy::v1`).

pub mod v1alpha1;
pub mod v1beta1;
