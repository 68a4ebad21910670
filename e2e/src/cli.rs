//! Driving the real `kubectl-kruise` binary: as a child process (exit code, stdout, stderr) and
//! inside a detached tmux session for the live view.
//!
//! The binary is not built by the suite (it would fight other builds for the shared target dir);
//! a missing binary fails the test with the command that builds it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::{Error, Result, repo_root};

pub const BUILD_HINT: &str = "run `cargo build -p kubectl-kruise` first";

fn missing(what: String) -> Error {
    Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, what))
}

/// The newest modification time of the files under `dir` (the CLI's sources).
fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(t);
    }
    newest
}

/// The `kubectl-kruise` binary: `$KUBECTL_KRUISE_BIN`, else `$CARGO_TARGET_DIR/debug`, else the
/// workspace's `target/debug`.
pub fn binary() -> Result<PathBuf> {
    let path = match std::env::var_os("KUBECTL_KRUISE_BIN") {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo_root().join("target"))
            .join("debug")
            .join("kubectl-kruise"),
    };
    if !path.is_file() {
        return Err(missing(format!(
            "kubectl-kruise not found at {}: {BUILD_HINT}",
            path.display()
        )));
    }
    // A stale binary would test yesterday's CLI; say so rather than fail, since the sources may
    // have been touched without a behaviour change.
    let built = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
    if let (Some(built), Some(src)) = (built, newest_mtime(&repo_root().join("cli/src")))
        && src > built
    {
        eprintln!(
            "warning: {} is older than cli/src: {BUILD_HINT}",
            path.display()
        );
    }
    Ok(path)
}

/// The kubeconfig the suite uses: the first file of `$KUBECONFIG`, else the local cluster's.
pub fn kubeconfig() -> Result<PathBuf> {
    let path = match std::env::var_os("KUBECONFIG") {
        Some(v) => std::env::split_paths(&v)
            .next()
            .unwrap_or_else(|| repo_root().join(".cluster/kubeconfig")),
        None => repo_root().join(".cluster/kubeconfig"),
    };
    if !path.is_file() {
        return Err(Error::NoCluster(format!(
            "kubeconfig {} not found",
            path.display()
        )));
    }
    Ok(path)
}

/// The outcome of one run of the CLI.
#[derive(Debug, Clone)]
pub struct Run {
    pub command: String,
    /// None when the run was killed (it outlived its limit) or died from a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` exited with {:?} after {:.1}s\n--- stdout ---\n{}--- stderr ---\n{}",
            self.command,
            self.code,
            self.elapsed.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }
}

impl Run {
    /// Every non-empty stdout line parsed as JSON (`-o json` prints one document per line).
    pub fn json_lines(&self) -> Result<Vec<Value>> {
        self.stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(Error::from))
            .collect()
    }

    /// Non-empty stderr lines.
    pub fn stderr_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| !l.trim().is_empty())
            .collect()
    }
}

/// The CLI bound to a kubeconfig and a namespace, both passed explicitly on every run.
#[derive(Debug, Clone)]
pub struct Kruise {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub namespace: String,
}

/// A run in the background, started by [`Kruise::spawn`].
pub struct Running {
    child: tokio::process::Child,
    command: String,
    started: Instant,
}

impl Running {
    /// Waits for the exit, killing the process if it outlives `limit` (then `code` is None).
    pub async fn finish(self, limit: Duration) -> Result<Run> {
        let Running {
            child,
            command,
            started,
        } = self;
        // kill_on_drop: a run that outlives the limit is killed when the future is dropped.
        match tokio::time::timeout(limit, child.wait_with_output()).await {
            Ok(out) => {
                let out = out?;
                Ok(Run {
                    command,
                    code: out.status.code(),
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                    elapsed: started.elapsed(),
                })
            }
            Err(_) => Ok(Run {
                command,
                code: None,
                stdout: String::new(),
                stderr: format!("killed: still running after {limit:?}"),
                elapsed: started.elapsed(),
            }),
        }
    }
}

impl Kruise {
    pub fn new(namespace: &str) -> Result<Self> {
        Ok(Self {
            bin: binary()?,
            kubeconfig: kubeconfig()?,
            namespace: namespace.to_string(),
        })
    }

    /// The global flags every run gets.
    pub fn global_args(&self) -> Vec<String> {
        vec![
            "--kubeconfig".to_string(),
            self.kubeconfig.display().to_string(),
            "-n".to_string(),
            self.namespace.clone(),
        ]
    }

    fn command_line(args: &[&str]) -> String {
        format!("kubectl-kruise -n NS {}", args.join(" "))
    }

    /// Starts the CLI in the background with stdout and stderr captured (not a terminal, so
    /// text output is one plain line per change).
    pub fn spawn(&self, args: &[&str]) -> Result<Running> {
        self.start(args, Stdio::null())
    }

    fn start(&self, args: &[&str], stdin: Stdio) -> Result<Running> {
        let child = tokio::process::Command::new(&self.bin)
            .args(self.global_args())
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        Ok(Running {
            child,
            command: Self::command_line(args),
            started: Instant::now(),
        })
    }

    /// Runs a prompt command with `input` on its stdin, closed after it.
    pub async fn run_with_input(&self, args: &[&str], input: &str) -> Result<Run> {
        use tokio::io::AsyncWriteExt;
        let mut running = self.start(args, Stdio::piped())?;
        if let Some(mut stdin) = running.child.stdin.take() {
            stdin.write_all(input.as_bytes()).await?;
        }
        running.finish(Duration::from_secs(60)).await
    }

    /// Runs the CLI to its end, killing it after `limit`.
    pub async fn run_for(&self, args: &[&str], limit: Duration) -> Result<Run> {
        self.spawn(args)?.finish(limit).await
    }

    /// Runs a command expected to return promptly (a patch, a `--watch=false` status).
    pub async fn run(&self, args: &[&str]) -> Result<Run> {
        self.run_for(args, Duration::from_secs(60)).await
    }
}

/// A detached tmux session on its own server (`tmux -S` with a private socket), so the suite
/// never touches anyone's tmux; dropping it kills that server, everything running in it, and the
/// socket file.
pub struct Tmux {
    socket: PathBuf,
    pub session: String,
}

impl Tmux {
    fn tmux(&self) -> std::process::Command {
        let mut c = std::process::Command::new("tmux");
        c.arg("-S").arg(&self.socket).env_remove("TMUX");
        c
    }

    fn check(&self, args: &[&str]) -> Result<String> {
        let out = self.tmux().args(args).output()?;
        if !out.status.success() {
            return Err(Error::Io(std::io::Error::other(format!(
                "tmux {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Starts `bash` (no rc files, prompt `prompt`) in a `width`x`height` detached session;
    /// `env` is exported into it.
    pub fn start(width: u16, height: u16, prompt: &str, env: &[(&str, String)]) -> Result<Self> {
        let suffix: u32 = rand::Rng::random_range(&mut rand::rng(), 0..0xff_ffff);
        let t = Tmux {
            socket: std::env::temp_dir().join(format!("kruise-e2e-tmux-{suffix:06x}")),
            session: "e2e".to_string(),
        };
        let (w, h) = (width.to_string(), height.to_string());
        let mut args = vec![
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "e2e",
            "-x",
            &w,
            "-y",
            &h,
        ];
        let env_args: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .chain([format!("PS1={prompt}"), "TERM=tmux-256color".to_string()])
            .collect();
        for e in &env_args {
            args.push("-e");
            args.push(e);
        }
        args.extend(["bash", "--norc", "--noprofile"]);
        // From here on the guard exists, so a failure below still kills the server.
        t.check(&args)?;
        Ok(t)
    }

    /// Types `text` literally (no key-name lookup).
    pub fn type_text(&self, text: &str) -> Result<()> {
        self.check(&["send-keys", "-t", &self.session, "-l", text])
            .map(|_| ())
    }

    /// Sends one named key, e.g. `Enter` or `q`.
    pub fn key(&self, key: &str) -> Result<()> {
        self.check(&["send-keys", "-t", &self.session, key])
            .map(|_| ())
    }

    /// The visible screen as plain text, one line per row.
    pub fn capture(&self) -> Result<String> {
        self.check(&["capture-pane", "-p", "-t", &self.session])
    }

    /// The size of the pane as tmux sees it.
    pub fn size(&self) -> Result<String> {
        self.check(&[
            "display-message",
            "-p",
            "-t",
            &self.session,
            "#{pane_width}x#{pane_height}",
        ])
        .map(|s| s.trim().to_string())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").output();
        // kill-server leaves the socket file behind.
        let _ = std::fs::remove_file(&self.socket);
    }
}
