//! ContainerRecreateRequest admission and conversion, after upstream's
//! `pkg/webhook/containerrecreaterequest`.
//!
//! On CREATE the mutating handler ([`mutation::mutate`]) GETs the request's Pod and admits the
//! request against it through the pure [`admit::admit`]. The validating handler
//! ([`validation::validate`]) keeps the spec and the Pod labels immutable once admitted.
//! [`conversion`] maps v1alpha1 ⇄ v1beta1.
//!
//! Every problem found is reported, not just the first, each naming the field and the value.

pub mod admit;
pub mod conversion;
mod decode;
pub mod mutation;
pub mod validation;

#[cfg(test)]
pub(crate) mod tests;
