//! NodeImage admission, after upstream's `pkg/webhook/nodeimage`: defaulting ([`defaults`])
//! and validation ([`validation`]). One handler serves both versions.

pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
