//! Injecting a fault and waiting until the cluster has repaired it. Processes are killed by
//! their PID: a manager replica's or the daemon's container process (containers run on this
//! host; the kubelet restarts them), or a cluster component's recorded PID through
//! `hack/cluster.sh restart`, which starts it again as the cluster does.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret};
use kruise_api::keys;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client, ResourceExt};

use super::schedule::Fault;
use crate::manager::MANAGER_DEPLOYMENT;
use crate::mode::{self, DAEMON_POD_SELECTOR, KRUISE_NS, MANAGER_POD_SELECTOR};
use crate::{node_ready, pod_ready, repo_root};

/// How long a fault may take to be repaired before the campaign calls it unsurvived. A
/// container killed again and again is restarted by the kubelet after a back-off that doubles
/// up to 5 minutes (CrashLoopBackOff): a long campaign's tenth daemon or manager kill waits
/// that long by design.
pub const REPAIR: Duration = Duration::from_secs(360);

type Res<T> = std::result::Result<T, String>;

/// Injects `fault`; returns what it did (for the history) once the fault has happened.
pub async fn inject(client: &Client, fault: Fault) -> Res<String> {
    match fault {
        Fault::ManagerLeader | Fault::ManagerStandby => kill_manager(client, fault).await,
        Fault::Daemon => kill_daemon().await,
        Fault::ApiServer => restart("kube-apiserver", "KILL").await,
        Fault::WatchCut => cut_connections().await,
        Fault::Etcd => restart("etcd", "KILL").await,
        Fault::Kubelet => restart("kubelet", "KILL").await,
        Fault::CertSecret => delete_cert_secret(client).await,
    }
}

/// Host processes named `comm` whose environment has `POD_NAME=pod` (a container of that Pod).
fn pod_pids(comm: &str, pod: Option<&str>) -> Vec<u32> {
    let want = pod.map(|p| format!("POD_NAME={p}"));
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
                && want.as_ref().is_none_or(|w| {
                    std::fs::read(format!("/proc/{pid}/environ"))
                        .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == w.as_bytes()))
                })
        })
        .collect()
}

fn sigkill(pid: u32) -> Res<()> {
    let st = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    st.success()
        .then_some(())
        .ok_or_else(|| format!("kill -KILL {pid} failed"))
}

/// Waits until `check` holds, polling; `what` names it in the error.
async fn until<F, Fut>(what: &str, limit: Duration, mut check: F) -> Res<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        if Instant::now() > deadline {
            return Err(format!("{what}: not after {limit:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

async fn kill_manager(client: &Client, fault: Fault) -> Res<String> {
    let leader = mode::manager_leader_pod(client)
        .await
        .map_err(|e| format!("the Lease's holder: {e}"))?;
    let target = if fault == Fault::ManagerLeader {
        leader
    } else {
        let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
        let list = pods
            .list(&ListParams::default().labels(MANAGER_POD_SELECTOR))
            .await
            .map_err(|e| format!("manager Pods: {e}"))?;
        list.items
            .iter()
            .map(ResourceExt::name_any)
            .find(|n| *n != leader)
            .ok_or("no manager replica but the leader")?
    };
    let pids = pod_pids("kruise-manager", Some(&target));
    let [pid] = pids[..] else {
        return Err(format!(
            "expected one kruise-manager process of {target}, found {pids:?}"
        ));
    };
    sigkill(pid)?;
    // The kubelet restarts the container: a new process of the same Pod.
    until(
        "the killed manager's container to restart",
        REPAIR,
        || async {
            pod_pids("kruise-manager", Some(&target))
                .iter()
                .any(|p| *p != pid)
        },
    )
    .await?;
    Ok(format!("SIGKILL pid {pid} ({target})"))
}

async fn kill_daemon() -> Res<String> {
    let pids = pod_pids("kruise-daemon", None);
    let [pid] = pids[..] else {
        return Err(format!(
            "expected one kruise-daemon process, found {pids:?}"
        ));
    };
    sigkill(pid)?;
    until(
        "the killed daemon's container to restart",
        REPAIR,
        || async { pod_pids("kruise-daemon", None).iter().any(|p| *p != pid) },
    )
    .await?;
    Ok(format!("SIGKILL pid {pid} (kruise-daemon)"))
}

/// `hack/cluster.sh restart NAME SIGNAL`, off the async threads (the watches keep running).
async fn restart(name: &'static str, signal: &'static str) -> Res<String> {
    let pid = std::fs::read_to_string(repo_root().join(format!(".cluster/pids/{name}.pid")))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(repo_root().join("hack/cluster.sh"))
            .args(["restart", name, signal])
            .current_dir(repo_root())
            .output()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("hack/cluster.sh restart {name}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "hack/cluster.sh restart {name} {signal}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(format!("SIG{signal} pid {pid} ({name}), started again"))
}

/// Cuts every connection to the API server (watches included) at once, the API server left
/// running: its end of each is destroyed (`ss -K`), so every client sees its streams reset and
/// must watch again from where it was.
async fn cut_connections() -> Res<String> {
    let out = tokio::task::spawn_blocking(|| {
        std::process::Command::new("ss")
            .args(["-K", "-tnH", "state", "established", "( sport = :6443 )"])
            .output()
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("ss -K: {e}"))?;
    let cut = String::from_utf8_lossy(&out.stdout).lines().count();
    if !out.status.success() || cut == 0 {
        return Err(format!(
            "ss -K cut {cut} connections: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(format!("cut {cut} connections to the API server (ss -K)"))
}

async fn delete_cert_secret(client: &Client) -> Res<String> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), KRUISE_NS);
    let old = secrets
        .get(keys::WEBHOOK_SECRET_NAME)
        .await
        .map_err(|e| format!("Secret {}: {e}", keys::WEBHOOK_SECRET_NAME))?;
    let old_uid = old.uid().unwrap_or_default();
    secrets
        .delete(keys::WEBHOOK_SECRET_NAME, &DeleteParams::default())
        .await
        .map_err(|e| format!("delete Secret: {e}"))?;
    until(
        "the manager to make a new webhook Secret",
        REPAIR,
        || async {
            secrets
                .get_opt(keys::WEBHOOK_SECRET_NAME)
                .await
                .ok()
                .flatten()
                .is_some_and(|s| {
                    s.uid().unwrap_or_default() != old_uid
                        && s.data.as_ref().is_some_and(|d| !d.is_empty())
                })
        },
    )
    .await?;
    Ok(format!(
        "deleted Secret {} (uid {old_uid})",
        keys::WEBHOOK_SECRET_NAME
    ))
}

/// Waits until the cluster serves again: the API answers, every node is Ready, both manager
/// replicas are Ready and one of them holds the Lease, the daemon is Ready. On time-out, says
/// what was still wrong.
pub async fn wait_healthy(client: &Client) -> Res<()> {
    let deadline = Instant::now() + REPAIR;
    loop {
        let wrong = match unhealthy(client).await {
            Ok(None) => return Ok(()),
            Ok(Some(wrong)) => wrong,
            Err(e) => format!("the API: {e}"),
        };
        if Instant::now() > deadline {
            return Err(format!(
                "the cluster to be healthy again: not after {REPAIR:?} ({wrong})"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// What keeps the cluster from being healthy, if anything.
async fn unhealthy(client: &Client) -> kube::Result<Option<String>> {
    Api::<Namespace>::all(client.clone()).get("default").await?;
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    if let Some(n) = nodes.items.iter().find(|n| !node_ready(n)) {
        return Ok(Some(format!("node {} not Ready", n.name_any())));
    }
    let dep = Api::<Deployment>::namespaced(client.clone(), KRUISE_NS)
        .get(MANAGER_DEPLOYMENT)
        .await?;
    let want = dep.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let ready = dep.status.and_then(|s| s.ready_replicas).unwrap_or(0);
    if ready != want {
        return Ok(Some(format!("{ready} of {want} manager replicas Ready")));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
    let managers = pods
        .list(&ListParams::default().labels(MANAGER_POD_SELECTOR))
        .await?;
    let Ok(leader) = mode::manager_leader_pod(client).await else {
        return Ok(Some("no manager holds the Lease".to_owned()));
    };
    if !managers
        .items
        .iter()
        .any(|p| p.name_any() == leader && pod_ready(p))
    {
        return Ok(Some(format!(
            "the Lease's holder {leader} is not a Ready manager"
        )));
    }
    let daemons = pods
        .list(&ListParams::default().labels(DAEMON_POD_SELECTOR))
        .await?;
    if daemons.items.is_empty() {
        return Ok(Some("no daemon Pod".to_owned()));
    }
    Ok(daemons
        .items
        .iter()
        .find(|p| !pod_ready(p))
        .map(|p| format!("daemon Pod {} not Ready", p.name_any())))
}
