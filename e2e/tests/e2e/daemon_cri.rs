//! kruise-daemon without a usable CRI runtime: pointed at a socket that does not exist, the
//! installed daemon keeps running (no restart), says why (its Pod's condition, a Warning Event on
//! the Node, the `kruise_daemon_cri_available` gauge, `kubectl kruise check`), and once the socket
//! appears it starts its duties without a restart. Upstream's daemon exits instead and the kubelet
//! restarts it in a loop.
//!
//! The daemon's DaemonSet is reconfigured (a serial test); a guard puts its arguments back and
//! removes the socket link, also when the test fails half-way.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kruise_api::keys;
use kruise_e2e::cli::Kruise;
use kruise_e2e::mode::{self, DAEMON_POD_SELECTOR, KRUISE_NS, Mode};
use kruise_e2e::{TestNamespace, client, cloneset, pod_condition, pod_ready, wait_for};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// The installed daemon's DaemonSet (deploy/daemon/daemon.yaml).
const DAEMON_DS: &str = "kruise-daemon";
/// The host directory the DaemonSet mounts at /hostvarrun/containerd (deploy/daemon/daemon.yaml),
/// where the local cluster's containerd has its socket (hack/lib.sh).
const HOST_SOCKET_DIR: &str = "/var/run/containerd";
/// A socket name under that directory that no runtime serves until the test links it.
const LATE_SOCKET: &str = "kruise-e2e-late-cri.sock";
/// The daemon's port (deploy/daemon/daemon.yaml), read through the API server's Pod proxy.
const DAEMON_PORT: u16 = 10221;
const ROLLOUT: Duration = Duration::from_secs(60);

fn late_socket_on_host() -> PathBuf {
    PathBuf::from(HOST_SOCKET_DIR).join(LATE_SOCKET)
}

fn socket_file_arg() -> String {
    format!("--socket-file=containerd/{LATE_SOCKET}")
}

fn remove_link() {
    let _ = std::fs::remove_file(late_socket_on_host());
}

fn container_args(p: &Pod) -> Vec<String> {
    p.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default()
}

fn restart_count(p: &Pod) -> i32 {
    p.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .map_or(-1, |c| c.restart_count)
}

fn cri_condition(p: &Pod) -> Option<(String, String, String)> {
    kruise_api::pod::condition(p, keys::DAEMON_CONDITION_CRI_AVAILABLE).map(|c| {
        (
            c.status.clone(),
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default(),
        )
    })
}

/// Sets the daemon container's args and waits until the only daemon Pod left runs them.
async fn set_args(client: &Client, args: &Value) -> kruise_e2e::Result<Pod> {
    let dss: Api<DaemonSet> = Api::namespaced(client.clone(), KRUISE_NS);
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": args}
    ]))?;
    dss.patch(
        DAEMON_DS,
        &PatchParams::default(),
        &Patch::<()>::Json(patch),
    )
    .await?;
    let want: Vec<String> = serde_json::from_value(args.clone())?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
    wait_for("the daemon Pod with the new args", ROLLOUT, || async {
        let live = pods
            .list(&ListParams::default().labels(DAEMON_POD_SELECTOR))
            .await?
            .items;
        Ok(match live.as_slice() {
            [p] if container_args(p) == want
                && p.metadata.deletion_timestamp.is_none()
                && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") =>
            {
                Some(p.clone())
            }
            _ => None,
        })
    })
    .await
}

/// The daemon's installed args; restoring (explicitly or on drop) puts them back, waits for a
/// Ready daemon, and removes the socket link.
struct Restore {
    args: Option<Value>,
}

impl Restore {
    async fn restore(mut self, client: &Client) -> kruise_e2e::Result<()> {
        remove_link();
        let Some(args) = self.args.take() else {
            return Ok(());
        };
        restore_args(client, &args).await
    }
}

async fn restore_args(client: &Client, args: &Value) -> kruise_e2e::Result<()> {
    set_args(client, args).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);
    wait_for("the restored daemon to be Ready", ROLLOUT, || async {
        let p = mode::daemon_pod(client).await?;
        Ok(pod_ready(&pods.get(&p.name_any()).await?).then_some(()))
    })
    .await
}

impl Drop for Restore {
    fn drop(&mut self) {
        remove_link();
        let Some(args) = self.args.take() else {
            return;
        };
        // A failing test unwinds through here: restore on a runtime of its own.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async { restore_args(&client().await?, &args).await })
        })
        .join();
        if !matches!(done, Ok(Ok(()))) {
            eprintln!("restoring the daemon's DaemonSet failed; reinstall from deploy/");
        }
    }
}

/// The daemon Pod's `kruise_daemon_cri_available` sample, through the API server's Pod proxy.
async fn cri_gauge(client: &Client, pod: &str) -> kruise_e2e::Result<Option<f64>> {
    let path = format!("/api/v1/namespaces/{KRUISE_NS}/pods/{pod}:{DAEMON_PORT}/proxy/metrics");
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| kruise_e2e::Error::Mode(e.to_string()))?;
    let text = client.request_text(req).await?;
    Ok(text
        .lines()
        .find(|l| l.starts_with("kruise_daemon_cri_available "))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok()))
}

/// The daemon's Events with `reason` on `node`, newer than `since`.
async fn node_events(
    client: &Client,
    node: &str,
    reason: &str,
    since: jiff::Timestamp,
) -> kruise_e2e::Result<Vec<Event>> {
    let events: Api<Event> = Api::all(client.clone());
    let fields = format!("involvedObject.kind=Node,involvedObject.name={node},reason={reason}");
    Ok(events
        .list(&ListParams::default().fields(&fields))
        .await?
        .items
        .into_iter()
        .filter(|e| e.reporting_component.as_deref() == Some("kruise-daemon"))
        .filter(|e| {
            let at = e
                .event_time
                .as_ref()
                .map(|t| t.0)
                .or(e.last_timestamp.as_ref().map(|t| t.0));
            at.is_some_and(|t| t >= since)
        })
        .collect())
}

/// `kubectl kruise check -o json`: its exit code and its `daemon` entry.
async fn check_daemon(kk: &Kruise) -> (Option<i32>, Value) {
    let run = kk.run(&["check", "-o", "json"]).await.expect("check runs");
    let v: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|_| panic!("JSON: {run}"));
    let daemon = v["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "daemon").cloned())
        .unwrap_or_else(|| panic!("a daemon check: {run}"));
    (run.code, daemon)
}

#[tokio::test]
async fn serial_daemon_without_cri_stays_running_reports_why_and_recovers() {
    if mode::mode() != Mode::InCluster {
        println!("skipped: reconfigures the installed daemon's DaemonSet (in cluster only)");
        return;
    }
    let client = client().await.expect("cluster");
    let kk = Kruise::new("default").expect("kubectl-kruise and kubeconfig");
    let node = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .expect("nodes")
        .items
        .first()
        .expect("a node")
        .name_any();
    let since = jiff::Timestamp::from_second(jiff::Timestamp::now().as_second()).expect("now");
    remove_link();
    let ds = Api::<DaemonSet>::namespaced(client.clone(), KRUISE_NS)
        .get(DAEMON_DS)
        .await
        .expect("the daemon DaemonSet");
    let installed = container_args(&Pod {
        spec: ds.spec.and_then(|s| s.template.spec),
        ..Pod::default()
    });
    let guard = Restore {
        args: Some(json!(installed)),
    };
    let mut args = installed.clone();
    args.push(socket_file_arg());
    let pod = set_args(&client, &json!(args))
        .await
        .expect("the daemon runs with a missing socket");
    let (name, uid) = (pod.name_any(), pod.uid());
    let pods: Api<Pod> = Api::namespaced(client.clone(), KRUISE_NS);

    // It says why on its Pod, and stays: same Pod, Running, never restarted, not Ready.
    let tried = format!("/hostvarrun/containerd/{LATE_SOCKET}");
    let cond = wait_for("the CRI condition False", ROLLOUT, || async {
        let p = pods.get(&name).await?;
        Ok(cri_condition(&p).filter(|c| c.0 == "False"))
    })
    .await
    .expect("condition");
    assert_eq!(cond.1, keys::DAEMON_REASON_CRI_UNAVAILABLE, "{cond:?}");
    assert!(
        cond.2.contains(&tried),
        "the message names the path: {cond:?}"
    );
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(20) {
        let p = pods
            .get(&name)
            .await
            .expect("the daemon Pod is still there");
        assert_eq!(p.uid(), uid, "the same Pod");
        assert_eq!(restart_count(&p), 0, "never restarted: {:?}", p.status);
        assert_eq!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Running")
        );
        assert_eq!(pod_condition(&p, "Ready"), Some("False"), "not Ready");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert_eq!(cri_gauge(&client, &name).await.expect("metrics"), Some(0.0));
    // One Warning for all the retries of those 20 s.
    let warnings = node_events(&client, &node, keys::DAEMON_REASON_CRI_UNAVAILABLE, since)
        .await
        .expect("events");
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert_eq!(warnings[0].type_.as_deref(), Some("Warning"));
    assert!(
        warnings[0]
            .message
            .as_deref()
            .unwrap_or("")
            .contains(&tried),
        "{warnings:#?}"
    );
    assert!(warnings[0].count.unwrap_or(1) <= 1, "{warnings:#?}");
    let (code, daemon) = check_daemon(&kk).await;
    assert_eq!(code, Some(1), "check fails: {daemon}");
    assert_eq!(daemon["ok"], false, "{daemon}");
    let detail = daemon["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains(&name) && detail.contains("has no CRI runtime") && detail.contains(&tried),
        "{daemon}"
    );

    // The socket appears (a link to containerd's, beside it): the same process starts working.
    std::os::unix::fs::symlink("containerd.sock", late_socket_on_host()).expect("link the socket");
    wait_for(
        "the CRI condition True",
        Duration::from_secs(30),
        || async {
            let p = pods.get(&name).await?;
            Ok(cri_condition(&p).filter(|c| c.0 == "True").map(|_| ()))
        },
    )
    .await
    .expect("recovered");
    wait_for("the daemon Ready", Duration::from_secs(20), || async {
        Ok(pod_ready(&pods.get(&name).await?).then_some(()))
    })
    .await
    .expect("Ready");
    let p = pods.get(&name).await.expect("pod");
    assert_eq!((p.uid(), restart_count(&p)), (uid.clone(), 0), "no restart");
    assert_eq!(cri_gauge(&client, &name).await.expect("metrics"), Some(1.0));
    let normal = node_events(&client, &node, keys::DAEMON_REASON_CRI_AVAILABLE, since)
        .await
        .expect("events");
    assert_eq!(normal.len(), 1, "{normal:#?}");
    assert_eq!(normal[0].type_.as_deref(), Some("Normal"));

    // Its duties run: containermeta writes a CloneSet Pod's runtime-containers-meta.
    let ns = TestNamespace::create(&client, "e2e-daemon-cri")
        .await
        .expect("ns");
    cloneset::api(&client, &ns.name)
        .create(
            &PostParams::default(),
            &cloneset::new("web", 1, "v1", json!({})).expect("cloneset"),
        )
        .await
        .expect("create cloneset");
    let app_pods: Api<Pod> = ns.api();
    wait_for("runtime-containers-meta on the Pod", ROLLOUT, || async {
        let ps = cloneset::pods(&app_pods, "web").await?;
        Ok(ps
            .iter()
            .find_map(|p| {
                p.annotations()
                    .get(keys::RUNTIME_CONTAINERS_META_ANNOTATION)
            })
            .filter(|m| m.contains("containerID"))
            .map(|_| ()))
    })
    .await
    .expect("the containermeta duty runs");
    let (code, daemon) = check_daemon(&kk).await;
    assert_eq!(daemon["ok"], true, "exit {code:?}: {daemon}");
    let p = pods.get(&name).await.expect("pod");
    assert_eq!((p.uid(), restart_count(&p)), (uid, 0), "no restart");

    guard.restore(&client).await.expect("restore the daemon");
    ns.delete().await.expect("delete ns");
}
