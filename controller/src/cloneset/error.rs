//! The CloneSet controller's error, with the text its conditions show, and what the shared
//! runner needs of it (metric label, retry floor).

use crate::inplace::{ApplyError, NotInPlace};
use crate::revision::RevisionError;
use crate::runner::{KubeError, SPEC_ERROR_RETRY};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Revision(#[from] RevisionError),
    #[error("in-place update: {0}")]
    InPlace(#[from] ApplyError),
    #[error("serialization: {0}")]
    Serde(#[from] serde_json::Error),
    #[error("CloneSet has no namespace or uid")]
    Unnamed,
    #[error("pod {pod} is in lifecycle state {state} and cannot be updated in place")]
    BadLifecycle { pod: String, state: String },
    #[error(
        "pod {pod}: update strategy is InPlaceOnly but it cannot be updated in place: {reason}"
    )]
    InPlaceOnly { pod: String, reason: NotInPlace },
    #[error("revision template: {0}")]
    Template(String),
    #[error("KruisePodReady condition of pod {pod}: {source}")]
    Readiness {
        pod: String,
        source: kruise_api::Error,
    },
}

impl Error {
    /// The text a condition shows: the API server's own message for a refused request (what
    /// upstream shows), not the client's debug rendering of the whole Status.
    pub(super) fn condition_message(&self) -> String {
        match self {
            Error::Kube(e) if let Some(message) = e.api_message() => message.to_owned(),
            e => e.to_string(),
        }
    }
}

kruise_runtime::reconcile_error!(Error {
    // Spec errors wait at least [`SPEC_ERROR_RETRY`]; the rest only the backoff's delay.
    Error::Revision(_) => "revision";
    Error::InPlace(_) => "inplace";
    Error::Serde(_) => "serde";
    Error::Unnamed => "unnamed";
    Error::BadLifecycle { .. } => "lifecycle", floor: SPEC_ERROR_RETRY;
    Error::InPlaceOnly { .. } => "inplace_only", floor: SPEC_ERROR_RETRY;
    Error::Template(_) => "template", floor: SPEC_ERROR_RETRY;
    Error::Readiness { .. } => "readiness";
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::ReconcileError;
    use kube::core::Status;
    use std::time::Duration;

    fn api(message: &str) -> Error {
        Error::from(kube::Error::Api(Box::new(
            Status::failure(message, "Forbidden").with_code(403),
        )))
    }

    #[test]
    fn condition_message_is_the_api_servers_own_text() {
        assert_eq!(api("quota exceeded").condition_message(), "quota exceeded");
        // Without a message, the error's own rendering.
        assert_eq!(api("").condition_message(), api("").to_string());
        assert_eq!(
            Error::Unnamed.condition_message(),
            "CloneSet has no namespace or uid"
        );
    }

    #[test]
    fn metric_labels() {
        let rows = [
            (api("x"), "kube"),
            (Error::Unnamed, "unnamed"),
            (Error::Template("t".into()), "template"),
            (
                Error::BadLifecycle {
                    pod: "p".into(),
                    state: "s".into(),
                },
                "lifecycle",
            ),
        ];
        for (err, want) in rows {
            assert_eq!(err.metric_label(), want, "{err}");
        }
    }

    #[test]
    fn only_spec_errors_have_a_retry_floor() {
        let rows = [
            (
                Error::BadLifecycle {
                    pod: "p".into(),
                    state: "PreparingDelete".into(),
                },
                SPEC_ERROR_RETRY,
            ),
            (
                Error::InPlaceOnly {
                    pod: "p".into(),
                    reason: crate::inplace::NotInPlace::NoOldRevision,
                },
                SPEC_ERROR_RETRY,
            ),
            (Error::Template("bad".into()), SPEC_ERROR_RETRY),
            (Error::Unnamed, Duration::ZERO),
        ];
        for (err, want) in rows {
            assert_eq!(err.retry_floor(), want, "{err}");
        }
    }
}
