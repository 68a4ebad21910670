//! CRI v1 client over a local unix socket: the only way the daemon touches containers and images.

pub mod discovery;
pub mod labels;

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tower::service_fn;

pub use discovery::SocketSource;
pub use labels::{ContainerInfo, State};

/// The runtime API version the kubelet announces in Version; runtimes ignore it in practice.
const KUBE_RUNTIME_API_VERSION: &str = "0.1.0";
/// Same ceiling as upstream (16 MiB): ListImages on a busy node is large.
const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;
/// Deadline for short unary calls (everything except PullImage and ExecSync).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Annotation upstream puts on the pull's sandbox config so runtimes' plugins can tell who
/// pulled; it is a CRI-side marker, not a Kubernetes object key.
const PULLING_IMAGE_BY: (&str, &str) = ("apps.kruise.io/pulling-image-by", "kruise-daemon");

#[derive(Debug, thiserror::Error)]
pub enum CriError {
    #[error("invalid runtime endpoint {0:?}: only unix:///absolute/path is supported")]
    InvalidEndpoint(String),
    #[error("no CRI socket found; tried {}", display_paths(.0))]
    NoSocket(Vec<PathBuf>),
    #[error("cannot reach the CRI runtime at {}: {source}", .path.display())]
    Connect {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("CRI Version on {} failed: {status}", .path.display())]
    Version {
        path: PathBuf,
        status: tonic::Status,
    },
    #[error("CRI {op} failed: {status}")]
    Call {
        op: &'static str,
        status: tonic::Status,
    },
    #[error("CRI {op} timed out after {timeout:?}")]
    Timeout { op: &'static str, timeout: Duration },
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl CriError {
    /// The gRPC status message alone, which is what a user wants to read (the registry's error
    /// text for a failed pull).
    pub fn message(&self) -> String {
        match self {
            CriError::Call { status, .. } | CriError::Version { status, .. } => {
                status.message().to_string()
            }
            other => other.to_string(),
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, CriError::Call { status, .. } if status.code() == tonic::Code::NotFound)
    }
}

/// Registry credentials for one pull attempt.
#[derive(Clone, PartialEq, Eq)]
pub struct Auth {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Auth {
    // Never log a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Image as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size: u64,
}

impl From<cri::Image> for ImageInfo {
    fn from(i: cri::Image) -> Self {
        ImageInfo {
            id: i.id,
            repo_tags: i.repo_tags,
            repo_digests: i.repo_digests,
            size: i.size,
        }
    }
}

/// Output of a command run in a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

/// A connected CRI runtime. Cheap to clone: the gRPC channel is shared.
#[derive(Clone, Debug)]
pub struct CriClient {
    /// The runtime's socket also serves its native API (containerd's content service).
    channel: Channel,
    runtime: RuntimeServiceClient<Channel>,
    image: ImageServiceClient<Channel>,
    socket: PathBuf,
    runtime_name: String,
    runtime_version: String,
}

fn with_timeout<T>(msg: T, timeout: Duration) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.set_timeout(timeout);
    req
}

fn call_err(op: &'static str) -> impl FnOnce(tonic::Status) -> CriError {
    move |status| CriError::Call { op, status }
}

impl CriClient {
    /// Connects to the first socket from `source` that answers CRI Version.
    pub async fn connect(source: &SocketSource) -> Result<Self, CriError> {
        let found = source.resolve(|p| p.exists());
        if found.is_empty() {
            return Err(CriError::NoSocket(source.candidates()));
        }
        let mut last = None;
        for path in found {
            match Self::connect_path(&path).await {
                Ok(c) => return Ok(c),
                Err(e) => {
                    // Debug only: a caller retrying in a loop reports the failure once.
                    tracing::debug!(socket = %path.display(), error = %e, "CRI socket did not answer");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| CriError::NoSocket(source.candidates())))
    }

    /// Connects to one socket and checks it with CRI Version.
    pub async fn connect_path(path: &Path) -> Result<Self, CriError> {
        let owned = path.to_path_buf();
        // The URI is ignored by the connector; tonic only needs a syntactically valid one.
        let channel = Endpoint::from_static("http://cri.local")
            .connect_timeout(Duration::from_secs(5))
            .connect_with_connector(service_fn(move |_: Uri| {
                let p = owned.clone();
                async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(p).await?)) }
            }))
            .await
            .map_err(|source| CriError::Connect {
                path: path.to_path_buf(),
                source,
            })?;
        let mut runtime =
            RuntimeServiceClient::new(channel.clone()).max_decoding_message_size(MAX_MESSAGE_SIZE);
        let image =
            ImageServiceClient::new(channel.clone()).max_decoding_message_size(MAX_MESSAGE_SIZE);
        let version = runtime
            .version(with_timeout(
                cri::VersionRequest {
                    version: KUBE_RUNTIME_API_VERSION.into(),
                },
                Duration::from_secs(10),
            ))
            .await
            .map_err(|status| CriError::Version {
                path: path.to_path_buf(),
                status,
            })?
            .into_inner();
        tracing::info!(
            socket = %path.display(),
            runtime = %version.runtime_name,
            runtime_version = %version.runtime_version,
            cri_api = %version.runtime_api_version,
            "connected to CRI runtime"
        );
        Ok(CriClient {
            channel,
            runtime,
            image,
            socket: path.to_path_buf(),
            runtime_name: version.runtime_name,
            runtime_version: version.runtime_version,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `containerd`, `cri-o`…: the prefix of the container IDs the kubelet reports.
    pub fn runtime_name(&self) -> &str {
        &self.runtime_name
    }

    pub fn runtime_version(&self) -> &str {
        &self.runtime_version
    }

    /// The connection to the runtime's socket, for its non-CRI services.
    pub fn channel(&self) -> Channel {
        self.channel.clone()
    }

    /// The raw RuntimeService client, for calls this wrapper does not cover (integration tests
    /// create sandboxes with it).
    pub fn runtime_service(&self) -> RuntimeServiceClient<Channel> {
        self.runtime.clone()
    }

    // ---- ImageService ----

    /// Pulls `image` (a full reference, `repo:tag`) and returns the image reference the runtime
    /// reports. `timeout` bounds the whole pull.
    pub async fn pull_image(
        &self,
        image: &str,
        auth: Option<&Auth>,
        sandbox_labels: std::collections::HashMap<String, String>,
        sandbox_annotations: std::collections::HashMap<String, String>,
        timeout: Duration,
    ) -> Result<String, CriError> {
        let mut annotations = sandbox_annotations;
        annotations.insert(PULLING_IMAGE_BY.0.into(), PULLING_IMAGE_BY.1.into());
        let req = cri::PullImageRequest {
            image: Some(cri::ImageSpec {
                image: image.to_string(),
                ..Default::default()
            }),
            auth: auth.map(|a| cri::AuthConfig {
                username: a.username.clone(),
                password: a.password.clone(),
                ..Default::default()
            }),
            sandbox_config: Some(cri::PodSandboxConfig {
                labels: sandbox_labels,
                annotations,
                ..Default::default()
            }),
        };
        let mut client = self.image.clone();
        // The local timer fires first (the gRPC deadline is a backstop), so a slow pull reports
        // our own timeout message rather than the transport's.
        let grpc_deadline = timeout + Duration::from_secs(5);
        match tokio::time::timeout(timeout, client.pull_image(with_timeout(req, grpc_deadline)))
            .await
        {
            Err(_) => Err(CriError::Timeout {
                op: "PullImage",
                timeout,
            }),
            Ok(Err(status)) if status.code() == tonic::Code::DeadlineExceeded => {
                Err(CriError::Timeout {
                    op: "PullImage",
                    timeout,
                })
            }
            Ok(r) => Ok(r.map_err(call_err("PullImage"))?.into_inner().image_ref),
        }
    }

    /// The image if the runtime has it, `None` otherwise.
    pub async fn image_status(&self, image: &str) -> Result<Option<ImageInfo>, CriError> {
        let req = cri::ImageStatusRequest {
            image: Some(cri::ImageSpec {
                image: image.to_string(),
                ..Default::default()
            }),
            verbose: false,
        };
        let resp = self
            .image
            .clone()
            .image_status(with_timeout(req, CALL_TIMEOUT))
            .await
            .map_err(call_err("ImageStatus"))?;
        Ok(resp.into_inner().image.map(ImageInfo::from))
    }

    pub async fn list_images(&self) -> Result<Vec<ImageInfo>, CriError> {
        let resp = self
            .image
            .clone()
            .list_images(with_timeout(
                cri::ListImagesRequest { filter: None },
                CALL_TIMEOUT,
            ))
            .await
            .map_err(call_err("ListImages"))?;
        Ok(resp
            .into_inner()
            .images
            .into_iter()
            .map(ImageInfo::from)
            .collect())
    }

    // ---- RuntimeService ----

    pub async fn list_containers(
        &self,
        filter: cri::ContainerFilter,
    ) -> Result<Vec<cri::Container>, CriError> {
        let resp = self
            .runtime
            .clone()
            .list_containers(with_timeout(
                cri::ListContainersRequest {
                    filter: Some(filter),
                },
                CALL_TIMEOUT,
            ))
            .await
            .map_err(call_err("ListContainers"))?;
        Ok(resp.into_inner().containers)
    }

    pub async fn container_status(&self, id: &str) -> Result<cri::ContainerStatus, CriError> {
        let resp = self
            .runtime
            .clone()
            .container_status(with_timeout(
                cri::ContainerStatusRequest {
                    container_id: id.to_string(),
                    verbose: false,
                },
                CALL_TIMEOUT,
            ))
            .await
            .map_err(call_err("ContainerStatus"))?;
        resp.into_inner().status.ok_or(CriError::Call {
            op: "ContainerStatus",
            status: tonic::Status::not_found(format!("no status for container {id}")),
        })
    }

    /// Every container the runtime holds for a pod (all attempts), with kubelet metadata.
    pub async fn pod_containers(&self, pod_uid: &str) -> Result<Vec<ContainerInfo>, CriError> {
        let filter = cri::ContainerFilter {
            label_selector: [(labels::POD_UID_LABEL.to_string(), pod_uid.to_string())].into(),
            ..Default::default()
        };
        let mut out = Vec::new();
        for c in self.list_containers(filter).await? {
            match self.container_status(&c.id).await {
                Ok(s) => out.push(ContainerInfo::from_status(&s, &c.pod_sandbox_id)),
                // Removed between the list and the status call: not an error for the caller.
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e),
            }
        }
        out.sort_by_key(|c| std::cmp::Reverse(c.created_at));
        Ok(out)
    }

    /// Stops a container, giving it `grace_seconds` between SIGTERM and SIGKILL.
    pub async fn stop_container(&self, id: &str, grace_seconds: i64) -> Result<(), CriError> {
        let req = cri::StopContainerRequest {
            container_id: id.to_string(),
            timeout: grace_seconds,
        };
        // The call itself lasts up to the grace period.
        let deadline = CALL_TIMEOUT + Duration::from_secs(grace_seconds.max(0) as u64);
        self.runtime
            .clone()
            .stop_container(with_timeout(req, deadline))
            .await
            .map_err(call_err("StopContainer"))?;
        Ok(())
    }

    /// Runs `cmd` in the container and waits for it at most `timeout`.
    pub async fn exec_sync(
        &self,
        id: &str,
        cmd: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput, CriError> {
        let req = cri::ExecSyncRequest {
            container_id: id.to_string(),
            cmd,
            timeout: timeout.as_secs() as i64,
        };
        let resp = self
            .runtime
            .clone()
            .exec_sync(with_timeout(req, timeout + Duration::from_secs(5)))
            .await
            .map_err(call_err("ExecSync"))?
            .into_inner();
        Ok(ExecOutput {
            stdout: resp.stdout,
            stderr: resp.stderr,
            exit_code: resp.exit_code,
        })
    }

    /// The pod IP of a sandbox, for httpGet hooks with no host.
    pub async fn pod_sandbox_ip(&self, sandbox_id: &str) -> Result<Option<String>, CriError> {
        let resp = self
            .runtime
            .clone()
            .pod_sandbox_status(with_timeout(
                cri::PodSandboxStatusRequest {
                    pod_sandbox_id: sandbox_id.to_string(),
                    verbose: false,
                },
                CALL_TIMEOUT,
            ))
            .await
            .map_err(call_err("PodSandboxStatus"))?
            .into_inner();
        Ok(resp
            .status
            .and_then(|s| s.network)
            .map(|n| n.ip)
            .filter(|ip| !ip.is_empty()))
    }
}
