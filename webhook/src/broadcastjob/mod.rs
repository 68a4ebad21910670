//! BroadcastJob admission, after upstream's `pkg/webhook/broadcastjob`: defaulting
//! ([`defaults`], upstream `SetDefaultsBroadcastJob`) and validation ([`validation`]). Both
//! versions share one shape, so one handler serves v1alpha1 and v1beta1. Raw JSON, as for the
//! other kinds: a wrongly typed field is reported by path instead of failing the decode.

pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
