//! ImagePullJob admission, after upstream's `pkg/webhook/imagepulljob`: defaulting
//! ([`defaults`]) and validation ([`validation`]). Both versions share one shape, so one
//! handler serves v1alpha1 and v1beta1. Raw JSON for the same reason as the CloneSet handlers:
//! a wrongly typed field is reported by path instead of failing to decode.

pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
