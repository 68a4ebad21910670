//! Child processes a benchmark starts (a release manager or daemon): a guard that stops the
//! child by its PID however the benchmark ends, and the HTTP health probe that says it is up.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// Why a child never became healthy.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("exited ({0}) before it was healthy")]
    Exited(ExitStatus),
    #[error("not healthy after {0:?}")]
    Timeout(Duration),
    #[error("cannot check the process: {0}")]
    Io(#[from] std::io::Error),
}

/// Owns a started child: on drop it sends SIGTERM to the child's PID, waits up to the drop
/// grace for it to exit, then kills it; it also removes the child's PID file if one was written.
/// A grace of zero kills at once.
pub struct ProcessGuard {
    child: Child,
    drop_grace: Duration,
    pid_file: Option<PathBuf>,
}

impl ProcessGuard {
    /// Spawns `cmd`; the guard stops the child when dropped.
    pub fn spawn(cmd: &mut Command, drop_grace: Duration) -> std::io::Result<Self> {
        Ok(Self {
            child: cmd.spawn()?,
            drop_grace,
            pid_file: None,
        })
    }

    /// Records the child's PID in `path` (so scripts can stop it if this program is killed);
    /// the file goes when the guard does.
    pub fn write_pid_file(&mut self, path: PathBuf) -> std::io::Result<()> {
        std::fs::write(&path, self.pid().to_string())?;
        self.pid_file = Some(path);
        Ok(())
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// True while the child has not exited.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Polls `http://addr/path` until it answers 200; fails early when the child exits.
    pub async fn wait_healthy(
        &mut self,
        addr: &str,
        path: &str,
        timeout: Duration,
        every: Duration,
    ) -> Result<(), HealthError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(HealthError::Exited(status));
            }
            if http_ok(addr, path) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(HealthError::Timeout(timeout));
            }
            tokio::time::sleep(every).await;
        }
    }

    /// SIGTERM, then up to `grace` for the child to exit (without blocking the runtime); the
    /// guard kills it if it is still there when dropped.
    pub async fn stop(mut self, grace: Duration) {
        self.terminate();
        let deadline = Instant::now() + grace;
        while self.running() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn terminate(&self) {
        // By PID, through kill(1): the standard library only sends SIGKILL.
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
    }
}

impl Drop for ProcessGuard {
    fn drop(&mut self) {
        if self.running() {
            if !self.drop_grace.is_zero() {
                self.terminate();
                let deadline = Instant::now() + self.drop_grace;
                while self.running() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            if self.running() {
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
        if let Some(p) = &self.pid_file {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// One plain HTTP/1.1 GET of `path` on `addr`, true when the answer is 200 (the manager's and
/// the daemon's health servers both speak HTTP/1.1).
pub fn http_ok(addr: &str, path: &str) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if s.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf).unwrap_or(0);
    status_ok(&buf[..n])
}

/// The body of one plain HTTP/1.1 GET of `path` on `addr` when the answer is 200. A chunked
/// body (Go's HTTP server sends one when the handler sets no length, as OpenKruise's /metrics
/// does) is put back together.
pub fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    if !status_ok(&buf) {
        return None;
    }
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let chunked = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.trim().eq_ignore_ascii_case("chunked")
        })
    });
    if chunked {
        dechunk(body)
    } else {
        Some(body.to_string())
    }
}

/// The data of a chunked HTTP/1.1 body: hexadecimal size (extensions after `;` ignored), CRLF,
/// that many bytes, CRLF, until the zero-size chunk.
fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    loop {
        let (size, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// The value of the unlabelled sample `name` in a Prometheus text exposition.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Whether a response starts with a 200 status line (HTTP/1.0 or 1.1).
fn status_ok(head: &[u8]) -> bool {
    head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let cases: [(&[u8], bool); 5] = [
            (b"HTTP/1.1 200 OK\r\n", true),
            (b"HTTP/1.0 200 OK", true),
            (b"HTTP/1.1 503 Service", false),
            (b"HTTP/1.1 20", false),
            (b"", false),
        ];
        for (head, want) in cases {
            assert_eq!(status_ok(head), want, "{}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let cases: [(&str, Option<&str>); 4] = [
            (
                "5\r\nhello\r\n7;x=1\r\n world\n\r\n0\r\n\r\n",
                Some("hello world\n"),
            ),
            ("0\r\n\r\n", Some("")),
            // cut short, or a size that is not hexadecimal
            ("5\r\nhel", None),
            ("zz\r\nhello\r\n0\r\n\r\n", None),
        ];
        for (body, want) in cases {
            assert_eq!(dechunk(body).as_deref(), want, "{body:?}");
        }
    }

    #[test]
    fn metric_reads_the_unlabelled_sample() {
        let text = "# HELP kruise_manager_heap_live_bytes live\n\
                    kruise_manager_heap_live_bytes 123456\n\
                    kruise_manager_heap_live_bytes_other 9\n\
                    kruise_manager_leader 1\n";
        assert_eq!(
            metric(text, "kruise_manager_heap_live_bytes"),
            Some(123456.0)
        );
        assert_eq!(metric(text, "kruise_manager_leader"), Some(1.0));
        assert_eq!(metric(text, "kruise_manager_heap_peak_bytes"), None);
    }

    #[test]
    fn get_returns_the_body_of_a_200_only() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut req = [0u8; 256];
                let _ = s.read(&mut req);
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nm 1\n");
            }
        });
        assert_eq!(http_get(&addr, "/metrics").as_deref(), Some("m 1\n"));
        assert_eq!(http_get(&serve_once("404 Not Found"), "/metrics"), None);
    }

    /// A one-shot server answering `status`; returns its address.
    fn serve_once(status: &'static str) -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut req = [0u8; 256];
                let _ = s.read(&mut req);
                let _ = s.write_all(
                    format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes(),
                );
            }
        });
        addr
    }

    #[test]
    fn probe_reads_the_status() {
        assert!(http_ok(&serve_once("200 OK"), "/healthz"));
        assert!(!http_ok(
            &serve_once("500 Internal Server Error"),
            "/healthz"
        ));
        // Nothing listens on a port just freed.
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port");
        assert!(!http_ok(&free.to_string(), "/healthz"));
    }

    #[test]
    fn guard_stops_the_child_and_removes_its_pid_file() {
        let pid_file = std::env::temp_dir().join(format!("bench-guard-{}.pid", std::process::id()));
        let mut g = ProcessGuard::spawn(Command::new("sleep").arg("30"), Duration::from_secs(5))
            .expect("sleep");
        g.write_pid_file(pid_file.clone()).expect("pid file");
        let pid = g.pid();
        assert!(g.running());
        assert!(pid_file.exists());
        drop(g);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
        assert!(!pid_file.exists());
        // A grace of zero kills at once.
        let g =
            ProcessGuard::spawn(Command::new("sleep").arg("30"), Duration::ZERO).expect("sleep");
        let pid = g.pid();
        drop(g);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    #[tokio::test]
    async fn wait_healthy_fails_fast_when_the_child_exits() {
        let mut g = ProcessGuard::spawn(&mut Command::new("true"), Duration::ZERO).expect("true");
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port")
            .to_string();
        let r = g
            .wait_healthy(
                &free,
                "/healthz",
                Duration::from_secs(10),
                Duration::from_millis(20),
            )
            .await;
        assert!(matches!(r, Err(HealthError::Exited(_))), "{r:?}");
    }
}
