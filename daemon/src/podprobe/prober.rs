//! One run of a probe: exec in the container through CRI `ExecSync`, or a TCP connect or HTTP
//! GET against the Pod IP, each cut off at the probe's timeout (kubelet: 1 s by default).

use std::time::Duration;

use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::criruntime::CriClient;
use crate::criruntime::State;
use crate::criruntime::labels::newest_by_name;
use crate::prestop::http_request;

/// Longest message kept from a probe's output (the NodePodProbe is shared by the whole node).
const MAX_MESSAGE: usize = 1024;

/// Where a probe runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub pod_uid: String,
    pub pod_ip: String,
    pub container: String,
}

/// The probe's outcome: success, and the output (success) or the error (failure).
pub type Outcome = (bool, String);

fn clip(mut s: String) -> String {
    let s2 = s.trim().to_owned();
    s = s2;
    if s.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

/// The probe's timeout (`timeoutSeconds`, at least 1 s).
pub fn timeout(probe: &Probe) -> Duration {
    Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64)
}

fn port(p: &IntOrString) -> Result<u16, String> {
    match p {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("invalid port {n}")),
        IntOrString::String(s) => Err(format!("named port {s:?} not found in the container")),
    }
}

/// Runs `probe` once. `container_id` caches the container across runs; it is looked up again
/// when unset or when the runtime no longer knows it.
pub async fn run_once(
    cri: &CriClient,
    target: &Target,
    probe: &Probe,
    container_id: &mut Option<String>,
) -> Outcome {
    let limit = timeout(probe);
    if let Some(exec) = &probe.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        if container_id.is_none() {
            match cri.pod_containers(&target.pod_uid).await {
                Ok(cs) => {
                    *container_id = newest_by_name(&cs, &target.container)
                        .filter(|c| c.state == State::Running)
                        .map(|c| c.id.clone());
                }
                Err(e) => return (false, clip(format!("container runtime: {e}"))),
            }
        }
        let Some(id) = container_id.clone() else {
            return (
                false,
                format!("container {} is not running", target.container),
            );
        };
        // ExecSync has its own timeout; the outer one also cuts off a runtime that hangs.
        let call = cri.exec_sync(&id, cmd, limit);
        return match tokio::time::timeout(limit + Duration::from_secs(1), call).await {
            Err(_) => (
                false,
                format!("command timed out after {}s", limit.as_secs()),
            ),
            Ok(Err(e)) => {
                if e.is_not_found() {
                    *container_id = None;
                }
                (false, clip(format!("exec: {e}")))
            }
            Ok(Ok(out)) => {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                if out.exit_code == 0 {
                    (true, clip(text(&out.stdout)))
                } else {
                    let msg = format!("{}{}", text(&out.stdout), text(&out.stderr));
                    (false, clip(format!("exit code {}: {msg}", out.exit_code)))
                }
            }
        };
    }
    if target.pod_ip.is_empty() {
        return (false, "the Pod has no IP yet".into());
    }
    let ip = target.pod_ip.as_str();
    if let Some(tcp) = &probe.tcp_socket {
        let port = match port(&tcp.port) {
            Ok(p) => p,
            Err(e) => return (false, e),
        };
        let host = tcp.host.as_deref().filter(|h| !h.is_empty()).unwrap_or(ip);
        return match tokio::time::timeout(limit, TcpStream::connect((host, port))).await {
            Err(_) => (false, format!("dial tcp {host}:{port}: timeout")),
            Ok(Err(e)) => (false, format!("dial tcp {host}:{port}: {e}")),
            Ok(Ok(_)) => (true, String::new()),
        };
    }
    if let Some(http) = &probe.http_get {
        let port = match port(&http.port) {
            Ok(p) => p,
            Err(e) => return (false, e),
        };
        let host = http
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| ip.to_owned());
        return match tokio::time::timeout(limit, http_get(http, &host, port)).await {
            Err(_) => (false, format!("GET {host}:{port}: timeout")),
            Ok(r) => r,
        };
    }
    (false, "no handler (exec, tcpSocket or httpGet)".into())
}

async fn http_get(
    action: &k8s_openapi::api::core::v1::HTTPGetAction,
    host: &str,
    port: u16,
) -> Outcome {
    let mut stream = match TcpStream::connect((host, port)).await {
        Ok(s) => s,
        Err(e) => return (false, format!("GET {host}:{port}: {e}")),
    };
    if let Err(e) = stream
        .write_all(http_request(action, host, port).as_bytes())
        .await
    {
        return (false, format!("GET {host}:{port}: {e}"));
    }
    let mut head = vec![0u8; 256];
    let n = match stream.read(&mut head).await {
        Ok(n) => n,
        Err(e) => return (false, format!("GET {host}:{port}: {e}")),
    };
    let line = String::from_utf8_lossy(&head[..n]);
    let code: Option<u16> = line.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    match code {
        // The kubelet's rule: 2xx and 3xx succeed.
        Some(c) if (200..400).contains(&c) => (true, format!("HTTP {c}")),
        Some(c) => (false, format!("HTTP probe failed with statuscode: {c}")),
        None => (false, format!("GET {host}:{port}: bad response")),
    }
}
