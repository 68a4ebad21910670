//! Stopping a container the way the kubelet would: run its preStop hook (exec through CRI, or a
//! plain-HTTP GET), then StopContainer with what is left of the grace period.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, LifecycleHandler};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::criruntime::{ContainerInfo, CriClient, CriError};

/// The kubelet never stops a container with less than this.
pub const MIN_GRACE_SECONDS: i64 = 2;

/// Grace left for StopContainer after a hook that took `spent`, floored like the kubelet.
pub fn remaining_grace(grace: i64, spent: Duration) -> i64 {
    (grace - spent.as_secs() as i64).max(MIN_GRACE_SECONDS)
}

/// Resolves an httpGet port (number or container port name).
pub fn resolve_port(port: &IntOrString, ports: &[ContainerPort]) -> Option<u16> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).ok().filter(|p| *p > 0),
        IntOrString::String(s) => {
            if let Ok(n) = s.parse::<u16>() {
                return Some(n);
            }
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
        }
    }
}

/// Builds the HTTP/1.1 request line and headers of a hook GET.
pub fn http_request(action: &HTTPGetAction, host: &str, port: u16) -> String {
    let mut path = action.path.clone().unwrap_or_default();
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    let mut req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kruise-daemon\r\nConnection: close\r\n"
    );
    for h in action.http_headers.iter().flatten() {
        req.push_str(&format!("{}: {}\r\n", h.name, h.value));
    }
    req.push_str("\r\n");
    req
}

#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("exec hook: {0}")]
    Exec(#[from] CriError),
    #[error("exec hook exited with {code}: {output}")]
    ExitCode { code: i32, output: String },
    #[error("http hook: {0}")]
    Http(String),
}

async fn http_get(action: &HTTPGetAction, host: &str, port: u16) -> Result<(), HookError> {
    if action
        .scheme
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("HTTPS"))
    {
        return Err(HookError::Http(
            "HTTPS hooks are not supported by kruise-daemon".into(),
        ));
    }
    let mut stream = TcpStream::connect((host, port))
        .await
        .map_err(|e| HookError::Http(format!("connect {host}:{port}: {e}")))?;
    stream
        .write_all(http_request(action, host, port).as_bytes())
        .await
        .map_err(|e| HookError::Http(e.to_string()))?;
    let mut head = vec![0u8; 64];
    let n = stream
        .read(&mut head)
        .await
        .map_err(|e| HookError::Http(e.to_string()))?;
    let line = String::from_utf8_lossy(&head[..n]);
    let code: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| HookError::Http(format!("bad response {line:?}")))?;
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(HookError::Http(format!("HTTP {code}")))
    }
}

/// Runs the hook, bounded by `budget`. Errors are returned for logging only: like the kubelet,
/// a failed hook does not prevent the stop.
pub async fn run_hook(
    cri: &CriClient,
    container: &ContainerInfo,
    hook: &LifecycleHandler,
    ports: &[ContainerPort],
    budget: Duration,
) -> Result<(), HookError> {
    let fut = async {
        if let Some(cmd) = hook.exec.as_ref().and_then(|e| e.command.clone()) {
            let out = cri.exec_sync(&container.id, cmd, budget).await?;
            if out.exit_code != 0 {
                let mut text = String::from_utf8_lossy(&out.stdout).to_string();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                return Err(HookError::ExitCode {
                    code: out.exit_code,
                    output: text.trim().to_string(),
                });
            }
            return Ok(());
        }
        if let Some(action) = &hook.http_get {
            let port = resolve_port(&action.port, ports)
                .ok_or_else(|| HookError::Http(format!("cannot resolve port {:?}", action.port)))?;
            let host = match action.host.clone().filter(|h| !h.is_empty()) {
                Some(h) => h,
                None => cri
                    .pod_sandbox_ip(&container.pod_sandbox_id)
                    .await?
                    .ok_or_else(|| HookError::Http("pod has no IP".into()))?,
            };
            return http_get(action, &host, port).await;
        }
        if let Some(sleep) = &hook.sleep {
            tokio::time::sleep(Duration::from_secs(sleep.seconds.max(0) as u64)).await;
        }
        Ok(())
    };
    match tokio::time::timeout(budget, fut).await {
        Ok(r) => r,
        Err(_) => {
            tracing::info!(container = %container.name, "preStop hook did not finish within the grace period");
            Ok(())
        }
    }
}

/// preStop (if any) then StopContainer with the rest of `grace` seconds.
pub async fn stop_with_hook(
    cri: &CriClient,
    container: &ContainerInfo,
    hook: Option<&LifecycleHandler>,
    ports: &[ContainerPort],
    grace: i64,
) -> Result<(), CriError> {
    let mut left = grace.max(0);
    if let Some(h) = hook
        && left > 0
    {
        let start = Instant::now();
        if let Err(e) = run_hook(cri, container, h, ports, Duration::from_secs(left as u64)).await {
            tracing::warn!(container = %container.name, id = %container.id, error = %e, "preStop hook failed");
        }
        left = remaining_grace(left, start.elapsed());
    }
    let left = left.max(MIN_GRACE_SECONDS);
    tracing::info!(container = %container.name, id = %container.id, grace = left, "stopping container");
    cri.stop_container(&container.id, left).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::HTTPHeader;

    #[test]
    fn grace_is_reduced_by_the_hook_and_floored() {
        assert_eq!(remaining_grace(30, Duration::from_secs(10)), 20);
        assert_eq!(remaining_grace(30, Duration::from_secs(29)), 2);
        assert_eq!(remaining_grace(5, Duration::from_secs(60)), 2);
    }

    #[test]
    fn ports_resolve_by_number_or_name() {
        let ports = vec![ContainerPort {
            name: Some("http".into()),
            container_port: 8080,
            ..Default::default()
        }];
        assert_eq!(resolve_port(&IntOrString::Int(80), &ports), Some(80));
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &ports),
            Some(8080)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("81".into()), &ports),
            Some(81)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("nope".into()), &ports),
            None
        );
        assert_eq!(resolve_port(&IntOrString::Int(0), &ports), None);
    }

    #[test]
    fn http_request_has_path_and_headers() {
        let a = HTTPGetAction {
            path: Some("quit".into()),
            http_headers: Some(vec![HTTPHeader {
                name: "X-A".into(),
                value: "1".into(),
            }]),
            ..Default::default()
        };
        let r = http_request(&a, "10.0.0.1", 8080);
        assert!(r.starts_with("GET /quit HTTP/1.1\r\nHost: 10.0.0.1:8080\r\n"));
        assert!(r.contains("X-A: 1\r\n"));
        assert!(r.ends_with("\r\n\r\n"));
    }
}
