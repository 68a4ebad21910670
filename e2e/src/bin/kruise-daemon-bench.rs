//! Image pull through kruise-daemon against a direct CRI PullImage, same image, same node.
//!
//! (a) daemon: a tag written into the node's NodeImage spec, timed from that write until the
//!     daemon's status says Succeeded (what an ImagePullJob waits on);
//! (b) direct: one CRI PullImage from a minimal client (k8s-cri + tonic) on the same socket.
//!
//! The image is removed from the node before every run and the runs are interleaved (the order
//! alternates), so both see the same registry, disk and page cache. It also reports the daemon's
//! RSS idle and its peak while pulling, and the progress values its status showed.
//!
//! The daemon (a release build by default) is started here as a host process, so the dev-mode
//! daemon must be stopped first. The manager may (and, for its NodeImage webhook, must) run: it
//! leaves tags without owners alone.
//!
//! Usage: kruise-daemon-bench [--runs R] [--size-mb M] [--daemon PATH] [--append FILE]
//! (`--help` for more)

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use futures::StreamExt;
use hyper_util::rt::TokioIo;
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_openapi::api::core::v1::Node;
use kruise_api::apps::v1beta1::{ImagePullPhase, NodeImage};
use kruise_e2e::bench::args::{Common, at_least_one, release_bin};
use kruise_e2e::bench::process::{HealthError, ProcessGuard};
use kruise_e2e::bench::stats::{median, mib, ratio, secs, secs_list};
use kruise_e2e::bench::{self, rfc3339_now};
use kruise_e2e::{client, cri as e2e_cri, repo_root};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tonic::transport::{Channel, Endpoint, Uri};

const PULL_TIMEOUT: Duration = Duration::from_secs(600);
const DAEMON_ADDR: &str = "127.0.0.1:10221";

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T> = std::result::Result<T, BoxError>;

/// Image pull through kruise-daemon against a direct CRI PullImage, same image, same node.
#[derive(Debug, Parser)]
#[command(name = "kruise-daemon-bench")]
struct Args {
    /// Size of the image pushed for the test, in MiB.
    #[arg(long, default_value_t = 384, value_parser = at_least_one)]
    size_mb: usize,
    /// The daemon to start (a release build).
    #[arg(long, value_name = "PATH", default_value_os_t = release_bin("kruise-daemon"))]
    daemon: PathBuf,
    #[command(flatten)]
    common: Common,
}

/// The minimal CRI client: an ImageService over the runtime's unix socket, nothing else.
async fn cri_images() -> Result<ImageServiceClient<Channel>> {
    let path = e2e_cri::socket();
    let channel = Endpoint::from_static("http://cri.local")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(p).await?))
            }
        }))
        .await?;
    Ok(ImageServiceClient::new(channel))
}

fn image_spec(image: &str) -> Option<cri::ImageSpec> {
    Some(cri::ImageSpec {
        image: image.to_string(),
        ..Default::default()
    })
}

/// Removes the image (if present) so the next pull downloads every layer again. containerd's
/// CRI RemoveImage deletes synchronously, which also garbage-collects the unreferenced blobs.
async fn remove(images: &mut ImageServiceClient<Channel>, image: &str) -> Result<()> {
    let st = images
        .image_status(cri::ImageStatusRequest {
            image: image_spec(image),
            verbose: false,
        })
        .await?
        .into_inner();
    if let Some(img) = st.image {
        images
            .remove_image(cri::RemoveImageRequest {
                image: image_spec(&img.id),
            })
            .await?;
    }
    Ok(())
}

async fn direct_pull(images: &mut ImageServiceClient<Channel>, image: &str) -> Result<Duration> {
    let t = Instant::now();
    let mut req = tonic::Request::new(cri::PullImageRequest {
        image: image_spec(image),
        auth: None,
        sandbox_config: None,
    });
    req.set_timeout(PULL_TIMEOUT);
    images.pull_image(req).await?;
    Ok(t.elapsed())
}

fn rss_kb(pid: u32) -> u64 {
    bench::rss_kib(pid).unwrap_or(0)
}

fn pid_file_alive(name: &str) -> bool {
    let p = repo_root().join(format!(".cluster/pids/{name}.pid"));
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
}

/// Starts the daemon and waits for its /healthz; the guard stops it (SIGTERM, 5 s, SIGKILL)
/// when the bench ends, however it ends.
async fn start_daemon(path: &PathBuf, node: &str) -> Result<ProcessGuard> {
    if !path.exists() {
        return Err(format!(
            "{} not found: run `cargo build --release -p kruise-daemon` first",
            path.display()
        )
        .into());
    }
    let logs = repo_root().join(".cluster/logs");
    std::fs::create_dir_all(&logs)?;
    let log = std::fs::File::create(logs.join("kruise-daemon-bench.log"))?;
    let kubeconfig = std::env::var_os("KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cluster/kubeconfig"));
    let mut cmd = Command::new(path);
    cmd.env("NODE_NAME", node)
        .env("RUST_LOG", "info")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--runtime-endpoint")
        .arg(format!("unix://{}", e2e_cri::socket().display()))
        .args(["--addr", DAEMON_ADDR])
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let mut d = ProcessGuard::spawn(&mut cmd, Duration::from_secs(5))?;
    match d
        .wait_healthy(DAEMON_ADDR, "/healthz", Duration::from_secs(60), Duration::from_millis(200))
        .await
    {
        Ok(()) => Ok(d),
        Err(HealthError::Timeout(_)) => Err("kruise-daemon did not answer /healthz within 60 s (see .cluster/logs/kruise-daemon-bench.log)".into()),
        Err(e) => Err(format!("kruise-daemon {e} (see .cluster/logs/kruise-daemon-bench.log)").into()),
    }
}

/// Writes `tag` at `version` into the NodeImage spec and waits for the daemon's Succeeded.
/// Returns the time from the write to the status, and the progress values seen on the way.
async fn daemon_pull(
    api: &Api<NodeImage>,
    node: &str,
    name: &str,
    tag: &str,
    version: i64,
    pid: u32,
    peak_rss: &Arc<Mutex<u64>>,
) -> Result<(Duration, Vec<i32>)> {
    let cfg = watcher::Config::default().fields(&format!("metadata.name={node}"));
    let mut stream = watcher(api.clone(), cfg).boxed();
    // The watch is running before the write, so the first status after it is not missed.
    loop {
        match stream.next().await {
            Some(Ok(watcher::Event::InitDone)) => break,
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => return Err("NodeImage watch ended".into()),
        }
    }
    let sampling = {
        let peak = peak_rss.clone();
        tokio::spawn(async move {
            loop {
                let r = rss_kb(pid);
                if let Ok(mut p) = peak.lock() {
                    *p = (*p).max(r);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let patch = json!({"spec": {"images": {name: {"tags": [{
        "tag": tag, "version": version, "imagePullPolicy": "Always",
        "createdAt": rfc3339_now(),
        // The NodeImage webhook wants a TTL; no retries, so a failure shows as one.
        "pullPolicy": {"ttlSecondsAfterFinished": 600, "timeoutSeconds": 600, "backoffLimit": 0},
    }]}}}});
    let t = Instant::now();
    api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let mut progress = Vec::new();
    let result = tokio::time::timeout(PULL_TIMEOUT, async {
        while let Some(ev) = stream.next().await {
            let ni = match ev {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                Ok(_) => continue,
                Err(e) => return Err::<Duration, BoxError>(e.into()),
            };
            let st = ni
                .status
                .as_ref()
                .and_then(|s| s.image_statuses.get(name))
                .and_then(|s| s.tags.iter().find(|t| t.tag == tag && t.version == version));
            let Some(st) = st else { continue };
            if progress.last() != Some(&st.progress) {
                progress.push(st.progress);
            }
            match st.phase {
                ImagePullPhase::Succeeded => return Ok(t.elapsed()),
                ImagePullPhase::Failed => {
                    return Err(format!("daemon pull failed: {}", st.message).into());
                }
                _ => {}
            }
        }
        Err("NodeImage watch ended".into())
    })
    .await;
    sampling.abort();
    let took = result.map_err(|_| "daemon pull timed out")??;
    Ok((took, progress))
}

async fn ensure_node_image(api: &Api<NodeImage>, node: &str) -> Result<()> {
    if api.get_opt(node).await?.is_none() {
        let ni: NodeImage = serde_json::from_value(json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "NodeImage",
            "metadata": {"name": node}, "spec": {}
        }))?;
        api.create(&PostParams::default(), &ni).await?;
    }
    Ok(())
}

async fn run(args: Args) -> Result<()> {
    if pid_file_alive("kruise-daemon") {
        return Err("the dev-mode kruise-daemon runs: stop it first (`source hack/lib.sh; stop kruise-daemon`), a second daemon would pull the same tags".into());
    }
    let client: Client = client().await?;
    let node = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items
        .first()
        .map(|n| n.name_any())
        .ok_or("the cluster has no node")?;
    let api: Api<NodeImage> = Api::all(client.clone());
    ensure_node_image(&api, &node).await?;
    let tag = e2e_cri::unique_tag("bench-pull");
    eprintln!("pushing a {} MiB image, tag {tag}", args.size_mb);
    let full = e2e_cri::push_unique_image(&tag, args.size_mb << 20)?;
    let (name, tag) = full.rsplit_once(':').ok_or("image without a tag")?;
    let mut images = cri_images().await?;
    remove(&mut images, &full).await?;

    let daemon = start_daemon(&args.daemon, &node).await?;
    let pid = daemon.pid();
    // Let start-up work (watches, first syncs) settle before calling it idle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_rss = rss_kb(pid);
    let peak_rss = Arc::new(Mutex::new(0u64));

    let mut via_daemon = Vec::new();
    let mut direct = Vec::new();
    let mut progress_seen: BTreeSet<i32> = BTreeSet::new();
    let base_version = jiff::Timestamp::now().as_second();
    let outcome: Result<()> = async {
        for run in 0..args.common.runs {
            let order = if run % 2 == 0 {
                [true, false]
            } else {
                [false, true]
            };
            for use_daemon in order {
                remove(&mut images, &full).await?;
                if use_daemon {
                    let (took, progress) = daemon_pull(
                        &api,
                        &node,
                        name,
                        tag,
                        base_version + run as i64,
                        pid,
                        &peak_rss,
                    )
                    .await?;
                    eprintln!(
                        "run {} daemon: {}s, progress seen {progress:?}",
                        run + 1,
                        secs(took)
                    );
                    progress_seen.extend(progress);
                    via_daemon.push(took);
                } else {
                    let took = direct_pull(&mut images, &full).await?;
                    eprintln!("run {} direct CRI: {}s", run + 1, secs(took));
                    direct.push(took);
                }
            }
        }
        Ok(())
    }
    .await;
    // Leave the node as found: the tag out of the spec, the big image gone.
    let drop_tag = json!({"spec": {"images": {name: null}}});
    let _ = api
        .patch(&node, &PatchParams::default(), &Patch::Merge(&drop_tag))
        .await;
    let _ = remove(&mut images, &full).await;
    daemon.stop(Duration::from_secs(5)).await;
    outcome?;

    let peak = peak_rss.lock().map(|p| *p).unwrap_or(0);
    let (md, mc) = (median(&via_daemon), median(&direct));
    let intermediate: Vec<String> = progress_seen
        .iter()
        .filter(|p| **p > 0 && **p < 100)
        .map(|p| p.to_string())
        .collect();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let out = format!(
        "\n## Image pull through kruise-daemon vs direct CRI ({} MiB image, {} runs each, interleaved)\n\n\
         Machine: {cores} cores, local cluster (containerd, registry on 127.0.0.1:5000). \
         `kruise-daemon-bench`: image removed before every run; (a) from the NodeImage spec write \
         to status Succeeded as seen by a watch, release build of the daemon; (b) one CRI \
         PullImage on the same socket.\n\n\
         | path | median s | runs s |\n|---|---|---|\n\
         | (a) kruise-daemon (NodeImage spec → status Succeeded) | {} | {} |\n\
         | (b) direct CRI PullImage | {} | {} |\n\n\
         | measure | value |\n|---|---|\n\
         | ratio (a)/(b) | {:.2} |\n\
         | daemon RSS idle | {} MiB |\n\
         | daemon RSS peak while pulling | {} MiB |\n\
         | intermediate `progress` values seen in status | {} |\n",
        args.size_mb,
        args.common.runs,
        secs(md),
        secs_list(&via_daemon),
        secs(mc),
        secs_list(&direct),
        ratio(md, mc),
        mib(idle_rss),
        mib(peak),
        if intermediate.is_empty() {
            "none".to_string()
        } else {
            intermediate.join(", ")
        },
    );
    args.common.emit(&out)?;
    Ok(())
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("kruise-daemon-bench: {e}");
        std::process::exit(1);
    }
}
