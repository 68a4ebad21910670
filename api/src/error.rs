//! Errors of the helpers in this crate.

/// What can go wrong reading Kruise data stored in annotations and condition messages.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An annotation holds text that is not the JSON its key promises.
    #[error("annotation {key} does not hold valid JSON: {source}")]
    InvalidAnnotation {
        /// The annotation key.
        key: &'static str,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// A KruisePodReady condition message is not a JSON list of `{userAgent, key}`.
    #[error("KruisePodReady condition message is not a JSON list of readiness keys: {0}")]
    InvalidReadinessMessage(#[source] serde_json::Error),
    /// A value that should be one of a closed set of names is not.
    #[error("unknown {kind} {value:?}")]
    UnknownValue {
        /// What the value names (for example "lifecycle state").
        kind: &'static str,
        /// The value found.
        value: String,
    },
    /// Serializing a value to JSON failed (only possible with non-string map keys or a broken
    /// custom serializer, so it indicates a bug).
    #[error("cannot serialize {what} to JSON: {source}")]
    Serialize {
        /// What was being serialized.
        what: &'static str,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
