//! Image pre-pulling for the NodeImage named after this node: one task per image tag, status
//! written back to the NodeImage.

pub mod keyring;
mod node_watch;
pub mod progress;
pub mod status;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys;
use kube::Resource;
use kube::api::{Api, PostParams};
use tokio::sync::{Mutex, Notify, Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::apitypes::{
    ImagePullPhase, ImagePullPolicy, ImageSpec, ImageTagSpec, ImageTagStatus, NodeImage,
    ReferenceObject, SandboxConfig,
};
use crate::criruntime::{Auth, CriClient, CriError};
use crate::events::Events;
use crate::metrics::Metrics;

/// While something is pulling, status is re-checked this often (upstream: 3–5 s).
const ACTIVE_RESYNC: Duration = Duration::from_secs(3);
/// When idle, status is re-checked this often (upstream: 20–30 min).
const IDLE_RESYNC: Duration = Duration::from_secs(20 * 60);
/// At most one status write per this interval: progress must not flood the API server.
const MIN_WRITE_INTERVAL: Duration = Duration::from_secs(1);
/// Pull secrets are cached this long (upstream: 5–10 min).
const SECRET_TTL: Duration = Duration::from_secs(5 * 60);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

/// Now, at the API's precision (whole seconds), so a status read back compares equal to the
/// one written and is not rewritten forever.
fn now() -> Time {
    let secs = jiff::Timestamp::now().as_second();
    Time(jiff::Timestamp::from_second(secs).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

type SecretMap = HashMap<(String, String), (Instant, Secret)>;

/// Secrets by reference, cached briefly so a burst of tags does not hammer the API server.
#[derive(Clone)]
struct SecretCache {
    client: kube::Client,
    cache: Arc<Mutex<SecretMap>>,
}

impl SecretCache {
    async fn get(&self, refs: &[ReferenceObject]) -> Vec<Secret> {
        let mut out = Vec::new();
        for r in refs {
            // The ImagePullJob controller copies secrets into the daemon's config namespace.
            let ns = if r.namespace.is_empty() {
                daemon_config_namespace()
            } else {
                r.namespace.clone()
            };
            let key = (ns.clone(), r.name.clone());
            if let Some((at, s)) = self.cache.lock().await.get(&key)
                && at.elapsed() < SECRET_TTL
            {
                out.push(s.clone());
                continue;
            }
            match Api::<Secret>::namespaced(self.client.clone(), &ns)
                .get(&r.name)
                .await
            {
                Ok(s) => {
                    self.cache
                        .lock()
                        .await
                        .insert(key, (Instant::now(), s.clone()));
                    out.push(s);
                }
                Err(e) => {
                    tracing::warn!(namespace = %ns, secret = %r.name, error = %e, "cannot read pull secret")
                }
            }
        }
        out
    }
}

/// Namespace of the pull-secret copies (env override as upstream).
pub fn daemon_config_namespace() -> String {
    std::env::var(keys::ENV_DAEMON_CONFIG_NAMESPACE)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| keys::KRUISE_DAEMON_CONFIG_NAMESPACE.to_string())
}

struct WorkerHandle {
    version: i64,
    cancel: CancellationToken,
}

#[derive(Default)]
struct State {
    workers: HashMap<(String, String), WorkerHandle>,
    /// image → tag → latest status.
    statuses: BTreeMap<String, BTreeMap<String, ImageTagStatus>>,
}

/// Shared by the sync loop and the tag workers.
#[derive(Clone)]
struct Ctx {
    cri: CriClient,
    secrets: SecretCache,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    limit: Option<Arc<Semaphore>>,
    metrics: Metrics,
    events: Events,
    /// containerd's content service, for progress; `None` on other runtimes.
    content: Option<progress::ContentClient>,
    /// Pulls running now: progress is only attributed while there is one.
    active_pulls: Arc<AtomicUsize>,
}

/// Counts a running pull for as long as it lives.
struct ActivePull(Arc<AtomicUsize>);

impl ActivePull {
    fn enter(n: &Arc<AtomicUsize>) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        ActivePull(n.clone())
    }
}

impl Drop for ActivePull {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Ctx {
    async fn set_status(&self, image: &str, s: ImageTagStatus, cancel: &CancellationToken) {
        // A cancelled worker must not overwrite what a newer worker reports.
        if cancel.is_cancelled() {
            return;
        }
        self.state
            .lock()
            .await
            .statuses
            .entry(image.to_string())
            .or_default()
            .insert(s.tag.clone(), s);
        self.changed.notify_one();
    }
}

/// Runs the image puller until `shutdown` fires.
pub async fn run(
    client: kube::Client,
    cri: CriClient,
    node: String,
    max_workers: Option<usize>,
    metrics: Metrics,
    events: Events,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let api: Api<NodeImage> = Api::all(client.clone());
    let content = progress::ContentClient::for_runtime(&cri);
    let ctx = Ctx {
        content,
        active_pulls: Arc::default(),
        cri,
        secrets: SecretCache {
            client,
            cache: Arc::default(),
        },
        state: Arc::default(),
        changed: Arc::new(Notify::new()),
        limit: max_workers
            .filter(|n| *n > 0)
            .map(|n| Arc::new(Semaphore::new(n))),
        metrics,
        events,
    };

    // The watch keeps only the latest object; the loop below always works on the newest.
    let (tx, mut rx) = watch::channel::<Option<NodeImage>>(None);
    let tx = Arc::new(tx);
    let watch_task = node_watch::spawn(api.clone(), &node, tx.clone(), shutdown.clone());

    let mut last_spec = None;
    let mut last_write: Option<Instant> = None;
    let mut wait = ACTIVE_RESYNC;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            r = rx.changed() => if r.is_err() { break },
            _ = ctx.changed.notified() => {},
            _ = tokio::time::sleep(wait) => {},
        }
        let Some(obj) = rx.borrow_and_update().clone() else {
            stop_all(&ctx).await;
            last_spec = None;
            wait = IDLE_RESYNC;
            continue;
        };
        if obj.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if last_spec.as_ref() != Some(&obj.spec) {
            sync_workers(&ctx, &obj).await;
            last_spec = Some(obj.spec.clone());
        }
        let new_status = {
            let st = ctx.state.lock().await;
            status::aggregate(&obj.spec, obj.status.as_ref(), &st.statuses)
        };
        let in_progress = status::in_progress(&obj.spec, &new_status);
        wait = if in_progress {
            ACTIVE_RESYNC
        } else {
            IDLE_RESYNC
        };
        // Our own writes are fed back into `rx` below, so this also covers "just written".
        if obj.status.as_ref() == Some(&new_status) {
            continue;
        }
        // A tag that just finished is written at once: progress writes must not delay the
        // Succeeded an ImagePullJob waits for. Each tag finishes once, so this stays bounded.
        if last_write.is_some_and(|t| t.elapsed() < MIN_WRITE_INTERVAL)
            && !status::more_finished(obj.status.as_ref(), &new_status)
        {
            wait = MIN_WRITE_INTERVAL;
            continue;
        }
        let mut updated = obj.clone();
        updated.status = Some(new_status.clone());
        last_write = Some(Instant::now());
        match api
            .replace_status(&node, &PostParams::default(), &updated)
            .await
        {
            Ok(o) => {
                tracing::debug!(
                    desired = new_status.desired,
                    succeeded = new_status.succeeded,
                    failed = new_status.failed,
                    pulling = new_status.pulling,
                    "NodeImage status written"
                );
                // Keep the newest resourceVersion for the next write even before the watch catches up.
                tx.send_replace(Some(o));
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                // Someone else wrote; the watch brings the new version and we try again.
                wait = ACTIVE_RESYNC.min(wait);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot write NodeImage status");
                wait = ACTIVE_RESYNC;
            }
        }
    }
    stop_all(&ctx).await;
    watch_task.abort();
    Ok(())
}

async fn stop_all(ctx: &Ctx) {
    let mut st = ctx.state.lock().await;
    for (_, w) in st.workers.drain() {
        w.cancel.cancel();
    }
    st.statuses.clear();
}

/// Starts, keeps or stops tag workers so they match the spec.
async fn sync_workers(ctx: &Ctx, obj: &NodeImage) {
    let images = &obj.spec.images;
    let mut st = ctx.state.lock().await;

    // Stop workers whose tag left the spec or changed version.
    st.workers.retain(|(image, tag), w| {
        let keep = images
            .get(image)
            .and_then(|i| i.tags.iter().find(|t| &t.tag == tag))
            .is_some_and(|t| t.version == w.version);
        if !keep {
            tracing::info!(image = %image, tag = %tag, "stopping pull worker no longer wanted");
            w.cancel.cancel();
        }
        keep
    });
    // Forget statuses of tags that left the spec.
    st.statuses.retain(|image, tags| {
        if let Some(spec) = images.get(image) {
            tags.retain(|t, _| spec.tags.iter().any(|s| &s.tag == t));
            true
        } else {
            false
        }
    });

    for (image, spec) in images {
        for tag in &spec.tags {
            if let Some(done) = status::finished_status(obj.status.as_ref(), image, tag) {
                st.statuses
                    .entry(image.clone())
                    .or_default()
                    .insert(tag.tag.clone(), done.clone());
                continue;
            }
            let key = (image.clone(), tag.tag.clone());
            if st.workers.contains_key(&key) {
                continue;
            }
            let cancel = CancellationToken::new();
            st.workers.insert(
                key,
                WorkerHandle {
                    version: tag.version,
                    cancel: cancel.clone(),
                },
            );
            st.statuses.entry(image.clone()).or_default().insert(
                tag.tag.clone(),
                ImageTagStatus {
                    tag: tag.tag.clone(),
                    phase: ImagePullPhase::Waiting,
                    version: tag.version,
                    ..Default::default()
                },
            );
            tracing::info!(image = %image, tag = %tag.tag, version = tag.version, "new pull worker");
            tokio::spawn(worker(
                ctx.clone(),
                obj.object_ref(&()),
                image.clone(),
                spec_for(spec),
                tag.clone(),
                cancel,
            ));
        }
    }
}

fn spec_for(spec: &ImageSpec) -> (Vec<ReferenceObject>, Option<SandboxConfig>) {
    (spec.pull_secrets.clone(), spec.sandbox_config.clone())
}

/// Pulls one tag with retries; reports Waiting → Pulling → Succeeded|Failed.
async fn worker(
    ctx: Ctx,
    node_image: ObjectReference,
    image: String,
    (secret_refs, sandbox): (Vec<ReferenceObject>, Option<SandboxConfig>),
    tag: ImageTagSpec,
    cancel: CancellationToken,
) {
    let _permit = match &ctx.limit {
        Some(sem) => tokio::select! {
            _ = cancel.cancelled() => return,
            p = sem.clone().acquire_owned() => match p { Ok(p) => Some(p), Err(_) => return },
        },
        None => None,
    };
    let started = Instant::now();
    let mut st = ImageTagStatus {
        tag: tag.tag.clone(),
        phase: ImagePullPhase::Pulling,
        version: tag.version,
        start_time: Some(now()),
        ..Default::default()
    };
    // Report Pulling at once: the manager fails tags the daemon is silent about for too long.
    ctx.set_status(&image, st.clone(), &cancel).await;

    let full = status::full_image_name(&image, &tag.tag);
    let secrets = ctx.secrets.get(&secret_refs).await;
    let auths = keyring::lookup(&keyring::entries_from_secrets(&secrets), &image);
    let timeout = status::pull_timeout(&tag);
    let limit = status::backoff_limit(&tag);
    let deadline = tag
        .pull_policy
        .as_ref()
        .and_then(|p| p.active_deadline_seconds)
        .map(|s| started + Duration::from_secs(s.max(0) as u64));
    let always = tag.image_pull_policy == Some(ImagePullPolicy::Always);
    let (labels, annotations) = sandbox
        .map(|s| {
            (
                s.labels.into_iter().collect(),
                s.annotations.into_iter().collect(),
            )
        })
        .unwrap_or_default();

    let mut last_err = String::new();
    for attempt in 0..=limit {
        let mut this_timeout = timeout;
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                last_err = "pulling exceeds the activeDeadlineSeconds".into();
                break;
            }
            this_timeout = this_timeout.min(left);
        }
        let res = tokio::select! {
            _ = cancel.cancelled() => {
                tracing::info!(image = %full, "pull cancelled");
                return;
            }
            r = with_progress(
                &ctx,
                &image,
                &mut st,
                &cancel,
                pull_once(&ctx.cri, &full, !always, &auths, &labels, &annotations, this_timeout),
            ) => r,
        };
        match res {
            Ok(image_id) => {
                ctx.metrics.pull(true);
                st.phase = ImagePullPhase::Succeeded;
                st.progress = 100;
                st.image_id = image_id;
                st.completion_time = Some(now());
                tracing::info!(image = %full, image_id = %st.image_id, elapsed = ?started.elapsed(), "image pulled");
                ctx.events.emit(
                    node_image,
                    false,
                    "PullImageSucceed",
                    "PullImage",
                    format!("Image {full}, elapsedTime {:?}", started.elapsed()),
                );
                ctx.set_status(&image, st, &cancel).await;
                return;
            }
            Err(e) => {
                last_err = e;
                tracing::warn!(image = %full, attempt = attempt + 1, error = %last_err, "pull failed");
                if attempt < limit {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = tokio::time::sleep(status::backoff_delay(attempt)) => {},
                    }
                }
            }
        }
    }
    ctx.metrics.pull(false);
    st.phase = ImagePullPhase::Failed;
    st.message = last_err;
    st.completion_time = Some(now());
    tracing::warn!(image = %full, message = %st.message, "giving up pulling image");
    let note = format!("Image {full} {}", st.message);
    // The ImagePullJobs that asked for the tag hear about it too, as upstream.
    for owner in tag.owner_references.iter().cloned().chain([node_image]) {
        ctx.events
            .emit(owner, true, "PullImageFailed", "PullImage", note.clone());
    }
    ctx.set_status(&image, st, &cancel).await;
}

/// Runs one pull attempt and, on containerd, raises `st.progress` from the runtime's ingests
/// about once a second while it runs (the sync loop throttles the status writes).
async fn with_progress(
    ctx: &Ctx,
    image: &str,
    st: &mut ImageTagStatus,
    cancel: &CancellationToken,
    pull: impl Future<Output = Result<String, String>>,
) -> Result<String, String> {
    let _active = ActivePull::enter(&ctx.active_pulls);
    let Some(content) = ctx.content.clone() else {
        return pull.await;
    };
    // What is in flight before the pull starts belongs to someone else.
    let baseline = match content.ingests().await {
        Ok(b) => b,
        Err(e) => {
            tracing::debug!(error = %e, "containerd content service unavailable: no pull progress");
            return pull.await;
        }
    };
    let mut tracker = progress::Tracker::new(&baseline);
    let mut tick = tokio::time::interval(progress::POLL_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tick.tick().await;
    tokio::pin!(pull);
    loop {
        tokio::select! {
            r = &mut pull => return r,
            _ = tick.tick() => {
                if ctx.active_pulls.load(Ordering::SeqCst) != 1 {
                    continue;
                }
                match content.ingests().await {
                    Ok(list) => {
                        if let Some(p) = tracker.observe(&list).filter(|p| *p > st.progress) {
                            st.progress = p;
                            ctx.set_status(image, st.clone(), cancel).await;
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "cannot list containerd ingests"),
                }
            }
        }
    }
}

/// One attempt: skip if present (unless Always), else pull with each matching credential, then
/// read the image ID back from ImageStatus so it is exactly what the runtime reports.
async fn pull_once(
    cri: &CriClient,
    full: &str,
    if_not_present: bool,
    auths: &[Auth],
    labels: &HashMap<String, String>,
    annotations: &HashMap<String, String>,
    timeout: Duration,
) -> Result<String, String> {
    if if_not_present && let Ok(Some(img)) = cri.image_status(full).await {
        tracing::info!(image = %full, image_id = %img.id, "image already present");
        return Ok(img.id);
    }
    let mut errors: Vec<String> = Vec::new();
    let mut pulled = None;
    let creds: Vec<Option<&Auth>> = if auths.is_empty() {
        vec![None]
    } else {
        auths.iter().map(Some).collect()
    };
    for a in creds {
        match cri
            .pull_image(full, a, labels.clone(), annotations.clone(), timeout)
            .await
        {
            Ok(r) => {
                pulled = Some(r);
                break;
            }
            Err(e) => errors.push(pull_error_text(&e)),
        }
    }
    let Some(image_ref) = pulled else {
        return Err(errors.join("; "));
    };
    match cri.image_status(full).await {
        Ok(Some(img)) => Ok(img.id),
        // Some runtimes only resolve the reference they returned.
        _ => match cri.image_status(&image_ref).await {
            Ok(Some(img)) => Ok(img.id),
            _ => Ok(image_ref),
        },
    }
}

fn pull_error_text(e: &CriError) -> String {
    e.message()
}
