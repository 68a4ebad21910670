//! How Kruise-rs runs on the cluster under test, and the faults a test injects into it the way
//! that mode allows.
//!
//! - **Dev**: the manager and daemon are host processes started by `hack/dev-up.sh` (PID files in
//!   `.cluster/pids/`); a test may kill them and start them again with that script.
//! - **In cluster** (`KRUISE_E2E_INCLUSTER=1`, set by the e2e stages of `hack/test.sh`): they run from
//!   `deploy/` under their own ServiceAccounts. A test must never start a host process then: a
//!   dev-mode manager runs with admin rights, re-points the webhooks and would hide the shipped
//!   RBAC. Restarts go through the API, as a user would do them.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kruise_api::keys;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, ResourceExt};

use crate::{Error, Result, pod_ready, repo_root, wait_for};

/// Env that the e2e stages of `hack/test.sh` set.
pub const INCLUSTER_ENV: &str = "KRUISE_E2E_INCLUSTER";
/// Namespace the installed components run in.
pub const KRUISE_NS: &str = "kruise-system";
/// Label of the installed daemon's Pods (deploy/daemon/daemon.yaml).
pub const DAEMON_POD_SELECTOR: &str = "app.kubernetes.io/name=kruise-daemon";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Dev,
    InCluster,
}

/// The mode this run tests.
pub fn mode() -> Mode {
    match std::env::var(INCLUSTER_ENV).as_deref() {
        Ok("1") | Ok("true") => Mode::InCluster,
        _ => Mode::Dev,
    }
}

fn pid_file(name: &str) -> PathBuf {
    repo_root().join(format!(".cluster/pids/{name}.pid"))
}

/// The PID of a dev-mode process (from its PID file) if that process is alive.
pub fn dev_pid(name: &str) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pid_file(name))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    alive(pid).then_some(pid)
}

/// `kill -0`: the process exists.
pub fn alive(pid: i32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// SIGKILLs `pid` (a crash, no chance to clean up) and waits until it is gone.
async fn sigkill(pid: i32, what: &str) -> Result<()> {
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()?;
    if !killed.success() {
        return Err(Error::Mode(format!("kill -KILL {pid} ({what}) failed")));
    }
    wait_for(
        &format!("the killed {what} to exit"),
        Duration::from_secs(10),
        || async { Ok((!alive(pid)).then_some(())) },
    )
    .await?;
    Ok(())
}

/// In cluster, no dev-mode manager or daemon may run beside the installed ones: it would answer
/// health checks on the same ports, could take the manager Lease, and runs with admin rights.
pub fn check_isolation() -> Result<()> {
    if mode() != Mode::InCluster {
        return Ok(());
    }
    for name in ["kruise-manager", "kruise-daemon"] {
        if let Some(pid) = dev_pid(name) {
            return Err(Error::Mode(format!(
                "a dev-mode {name} (pid {pid}) runs beside the in-cluster install; stop it with \
                 `hack/dev-up.sh down`"
            )));
        }
    }
    Ok(())
}

/// The daemon process serving this host, whatever the mode: dev mode's PID file, or (in
/// cluster, where `check_isolation` guarantees no host daemon runs) the host's one
/// `kruise-daemon` process, which is the installed daemon's container.
pub fn daemon_pid() -> Result<i32> {
    match mode() {
        Mode::Dev => dev_pid("kruise-daemon")
            .ok_or_else(|| Error::Mode("no dev-mode kruise-daemon runs (hack/dev-up.sh)".into())),
        Mode::InCluster => {
            check_isolation()?;
            let out = Command::new("pgrep")
                .args(["-x", "kruise-daemon"])
                .output()?;
            let pids: Vec<i32> = String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            match pids.as_slice() {
                [pid] => Ok(*pid),
                _ => Err(Error::Mode(format!(
                    "expected one kruise-daemon process on this host, found {pids:?}"
                ))),
            }
        }
    }
}

/// SIGKILLs the daemon (a crash), then brings it back the way the mode allows: dev mode starts
/// it again with `hack/dev-up.sh`; in cluster its Pod is deleted, as a user restarts a daemon,
/// and the DaemonSet's new Pod must become Ready. Returns once a new daemon process serves.
pub async fn crash_daemon(client: &Client, between: impl AsyncFnOnce()) -> Result<()> {
    let pid = daemon_pid()?;
    let old_pod = match mode() {
        Mode::InCluster => Some(daemon_pod(client).await?),
        Mode::Dev => None,
    };
    sigkill(pid, "daemon").await?;
    between().await;
    match old_pod {
        None => {
            let up = Command::new(repo_root().join("hack/dev-up.sh"))
                .current_dir(repo_root())
                .env("KRUISE_SKIP_BUILD", "1")
                .output()?;
            if !up.status.success() {
                return Err(Error::Mode(format!(
                    "hack/dev-up.sh: {}",
                    String::from_utf8_lossy(&up.stderr)
                )));
            }
        }
        Some(old) => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
            let old_uid = old.uid().unwrap_or_default();
            match pods.delete(&old.name_any(), &DeleteParams::default()).await {
                // Already gone is what we want.
                Err(kube::Error::Api(ae)) if ae.code == 404 => {}
                r => {
                    r?;
                }
            }
            wait_for(
                "a new daemon Pod to be Ready",
                Duration::from_secs(120),
                || async {
                    let p = daemon_pod(client).await.ok();
                    Ok(
                        p.filter(|p| p.uid().unwrap_or_default() != old_uid && pod_ready(p))
                            .map(|_| ()),
                    )
                },
            )
            .await?;
        }
    }
    // In cluster the old container may still be shutting down for a moment.
    wait_for(
        "one new daemon process",
        Duration::from_secs(60),
        || async { Ok(daemon_pid().ok().filter(|p| *p != pid).map(|_| ())) },
    )
    .await
}

/// The installed daemon's Pod (the local cluster has one node, so one Pod).
pub async fn daemon_pod(client: &Client) -> Result<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
    let list = pods
        .list(&ListParams::default().labels(DAEMON_POD_SELECTOR))
        .await?;
    list.items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .ok_or_else(|| Error::Mode("no kruise-daemon Pod in kruise-system".into()))
}

/// Label of the installed manager's Pods (deploy/manager/manager.yaml).
pub const MANAGER_POD_SELECTOR: &str = "app.kubernetes.io/name=kruise-manager";

/// The namespace the running manager keeps its namespaced objects in (the SidecarSets'
/// ControllerRevisions among them), read from the manager itself rather than assumed: in dev
/// mode the `POD_NAMESPACE` of the host process's environment (what `hack/dev-up.sh` gave it;
/// unset means the manager's default, [`keys::KRUISE_NAMESPACE`]); in cluster the namespace of
/// the installed manager's Pods.
pub async fn manager_namespace(client: &Client) -> Result<String> {
    match mode() {
        Mode::Dev => {
            let pid = dev_pid("kruise-manager").ok_or_else(|| {
                Error::Mode("no dev-mode kruise-manager runs (hack/dev-up.sh)".into())
            })?;
            let environ = std::fs::read(format!("/proc/{pid}/environ"))?;
            Ok(env_value(&environ, keys::ENV_POD_NAMESPACE)
                .filter(|ns| !ns.is_empty())
                .unwrap_or_else(|| keys::KRUISE_NAMESPACE.to_owned()))
        }
        Mode::InCluster => {
            let pods: Api<Pod> = Api::all(client.clone());
            let list = pods
                .list(&ListParams::default().labels(MANAGER_POD_SELECTOR))
                .await?;
            let mut namespaces: Vec<String> = list
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| p.namespace())
                .collect();
            namespaces.sort();
            namespaces.dedup();
            match namespaces.as_slice() {
                [ns] => Ok(ns.clone()),
                _ => Err(Error::Mode(format!(
                    "expected the manager Pods ({MANAGER_POD_SELECTOR}) in one namespace, found {namespaces:?}"
                ))),
            }
        }
    }
}

/// The value of `name` in a `/proc/<pid>/environ` image (NUL-separated `NAME=value`).
fn env_value(environ: &[u8], name: &str) -> Option<String> {
    environ
        .split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=').map(str::to_owned))
}

/// Name of the manager's leader-election Lease in [`KRUISE_NS`].
pub const MANAGER_LEASE: &str = "kruise-manager";

/// The Pod holding the manager Lease (in cluster): the holder identity is `<pod>_<pid>`.
pub async fn manager_leader_pod(client: &Client) -> Result<String> {
    let lease =
        Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), KRUISE_NS)
            .get(MANAGER_LEASE)
            .await?;
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    match holder.split('_').next() {
        Some(pod) if !pod.is_empty() => Ok(pod.to_string()),
        _ => Err(Error::Mode(format!(
            "the {MANAGER_LEASE} Lease has no holder ({holder:?})"
        ))),
    }
}

/// Kills the leading manager without a chance to clean up, the way the mode allows: dev mode
/// SIGKILLs the host process and, after `between`, starts it again with `hack/dev-up.sh`; in
/// cluster the leader Pod is deleted with grace 0 (`between` runs right after) and a standby
/// replica must take the Lease. Returns once the kill has happened and (dev mode) a new
/// manager answers.
pub async fn kill_manager(client: &Client, between: impl AsyncFnOnce()) -> Result<()> {
    match mode() {
        Mode::Dev => {
            let pid = dev_pid("kruise-manager").ok_or_else(|| {
                Error::Mode("no dev-mode kruise-manager runs (hack/dev-up.sh)".into())
            })?;
            sigkill(pid, "manager").await?;
            between().await;
            let up = Command::new(repo_root().join("hack/dev-up.sh"))
                .current_dir(repo_root())
                .env("KRUISE_SKIP_BUILD", "1")
                .output()?;
            if !up.status.success() {
                return Err(Error::Mode(format!(
                    "hack/dev-up.sh: {}",
                    String::from_utf8_lossy(&up.stderr)
                )));
            }
            Ok(())
        }
        Mode::InCluster => {
            check_isolation()?;
            let leader = manager_leader_pod(client).await?;
            let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
            pods.delete(
                &leader,
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..Default::default()
                },
            )
            .await?;
            between().await;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_value_reads_one_variable_of_a_proc_environ() {
        let environ = b"PATH=/bin\0POD_NAMESPACE_X=no\0POD_NAMESPACE=team-kruise\0RUST_LOG=info\0";
        assert_eq!(
            env_value(environ, "POD_NAMESPACE").as_deref(),
            Some("team-kruise")
        );
        assert_eq!(env_value(environ, "HOME"), None);
        assert_eq!(
            env_value(b"POD_NAMESPACE=\0", "POD_NAMESPACE").as_deref(),
            Some("")
        );
    }
}
