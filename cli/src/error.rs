//! Errors a person can act on, and the exit codes scripts can rely on.

/// Documented exit codes (also listed in `kubectl kruise --help` and the README).
pub mod exit {
    pub const OK: i32 = 0;
    /// The rollout failed (FailedUpdate / ProgressDeadlineExceeded, a failed CRR or pull job) or
    /// an unexpected error happened.
    pub const FAILED: i32 = 1;
    /// Bad flags or arguments (clap uses 2 as well).
    pub const USAGE: i32 = 2;
    /// The rollout is paused and `--success-on-pause` was not given.
    pub const PAUSED: i32 = 3;
    /// `--timeout` elapsed before the rollout finished.
    pub const TIMEOUT: i32 = 4;
    /// `--watch=false` and the rollout is still progressing.
    pub const PROGRESSING: i32 = 5;
    /// The object, its kind or its CRD does not exist.
    pub const NOT_FOUND: i32 = 6;
    /// The API server refused the request (401/403).
    pub const FORBIDDEN: i32 = 7;
    /// The cluster could not be reached or the kubeconfig is unusable.
    pub const UNREACHABLE: i32 = 8;
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error("{kind} {name:?} not found in namespace {namespace:?}")]
    NotFound {
        kind: String,
        name: String,
        namespace: String,
    },
    /// Not found, with what to do about it (exit 6).
    #[error("{0}")]
    Missing(String),
    #[error(
        "the cluster does not serve {resource}.{group}: are the Kruise CRDs installed? (kubectl get crd {resource}.{group})"
    )]
    NotInstalled { resource: String, group: String },
    #[error("forbidden: you cannot {verb} {resource}{ns}; ask for RBAC on that verb and resource ({message})", ns = namespace.as_ref().map(|n| format!(" in namespace {n:?}")).unwrap_or_default())]
    Forbidden {
        verb: String,
        resource: String,
        namespace: Option<String>,
        message: String,
    },
    #[error("unauthorized: the cluster rejected the credentials of this kubeconfig context ({0})")]
    Unauthorized(String),
    #[error(
        "cannot reach the cluster: {0} (check --kubeconfig/--context and that the API server is up)"
    )]
    Unreachable(String),
    #[error("unusable kubeconfig: {0} (check --kubeconfig, $KUBECONFIG and --context)")]
    Kubeconfig(String),
    #[error("{0}")]
    Failed(String),
    #[error("{0}")]
    Paused(String),
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    Progressing(String),
    #[error("{0}")]
    Api(String),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Usage(_) => exit::USAGE,
            CliError::NotFound { .. } | CliError::NotInstalled { .. } | CliError::Missing(_) => {
                exit::NOT_FOUND
            }
            CliError::Forbidden { .. } | CliError::Unauthorized(_) => exit::FORBIDDEN,
            CliError::Unreachable(_) | CliError::Kubeconfig(_) => exit::UNREACHABLE,
            CliError::Paused(_) => exit::PAUSED,
            CliError::Timeout(_) => exit::TIMEOUT,
            CliError::Progressing(_) => exit::PROGRESSING,
            CliError::Failed(_) | CliError::Api(_) | CliError::Other(_) => exit::FAILED,
        }
    }

    /// Maps a client error, naming the object it was about when the server says "not found".
    pub fn from_kube(err: kube::Error, what: Option<(&str, &str, &str)>) -> Self {
        match err {
            kube::Error::Api(status) => {
                let code = status.code;
                let message = status.message.clone();
                match code {
                    404 => match what {
                        Some((kind, name, namespace)) => CliError::NotFound {
                            kind: kind.to_string(),
                            name: name.to_string(),
                            namespace: namespace.to_string(),
                        },
                        None => CliError::Api(message),
                    },
                    403 => forbidden_from_message(&message),
                    401 => CliError::Unauthorized(message),
                    _ => CliError::Api(format!("{message} (HTTP {code}, {})", status.reason)),
                }
            }
            kube::Error::HyperError(e) => CliError::Unreachable(e.to_string()),
            kube::Error::Service(e) => CliError::Unreachable(e.to_string()),
            kube::Error::HttpError(e) => CliError::Unreachable(e.to_string()),
            other => {
                let text = other.to_string();
                if text.contains("connect") || text.contains("dns") || text.contains("timed out") {
                    CliError::Unreachable(text)
                } else {
                    CliError::Api(text)
                }
            }
        }
    }
}

/// Pulls the verb, resource and namespace out of the API server's RBAC message, e.g.
/// `... User "bob" cannot patch resource "clonesets" in API group "apps.kruise.io" in the namespace "prod"`.
pub fn forbidden_from_message(message: &str) -> CliError {
    let verb = message
        .split_once("cannot ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("access")
        .to_string();
    let quoted_after = |marker: &str| -> Option<String> {
        let (_, rest) = message.split_once(marker)?;
        let rest = rest.strip_prefix('"')?;
        rest.split_once('"').map(|(v, _)| v.to_string())
    };
    let mut resource = quoted_after("resource ").unwrap_or_else(|| "the resource".to_string());
    if let Some(group) = quoted_after("API group ")
        && !group.is_empty()
    {
        resource = format!("{resource}.{group}");
    }
    CliError::Forbidden {
        verb,
        resource,
        namespace: quoted_after("the namespace "),
        message: message.to_string(),
    }
}

/// Shorthand used by the command modules.
pub type Result<T, E = CliError> = std::result::Result<T, E>;

/// Maps any client error that is not about a particular object.
pub fn kube_err(e: kube::Error) -> CliError {
    CliError::from_kube(e, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_names_verb_and_resource() {
        let msg = r#"clonesets.apps.kruise.io "web" is forbidden: User "bob" cannot patch resource "clonesets" in API group "apps.kruise.io" in the namespace "prod""#;
        let e = forbidden_from_message(msg);
        assert_eq!(e.exit_code(), exit::FORBIDDEN);
        let text = e.to_string();
        assert!(
            text.starts_with(
                r#"forbidden: you cannot patch clonesets.apps.kruise.io in namespace "prod""#
            ),
            "{text}"
        );
        let core = forbidden_from_message(
            r#"pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "x""#,
        );
        assert!(
            core.to_string()
                .starts_with(r#"forbidden: you cannot list pods in namespace "x""#),
            "{core}"
        );
    }

    #[test]
    fn exit_codes_are_distinct() {
        let codes = [
            exit::OK,
            exit::FAILED,
            exit::USAGE,
            exit::PAUSED,
            exit::TIMEOUT,
            exit::PROGRESSING,
            exit::NOT_FOUND,
            exit::FORBIDDEN,
            exit::UNREACHABLE,
        ];
        let mut sorted = codes.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), codes.len());
    }
}
