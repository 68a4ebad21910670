//! AdvancedCronJob admission, after upstream's `pkg/webhook/advancedcronjob`: defaulting
//! ([`defaults`], upstream `SetDefaultsAdvancedCronJob`) and validation ([`validation`]: the
//! schedule and time zone through `kruise_api::cron`, exactly one template, each template's own
//! rules, the fields an update may change). v1alpha1's JSON is v1beta1's less
//! `imageListPullJobTemplate`, so one handler serves both versions.

pub mod defaults;
pub mod validation;

#[cfg(test)]
mod tests;
