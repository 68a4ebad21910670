//! One run of a probe: exec in the container through CRI `ExecSync`, or a TCP connect or HTTP
//! GET (HTTPS without certificate verification, see [`super::tls`]) against the Pod IP, each
//! cut off at the probe's timeout (kubelet: 1 s by default).

use std::time::Duration;

use k8s_openapi::api::core::v1::Probe;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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

/// Whether an httpGet probe speaks TLS (`scheme: HTTPS`; the webhook admits only upper case,
/// the kubelet lower-cases it).
fn is_https(action: &k8s_openapi::api::core::v1::HTTPGetAction) -> bool {
    action
        .scheme
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("HTTPS"))
}

async fn http_get(
    action: &k8s_openapi::api::core::v1::HTTPGetAction,
    host: &str,
    port: u16,
) -> Outcome {
    let stream = match TcpStream::connect((host, port)).await {
        Ok(s) => s,
        Err(e) => return (false, format!("GET {host}:{port}: {e}")),
    };
    if !is_https(action) {
        return exchange(stream, action, host, port).await;
    }
    match super::tls::connect(host, stream).await {
        Ok(tls) => exchange(tls, action, host, port).await,
        Err(e) => (false, clip(format!("GET https://{host}:{port}: {e}"))),
    }
}

/// Sends the GET over `stream` and judges the status line (the kubelet's rule: 2xx and 3xx
/// succeed).
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    action: &k8s_openapi::api::core::v1::HTTPGetAction,
    host: &str,
    port: u16,
) -> Outcome {
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
        Some(c) if (200..400).contains(&c) => (true, format!("HTTP {c}")),
        Some(c) => (false, format!("HTTP probe failed with statuscode: {c}")),
        None => (false, format!("GET {host}:{port}: bad response")),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::HTTPGetAction;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    use tokio::net::TcpListener;

    use super::*;

    /// A one-connection HTTPS server with a fresh self-signed certificate (for a name that is
    /// not the address dialled, as a Pod's usually is) answering `status`.
    async fn https_server(status: &'static str) -> u16 {
        let ck = rcgen::generate_simple_self_signed(vec!["svc.example".to_owned()]).unwrap();
        let cert = CertificateDer::from(ck.cert.der().to_vec());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            // A plain-HTTP client makes the handshake fail; nothing to answer then.
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut req = vec![0u8; 1024];
            let _ = tls.read(&mut req).await;
            let resp = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
            let _ = tls.write_all(resp.as_bytes()).await;
            let _ = tls.shutdown().await;
        });
        port
    }

    fn action(scheme: &str) -> HTTPGetAction {
        HTTPGetAction {
            path: Some("/healthz".into()),
            scheme: Some(scheme.into()),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn https_probes_succeed_against_a_self_signed_server() {
        let port = https_server("200 OK").await;
        assert_eq!(
            http_get(&action("HTTPS"), "127.0.0.1", port).await,
            (true, "HTTP 200".to_owned())
        );
    }

    #[tokio::test]
    async fn https_probes_judge_the_status_code() {
        let port = https_server("503 Service Unavailable").await;
        assert_eq!(
            http_get(&action("HTTPS"), "127.0.0.1", port).await,
            (false, "HTTP probe failed with statuscode: 503".to_owned())
        );
    }

    #[tokio::test]
    async fn plain_http_against_a_tls_server_fails() {
        let port = https_server("200 OK").await;
        let (ok, _) = http_get(&action("HTTP"), "127.0.0.1", port).await;
        assert!(!ok);
    }

    #[tokio::test]
    async fn https_against_a_plain_server_fails_naming_tls() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let _ = tcp
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .await;
        });
        let (ok, msg) = http_get(&action("HTTPS"), "127.0.0.1", port).await;
        assert!(!ok);
        assert!(msg.contains("TLS handshake"), "{msg}");
    }
}
