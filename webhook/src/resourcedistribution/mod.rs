//! ResourceDistribution admission, after upstream's `pkg/webhook/resourcedistribution`:
//! validation only ([`validation`]); upstream has no defaulting for the kind. Raw JSON, as the
//! other kinds' handlers, so that a wrongly typed field is reported by its path.

pub mod conversion;
pub mod validation;

#[cfg(test)]
mod tests;
