//! The Advanced StatefulSet controller's error and what the shared runner needs of it.

use kruise_api::apps::v1beta1::InvalidReserveOrdinal;

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
    #[error("StatefulSet has no namespace or uid")]
    Unnamed,
    #[error(transparent)]
    ReserveOrdinal(#[from] InvalidReserveOrdinal),
    #[error("{field}: {reason}")]
    Spec { field: &'static str, reason: String },
    #[error(
        "pod {pod}: podUpdatePolicy is InPlaceOnly but it cannot be updated in place: {reason}"
    )]
    InPlaceOnly { pod: String, reason: NotInPlace },
    #[error("revision template: {0}")]
    Template(String),
    #[error("not allowed to update pod {pod} in place in lifecycle state {state}")]
    Lifecycle {
        pod: String,
        state: kruise_api::appspub::LifecycleStateType,
    },
    #[error("cannot resize claim {claim} of pod {pod}: {reason}")]
    Resize {
        claim: String,
        pod: String,
        reason: String,
    },
    #[error("KruisePodReady condition of pod {pod}: {source}")]
    Readiness {
        pod: String,
        source: kruise_api::Error,
    },
}

impl Error {
    /// The text a condition shows: the API server's own message for a refused request.
    pub(super) fn condition_message(&self) -> String {
        match self {
            Error::Kube(e) if let Some(message) = e.api_message() => message.to_owned(),
            e => e.to_string(),
        }
    }
}

kruise_runtime::reconcile_error!(Error {
    Error::Revision(_) => "revision";
    Error::InPlace(_) => "inplace";
    Error::Serde(_) => "serde";
    Error::Unnamed => "unnamed";
    Error::ReserveOrdinal(_) | Error::Spec { .. } => "spec", floor: SPEC_ERROR_RETRY;
    Error::InPlaceOnly { .. } => "inplace_only", floor: SPEC_ERROR_RETRY;
    Error::Template(_) => "template", floor: SPEC_ERROR_RETRY;
    Error::Lifecycle { .. } => "lifecycle";
    Error::Resize { .. } => "resize", floor: SPEC_ERROR_RETRY;
    Error::Readiness { .. } => "readiness";
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::ReconcileError;
    use std::time::Duration;

    #[test]
    fn spec_errors_wait_and_name_the_field() {
        let e = Error::Spec {
            field: "spec.updateStrategy.rollingUpdate.maxUnavailable",
            reason: "\"x\" is neither an integer nor a percentage".into(),
        };
        assert!(
            e.to_string()
                .starts_with("spec.updateStrategy.rollingUpdate.maxUnavailable: ")
        );
        assert_eq!(e.retry_floor(), SPEC_ERROR_RETRY);
        assert_eq!(e.metric_label(), "spec");
        assert_eq!(Error::Unnamed.retry_floor(), Duration::ZERO);
    }
}
