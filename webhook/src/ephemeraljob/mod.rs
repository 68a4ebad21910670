//! EphemeralJob admission (v1alpha1 only), after upstream's `pkg/webhook/ephemeraljob`:
//! validation ([`validation`]: upstream's `validateEphemeralContainers` over the template, and
//! beyond upstream the values the controller reads), and defaulting ([`defaults`], Kruise-rs
//! only: the container fields the API server would default when the containers are injected,
//! which upstream's validation otherwise requires the user to write). Raw JSON, as for the other
//! kinds: a wrongly typed field is reported by path instead of failing the decode.

pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
