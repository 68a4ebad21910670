//! Where the CRI socket lives. Pure: the file-system check is injected so the order is testable.

use std::path::{Path, PathBuf};

use super::CriError;

/// Socket files probed under the host run directory, in the order upstream kruise-daemon v1.9
/// probes them: containerd first (both layouts), then CRI-O, then cri-dockerd (plain and k3s
/// layouts). One addition of ours: k3s's embedded containerd (`/run/k3s/containerd/`), after
/// the plain containerd paths, which upstream only reaches through `--socket-file`.
pub const KNOWN_SOCKETS: &[&str] = &[
    "containerd.sock",
    "containerd/containerd.sock",
    "k3s/containerd/containerd.sock",
    "crio.sock",
    "crio/crio.sock",
    "cri-dockerd.sock",
    "cri-dockerd/cri-dockerd.sock",
];

/// How the operator told us to find the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketSource {
    /// `--runtime-endpoint unix:///…`: exactly this socket, nothing else is tried.
    Endpoint(PathBuf),
    /// `--socket-file NAME`: this file name under the run directory.
    FileName { var_run: PathBuf, name: String },
    /// Probe [`KNOWN_SOCKETS`] under the run directory.
    Discover { var_run: PathBuf },
}

impl SocketSource {
    /// Builds the source from the three flags; the endpoint wins over the file name.
    pub fn from_flags(
        endpoint: Option<&str>,
        socket_file: Option<&str>,
        var_run: &Path,
    ) -> Result<Self, CriError> {
        if let Some(ep) = endpoint.filter(|e| !e.is_empty()) {
            return Ok(SocketSource::Endpoint(parse_endpoint(ep)?));
        }
        if let Some(name) = socket_file.filter(|n| !n.is_empty()) {
            return Ok(SocketSource::FileName {
                var_run: var_run.to_path_buf(),
                name: name.to_string(),
            });
        }
        Ok(SocketSource::Discover {
            var_run: var_run.to_path_buf(),
        })
    }

    /// Every path this source may yield, in probe order (for error messages).
    pub fn candidates(&self) -> Vec<PathBuf> {
        match self {
            SocketSource::Endpoint(p) => vec![p.clone()],
            SocketSource::FileName { var_run, name } => vec![var_run.join(name)],
            SocketSource::Discover { var_run } => {
                KNOWN_SOCKETS.iter().map(|s| var_run.join(s)).collect()
            }
        }
    }

    /// The candidates that exist, in probe order. An explicit endpoint is returned even when
    /// it does not exist yet, so that the connect error names it.
    pub fn resolve(&self, exists: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
        match self {
            SocketSource::Endpoint(p) => vec![p.clone()],
            _ => self
                .candidates()
                .into_iter()
                .filter(|p| exists(p))
                .collect(),
        }
    }
}

/// Accepts `unix:///abs/path` or a bare absolute path; anything else (tcp, npipe) is refused
/// because the daemon only talks to a local runtime.
pub fn parse_endpoint(endpoint: &str) -> Result<PathBuf, CriError> {
    let path = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
    if path.starts_with('/') {
        Ok(PathBuf::from(path))
    } else {
        Err(CriError::InvalidEndpoint(endpoint.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_follows_upstream_order() {
        let src = SocketSource::from_flags(None, None, Path::new("/host/run")).unwrap();
        let all = src.candidates();
        let names: Vec<_> = all
            .iter()
            .map(|p| p.strip_prefix("/host/run").expect("under var_run"))
            .map(|p| p.display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "containerd.sock",
                "containerd/containerd.sock",
                "k3s/containerd/containerd.sock",
                "crio.sock",
                "crio/crio.sock",
                "cri-dockerd.sock",
                "cri-dockerd/cri-dockerd.sock",
            ]
        );
    }

    #[test]
    fn discovery_keeps_only_existing_sockets_in_order() {
        let src = SocketSource::from_flags(None, None, Path::new("/r")).unwrap();
        let found = src.resolve(|p| {
            p == Path::new("/r/cri-dockerd.sock") || p == Path::new("/r/containerd/containerd.sock")
        });
        assert_eq!(
            found,
            vec![
                PathBuf::from("/r/containerd/containerd.sock"),
                PathBuf::from("/r/cri-dockerd.sock")
            ]
        );
        assert!(src.resolve(|_| false).is_empty());
    }

    #[test]
    fn endpoint_flag_wins_and_is_not_probed() {
        let src = SocketSource::from_flags(
            Some("unix:///run/containerd/containerd.sock"),
            Some("crio.sock"),
            Path::new("/var/run"),
        )
        .unwrap();
        assert_eq!(
            src.resolve(|_| false),
            vec![PathBuf::from("/run/containerd/containerd.sock")]
        );
    }

    #[test]
    fn socket_file_flag_is_under_var_run() {
        let src =
            SocketSource::from_flags(None, Some("crio.sock"), Path::new("/hostvarrun")).unwrap();
        assert_eq!(
            src.candidates(),
            vec![PathBuf::from("/hostvarrun/crio.sock")]
        );
        assert!(src.resolve(|_| false).is_empty());
    }

    #[test]
    fn endpoint_parsing() {
        assert_eq!(
            parse_endpoint("/a/b.sock").unwrap(),
            PathBuf::from("/a/b.sock")
        );
        assert_eq!(
            parse_endpoint("unix:///a/b.sock").unwrap(),
            PathBuf::from("/a/b.sock")
        );
        assert!(parse_endpoint("tcp://1.2.3.4:10").is_err());
        assert!(parse_endpoint("unix://relative.sock").is_err());
    }
}
