//! CRD conversion: the `/convert` endpoint ([`endpoint`]) and the lossless-conversion framework
//! every kind's v1alpha1 ⇄ v1beta1 mapping is written in ([`scheme`]).
//!
//! The endpoint knows no kind: the crate root hands it the table of kinds
//! ([`crate::converter`]), so the kinds can use the framework without a circle.

pub mod endpoint;
pub mod scheme;
