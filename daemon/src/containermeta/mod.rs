//! Reports what really runs in each container of Kruise-managed pods on this node
//! (`apps.kruise.io/runtime-containers-meta`), and restarts containers whose env-from-metadata
//! is stale while an in-place update waits for them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kruise_api::appspub::{RuntimeContainerHashes, RuntimeContainerMeta, RuntimeContainerMetaSet};
// The same hash the manager's in-place engine compares against, so it lives in kruise-api.
use kruise_api::hash as envhash;
use kruise_api::keys::{self, k8s};
use kruise_runtime::runner::{self, Controller, ReconcileError};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use crate::criruntime::labels::{container_id_with_runtime, newest_by_name, split_container_id};
use crate::criruntime::{ContainerInfo, CriClient, CriError, State};
use crate::events::{Events, pod_ref};
use crate::metrics::Metrics;

/// The controller name in the runner's spans and metrics (the duty's name).
const NAME: &str = "containermeta";
/// kube's `Controller`, which ran this duty before the runner, reconciled without a limit: one
/// pod's slow container stop must not hold up the other pods on the node.
const CONCURRENCY: u16 = 0;
/// `env` must answer quickly; a container that cannot run it is simply not hashed.
const ENV_EXEC_TIMEOUT: Duration = Duration::from_secs(3);
/// Retry soon when the env could not be read (container still starting).
const RETRY_ENV: Duration = Duration::from_secs(3);
/// Restarts of one container are spaced out exponentially from this, up to `MAX_RESTART_BACKOFF`.
const RESTART_BACKOFF: Duration = Duration::from_secs(3);
const MAX_RESTART_BACKOFF: Duration = Duration::from_secs(600);
/// How long a container must have looked stale before it is stopped. The kubelet may be in the
/// middle of a sync that began with the Pod as it was before the update (it waits up to a
/// second for a fresh runtime status); a stop inside that window makes that sync recreate the
/// container from the old Pod, with the old env, and cost a second restart. Upstream's daemon
/// gets the same margin from queueing every Pod event a second late.
const STALE_SETTLE: Duration = Duration::from_secs(2);
const DEFAULT_GRACE_SECONDS: i64 = 30;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("container runtime: {0}")]
    Cri(#[from] CriError),
    #[error("runtime-containers-meta: {0}")]
    Meta(#[from] kruise_api::Error),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Cri(_) => "cri",
            Error::Meta(_) => "meta",
        }
    }
}

struct Ctx {
    client: kube::Client,
    cri: CriClient,
    metrics: Metrics,
    events: Events,
    /// container id → (last restart attempt, attempts), for restart backoff.
    restarts: Mutex<HashMap<String, (Instant, u32)>>,
    /// container id → (the env hash the Pod asks for, when the container was first seen
    /// without it), so a stop waits `STALE_SETTLE`.
    stale_since: Mutex<HashMap<String, (u64, Instant)>>,
}

/// How much longer a container found stale must wait before it is stopped (zero: stop now).
/// `seen` is when it was first found stale for the same wanted hash, updated here.
pub fn settle_wait(
    seen: &mut HashMap<String, (u64, Instant)>,
    container_id: &str,
    wanted: u64,
    now: Instant,
) -> Duration {
    let since = match seen.get(container_id) {
        Some((hash, at)) if *hash == wanted => *at,
        _ => {
            seen.insert(container_id.to_string(), (wanted, now));
            now
        }
    };
    // Containers long gone would otherwise stay in the map.
    seen.retain(|_, (_, at)| now.saturating_duration_since(*at) < MAX_RESTART_BACKOFF * 2);
    STALE_SETTLE.saturating_sub(now.saturating_duration_since(since))
}

/// Pods this duty cares about: controlled by an apps.kruise.io workload, or carrying
/// SidecarSet-injected containers.
pub fn is_kruise_pod(pod: &Pod) -> bool {
    let owned = pod.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true) && o.api_version.split('/').next() == Some(keys::APPS_GROUP)
    });
    let injected = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(keys::SIDECARSET_HASH_ANNOTATION));
    owned || injected
}

/// True while an in-place update has the pod's InPlaceUpdateReady condition False.
pub fn in_place_update_pending(pod: &Pod) -> bool {
    kruise_api::pod::condition(pod, keys::INPLACE_UPDATE_READY)
        .is_some_and(|c| c.status == k8s::CONDITION_FALSE)
}

/// What a container entry should say now. Pure: the env hash for new containers is passed in
/// (`None` when it could not be read).
pub fn build_entry(
    old: Option<&RuntimeContainerMetaSet>,
    runtime_name: &str,
    info: &ContainerInfo,
) -> RuntimeContainerMeta {
    let full_id = container_id_with_runtime(runtime_name, &info.id);
    if let Some(prev) = old.and_then(|o| o.containers.iter().find(|c| c.container_id == full_id)) {
        // Same container as last time: its hashes cannot have changed.
        return prev.clone();
    }
    RuntimeContainerMeta {
        name: info.name.clone(),
        container_id: full_id,
        restart_count: info.restart_count,
        hashes: RuntimeContainerHashes {
            plain_hash: info.hash,
            extracted_env_from_metadata_hash: 0,
        },
    }
}

/// Parses `env` output (`K=V` per line; lines without `=` are continuation noise and skipped).
pub fn parse_env_output(stdout: &[u8]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(stdout)
        .trim()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect()
}

fn annotations(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.annotations.clone().unwrap_or_default()
}

fn labels(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata.labels.clone().unwrap_or_default()
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if !is_kruise_pod(&pod) || pod.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default();
    // Only pods whose containers run on our runtime (and have started at least once).
    let Some((runtime, _)) = statuses
        .iter()
        .filter_map(|s| s.container_id.as_deref())
        .find_map(split_container_id)
    else {
        return Ok(Action::await_change());
    };
    if runtime != ctx.cri.runtime_name() {
        return Ok(Action::await_change());
    }
    let Some(uid) = pod.metadata.uid.as_deref() else {
        return Ok(Action::await_change());
    };
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();

    let containers = ctx.cri.pod_containers(uid).await?;
    let old = RuntimeContainerMetaSet::from_annotations(pod.metadata.annotations.as_ref())
        .unwrap_or_else(|e| {
            tracing::warn!(pod = %format!("{ns}/{name}"), error = %e, "unreadable runtime-containers-meta, rewriting it");
            None
        });
    let spec_containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let pending_update = in_place_update_pending(&pod);
    let (pod_labels, pod_annotations) = (labels(&pod), annotations(&pod));

    let mut set = RuntimeContainerMetaSet::default();
    let mut retry = None;
    for cs in &statuses {
        let Some(info) = newest_by_name(&containers, &cs.name) else {
            continue;
        };
        let Some(spec) = spec_containers.iter().find(|c| c.name == cs.name) else {
            continue;
        };
        let mut entry = build_entry(old.as_ref(), ctx.cri.runtime_name(), info);
        if entry.hashes.extracted_env_from_metadata_hash == 0 && info.state == State::Running {
            if envhash::references_metadata(spec) {
                match ctx
                    .cri
                    .exec_sync(&info.id, vec!["env".into()], ENV_EXEC_TIMEOUT)
                    .await
                {
                    Ok(out) if out.exit_code == 0 => {
                        let env = parse_env_output(&out.stdout);
                        entry.hashes.extracted_env_from_metadata_hash =
                            envhash::current_hash(spec, &env);
                    }
                    Ok(out) => {
                        tracing::warn!(pod = %format!("{ns}/{name}"), container = %cs.name, exit_code = out.exit_code, "env exited non-zero");
                        retry = Some(RETRY_ENV);
                    }
                    Err(e) => {
                        tracing::warn!(pod = %format!("{ns}/{name}"), container = %cs.name, error = %e, "cannot read container env");
                        retry = Some(RETRY_ENV);
                    }
                }
            } else {
                // Nothing to read: the hash of no env vars, as upstream reports it.
                entry.hashes.extracted_env_from_metadata_hash =
                    envhash::current_hash(spec, &BTreeMap::new());
            }
        }
        let wanted = envhash::expected_hash(spec, &pod_labels, &pod_annotations);
        if pending_update
            && entry.hashes.extracted_env_from_metadata_hash > 0
            && entry.hashes.extracted_env_from_metadata_hash != wanted
            && info.state == State::Running
        {
            let wait = settle_wait(
                &mut *ctx.stale_since.lock().await,
                &info.id,
                wanted,
                Instant::now(),
            );
            let next = if wait.is_zero() {
                restart_stale(&ctx, info, &ns, &name).await;
                RESTART_BACKOFF
            } else {
                wait
            };
            retry = Some(retry.map_or(next, |r: Duration| r.min(next)));
        }
        set.containers.push(entry);
    }

    if old.as_ref() != Some(&set) {
        let value = set.to_annotation_value()?;
        let patch = serde_json::json!({
            "metadata": {"annotations": {keys::RUNTIME_CONTAINERS_META_ANNOTATION: value}}
        });
        // Through pods/status, like upstream: the daemon's RBAC needs no write access to pods.
        Api::<Pod>::namespaced(ctx.client.clone(), &ns)
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        ctx.metrics.meta_patch();
        tracing::info!(pod = %format!("{ns}/{name}"), meta = %value, "reported runtime containers meta");
    }
    Ok(retry
        .map(Action::requeue)
        .unwrap_or_else(Action::await_change))
}

/// Stops a container whose env-from-metadata is stale so the kubelet recreates it with the new
/// values. Spaced out per container in case the stop does not take.
async fn restart_stale(ctx: &Ctx, info: &ContainerInfo, ns: &str, pod: &str) {
    {
        let mut r = ctx.restarts.lock().await;
        let (at, n) = r.entry(info.id.clone()).or_insert((Instant::now(), 0));
        let wait = RESTART_BACKOFF
            .saturating_mul(1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX))
            .min(MAX_RESTART_BACKOFF);
        if *n > 0 && at.elapsed() < wait {
            return;
        }
        *at = Instant::now();
        *n += 1;
        // Forget containers that are long gone so the map does not grow forever.
        r.retain(|_, (t, _)| t.elapsed() < MAX_RESTART_BACKOFF * 2);
    }
    let grace = info.grace_seconds.unwrap_or(DEFAULT_GRACE_SECONDS);
    tracing::info!(pod = %format!("{ns}/{pod}"), container = %info.name, id = %info.id, grace, "restarting container: env from metadata is stale");
    if let Err(e) =
        crate::prestop::stop_with_hook(&ctx.cri, info, info.pre_stop.as_ref(), &info.ports, grace)
            .await
    {
        tracing::warn!(pod = %format!("{ns}/{pod}"), container = %info.name, error = %e, "restart failed");
    } else {
        ctx.metrics.container_stop("containermeta");
        ctx.events.emit(
            pod_ref(ns, pod, &info.pod_uid),
            false,
            k8s::EVENT_REASON_KILLING,
            "Restart",
            format!(
                "Stopping container {} ({}): its env from pod metadata is stale",
                info.name, info.id
            ),
        );
    }
}

/// Runs the duty until `shutdown` fires. Watches only pods bound to this node.
pub async fn run(
    client: kube::Client,
    cri: CriClient,
    node: String,
    metrics: Metrics,
    events: Events,
    shutdown: CancellationToken,
) {
    let pods: Api<Pod> = Api::all(client.clone());
    let cfg = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let ctl = Controller::watching(
        NAME,
        runner::watch_with(pods, cfg),
        Arc::new(metrics.clone()),
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let ctx = Arc::new(Ctx {
        client,
        cri,
        metrics,
        events,
        restarts: Mutex::default(),
        stale_since: Mutex::default(),
    });
    ctl.run(reconcile, ctx).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn info(id: &str, hash: u64) -> ContainerInfo {
        ContainerInfo {
            id: id.into(),
            name: "main".into(),
            pod_uid: "u".into(),
            pod_name: "p".into(),
            pod_namespace: "ns".into(),
            hash,
            restart_count: 1,
            state: State::Running,
            created_at: 1,
            started_at: 1,
            image_ref: String::new(),
            pod_sandbox_id: String::new(),
            grace_seconds: None,
            pre_stop: None,
            ports: vec![],
        }
    }

    #[test]
    fn new_container_gets_a_fresh_entry() {
        let e = build_entry(None, "containerd", &info("abc", 0xdead));
        assert_eq!(e.container_id, "containerd://abc");
        assert_eq!(e.hashes.plain_hash, 0xdead);
        assert_eq!(e.hashes.extracted_env_from_metadata_hash, 0);
        assert_eq!(e.restart_count, 1);
    }

    #[test]
    fn known_container_keeps_its_entry() {
        let old = RuntimeContainerMetaSet {
            containers: vec![RuntimeContainerMeta {
                name: "main".into(),
                container_id: "containerd://abc".into(),
                restart_count: 0,
                hashes: RuntimeContainerHashes {
                    plain_hash: 1,
                    extracted_env_from_metadata_hash: 77,
                },
            }],
        };
        let e = build_entry(Some(&old), "containerd", &info("abc", 0xdead));
        assert_eq!(e, old.containers[0]);
        // A recreated container (new id) is reported anew.
        let e = build_entry(Some(&old), "containerd", &info("def", 0xdead));
        assert_eq!(e.container_id, "containerd://def");
        assert_eq!(e.hashes.extracted_env_from_metadata_hash, 0);
    }

    fn pod(api_version: &str, controller: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                owner_references: Some(vec![OwnerReference {
                    api_version: api_version.into(),
                    kind: "CloneSet".into(),
                    name: "cs".into(),
                    uid: "1".into(),
                    controller: Some(controller),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn only_kruise_pods_are_watched() {
        assert!(is_kruise_pod(&pod("apps.kruise.io/v1beta1", true)));
        assert!(is_kruise_pod(&pod("apps.kruise.io/v1alpha1", true)));
        assert!(!is_kruise_pod(&pod("apps.kruise.io/v1beta1", false)));
        assert!(!is_kruise_pod(&pod("apps/v1", true)));
        let mut p = pod("apps/v1", true);
        p.metadata.annotations = Some(BTreeMap::from([(
            keys::SIDECARSET_HASH_ANNOTATION.to_string(),
            "{}".to_string(),
        )]));
        assert!(is_kruise_pod(&p));
    }

    #[test]
    fn env_output_parsing_keeps_equals_in_values() {
        let m = parse_env_output(b"A=b=c\nnoequals\n B = x\n");
        assert_eq!(m.get("A").map(String::as_str), Some("b=c"));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn a_stale_container_waits_before_it_is_stopped() {
        let mut seen = HashMap::new();
        let t0 = Instant::now();
        assert_eq!(settle_wait(&mut seen, "c1", 7, t0), STALE_SETTLE);
        let half = STALE_SETTLE / 2;
        assert_eq!(
            settle_wait(&mut seen, "c1", 7, t0 + half),
            STALE_SETTLE - half
        );
        assert!(settle_wait(&mut seen, "c1", 7, t0 + STALE_SETTLE).is_zero());
        // The Pod asks for another value: the wait starts again.
        assert_eq!(
            settle_wait(&mut seen, "c1", 8, t0 + STALE_SETTLE),
            STALE_SETTLE
        );
        // Another container has a wait of its own.
        assert_eq!(
            settle_wait(&mut seen, "c2", 8, t0 + STALE_SETTLE),
            STALE_SETTLE
        );
    }

    #[test]
    fn pending_update_follows_the_condition() {
        let mut p = pod("apps.kruise.io/v1beta1", true);
        assert!(!in_place_update_pending(&p));
        p.status = Some(PodStatus {
            conditions: Some(vec![PodCondition {
                type_: keys::INPLACE_UPDATE_READY.into(),
                status: "False".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        assert!(in_place_update_pending(&p));
    }
}
