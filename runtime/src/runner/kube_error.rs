//! The one kube-error type of every controller: a failed API call, with the questions the
//! controllers and the runner ask of it (conflict, not found, the API server's message) and its
//! `error` metric label.
//!
//! A controller's own error enum keeps its own failure kinds and wraps this one in a `Kube`
//! variant; [`reconcile_error!`](crate::reconcile_error) writes the rest:
//!
//! ```ignore
//! #[derive(Debug, thiserror::Error)]
//! pub enum Error {
//!     #[error(transparent)]
//!     Kube(#[from] KubeError),
//!     #[error("spec: {0}")]
//!     Spec(String),
//! }
//! kruise_runtime::reconcile_error!(Error {
//!     Error::Spec(_) => "spec", floor: Duration::from_secs(30);
//! });
//! ```
//!
//! A controller with no failure kind of its own uses `KubeError` as its error.

use super::ReconcileError;

/// A failed Kubernetes API call.
#[derive(Debug, thiserror::Error)]
#[error("kubernetes API: {0}")]
pub struct KubeError(#[source] pub kube::Error);

impl KubeError {
    /// The `error` label of the reconcile error counter for every failed API call.
    pub const METRIC_LABEL: &'static str = "kube";

    /// A write lost to a concurrent writer (HTTP 409 Conflict).
    pub fn is_conflict(&self) -> bool {
        super::is_conflict(&self.0)
    }

    /// The object is gone (HTTP 404).
    pub fn is_not_found(&self) -> bool {
        matches!(&self.0, kube::Error::Api(s) if s.is_not_found())
    }

    /// The API server's own message for a refused request (what a condition shows), if it gave
    /// one.
    pub fn api_message(&self) -> Option<&str> {
        match &self.0 {
            kube::Error::Api(s) if !s.message.is_empty() => Some(&s.message),
            _ => None,
        }
    }
}

impl From<kube::Error> for KubeError {
    fn from(e: kube::Error) -> Self {
        Self(e)
    }
}

impl ReconcileError for KubeError {
    fn kube(&self) -> Option<&KubeError> {
        Some(self)
    }

    fn metric_label(&self) -> &'static str {
        Self::METRIC_LABEL
    }
}

/// The [`ReconcileError`] of a controller's error enum with a `Kube(KubeError)` variant, and
/// `From<kube::Error>` for it (so `?` on an API call needs no conversion): the kube part (its
/// label, conflict test and zero floor) is written here once; the enum lists only its own
/// failure kinds, each with its `error` label and, when only a change of the object fixes it,
/// its retry floor:
///
/// ```ignore
/// kruise_runtime::reconcile_error!(Error {
///     Error::Serde(_) => "serde";
///     Error::Spec(_) => "spec", floor: SPEC_ERROR_RETRY;
/// });
/// ```
#[macro_export]
macro_rules! reconcile_error {
    ($error:ty { $($pat:pat => $label:literal $(, floor: $floor:expr)?);* $(;)? }) => {
        impl ::core::convert::From<::kube::Error> for $error {
            fn from(e: ::kube::Error) -> Self {
                Self::Kube($crate::runner::KubeError::from(e))
            }
        }

        impl $crate::runner::ReconcileError for $error {
            fn kube(&self) -> ::core::option::Option<&$crate::runner::KubeError> {
                match self {
                    Self::Kube(e) => ::core::option::Option::Some(e),
                    #[allow(unreachable_patterns)]
                    _ => ::core::option::Option::None,
                }
            }

            fn metric_label(&self) -> &'static str {
                match self {
                    Self::Kube(_) => $crate::runner::KubeError::METRIC_LABEL,
                    $($pat => $label,)*
                }
            }

            fn retry_floor(&self) -> ::std::time::Duration {
                match self {
                    $($pat => $crate::reconcile_error!(@floor $($floor)?),)*
                    #[allow(unreachable_patterns)]
                    _ => ::std::time::Duration::ZERO,
                }
            }
        }
    };
    (@floor) => {
        ::std::time::Duration::ZERO
    };
    (@floor $floor:expr) => {
        $floor
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, message: &str) -> KubeError {
        let reason = match code {
            404 => "NotFound",
            409 => "Conflict",
            _ => "Forbidden",
        };
        KubeError::from(kube::Error::Api(Box::new(
            Status::failure(message, reason).with_code(code),
        )))
    }

    #[test]
    fn conflict_is_409_and_not_found_404() {
        assert!(api(409, "x").is_conflict());
        assert!(!api(404, "x").is_conflict());
        assert!(api(404, "x").is_not_found());
        assert!(!api(409, "x").is_not_found());
        // The runner's view follows the same test.
        assert!(ReconcileError::is_conflict(&api(409, "x")));
        assert_eq!(api(500, "x").metric_label(), "kube");
        assert_eq!(api(500, "x").retry_floor(), std::time::Duration::ZERO);
    }

    #[test]
    fn message_and_display() {
        assert_eq!(
            api(403, "quota exceeded").api_message(),
            Some("quota exceeded")
        );
        assert_eq!(api(403, "").api_message(), None);
        assert!(api(403, "no").to_string().starts_with("kubernetes API: "));
    }
}
