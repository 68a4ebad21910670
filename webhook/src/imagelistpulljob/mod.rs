//! ImageListPullJob admission, after upstream's `pkg/webhook/imagelistpulljob`: defaulting
//! ([`defaults`]: the shared pull template's) and validation ([`validation`]). One handler
//! serves both versions.

pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
