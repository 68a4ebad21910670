//! apps.kruise.io kinds, one module per version (as in `k8s_openapi::api::apps::v1`).

mod condition;
pub mod v1alpha1;
pub mod v1beta1;
