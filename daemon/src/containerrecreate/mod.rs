//! Recreates containers on request (ContainerRecreateRequest), one request per pod at a time.
//! The manager owns the rest of the lifecycle; the contract is written down in README.md.

pub mod state;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::LifecycleHandler;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kruise_api::keys::{self, k8s};
use kruise_runtime::runner::{self, Controller, ReconcileError};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio_util::sync::CancellationToken;

use crate::apitypes::{
    self, ContainerRecreateRequest, ContainerRecreateState, CrrPhase, ProbeHandler,
};
use crate::criruntime::labels::{newest_by_name, split_container_id};
use crate::criruntime::{ContainerInfo, CriClient, CriError};
use crate::events::{Events, pod_ref};
use crate::metrics::Metrics;
use kruise_runtime::stored::Stored;
use state::Next;

/// The controller name in the runner's spans and metrics (the duty's name).
const NAME: &str = "containerrecreate";
/// kube's `Controller`, which ran this duty before the runner, reconciled without a limit: a
/// request waiting out a container's grace period must not hold up the other pods' requests.
const CONCURRENCY: u16 = 0;
/// While containers are coming back, look again this often even without events.
const RECHECK: Duration = Duration::from_secs(3);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("container runtime: {0}")]
    Cri(#[from] CriError),
    #[error("serialize: {0}")]
    Json(#[from] serde_json::Error),
}

impl ReconcileError for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Cri(_) => "cri",
            Error::Json(_) => "json",
        }
    }
}

struct Ctx {
    client: kube::Client,
    cri: CriClient,
    store: Store<ContainerRecreateRequest>,
    /// Requests are watched and written at their storage version, converted here.
    stored: Stored<ContainerRecreateRequest>,
    metrics: Metrics,
    events: Events,
}

/// The requests of `ns` at their storage version: the status fields the daemon writes are the
/// same in every version.
fn api(ctx: &Ctx, ns: &str) -> Api<DynamicObject> {
    ctx.stored.api(ctx.client.clone(), Some(ns))
}

async fn patch_status(
    ctx: &Ctx,
    crr: &ContainerRecreateRequest,
    status: serde_json::Value,
) -> Result<(), Error> {
    let ns = crr.namespace().unwrap_or_default();
    api(ctx, &ns)
        .patch_status(
            &crr.name_any(),
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await?;
    Ok(())
}

async fn set_phase(
    ctx: &Ctx,
    crr: &ContainerRecreateRequest,
    phase: CrrPhase,
) -> Result<(), Error> {
    tracing::info!(crr = %runner::object_key(crr), phase = ?phase, "CRR phase");
    patch_status(ctx, crr, serde_json::json!({ "phase": phase })).await
}

/// The daemon's end of a request: phase Completed with a completion time. The manager then
/// drops the active label, releases the pod's readiness and applies the TTL.
async fn complete(ctx: &Ctx, crr: &ContainerRecreateRequest, message: &str) -> Result<(), Error> {
    tracing::info!(crr = %runner::object_key(crr), message, "CRR completed");
    ctx.metrics.crr_completed();
    patch_status(
        ctx,
        crr,
        serde_json::json!({
            "phase": CrrPhase::Completed,
            "completionTime": Time(jiff::Timestamp::now()),
            "message": message,
        }),
    )
    .await
}

async fn patch_states(
    ctx: &Ctx,
    crr: &ContainerRecreateRequest,
    states: &[ContainerRecreateState],
) -> Result<(), Error> {
    tracing::info!(crr = %runner::object_key(crr), states = %serde_json::to_string(states)?, "CRR container states");
    patch_status(
        ctx,
        crr,
        serde_json::json!({ "containerRecreateStates": states }),
    )
    .await
}

fn to_lifecycle(h: &ProbeHandler) -> LifecycleHandler {
    LifecycleHandler {
        exec: h.exec.clone(),
        http_get: h.http_get.clone(),
        tcp_socket: h.tcp_socket.clone(),
        ..Default::default()
    }
}

/// Stops the `i`th container of `crr` (its preStop hook first); returns whether the next one
/// may go at once.
async fn kill(
    ctx: &Ctx,
    crr: &ContainerRecreateRequest,
    states: &mut [ContainerRecreateState],
    i: usize,
    containers: &[ContainerInfo],
    pod_uid: &str,
) -> bool {
    let ns = crr.namespace().unwrap_or_default();
    let name = states[i].name.clone();
    let Some(rt) = newest_by_name(containers, &name) else {
        return false;
    };
    let spec = crr.spec.containers.iter().find(|c| c.name == name);
    let hook = spec.and_then(|c| c.pre_stop.as_ref()).map(to_lifecycle);
    let ports = spec.map(|c| c.ports.clone()).unwrap_or_default();
    tracing::info!(crr = %runner::object_key(crr), container = %name, id = %rt.id, "recreating container");
    let res = crate::prestop::stop_with_hook(
        &ctx.cri,
        rt,
        hook.as_ref(),
        &ports,
        state::grace_seconds(crr),
    )
    .await
    .map_err(|e| e.message());
    if res.is_ok() {
        ctx.metrics.container_stop("containerrecreate");
        ctx.events.emit(
            pod_ref(&ns, &crr.spec.pod_name, pod_uid),
            false,
            k8s::EVENT_REASON_KILLING,
            "Recreate",
            format!(
                "Stopping container {name} by ContainerRecreateRequest {}",
                crr.name_any()
            ),
        );
    }
    state::record_kill(crr, states, i, res)
}

async fn reconcile(obj: Arc<ContainerRecreateRequest>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = obj.namespace().unwrap_or_default();
    // Every active request for the same pod, from the cache: only one of them may act.
    let siblings: Vec<Arc<ContainerRecreateRequest>> = ctx
        .store
        .state()
        .into_iter()
        .filter(|c| {
            c.namespace().as_deref() == Some(ns.as_str()) && c.spec.pod_name == obj.spec.pod_name
        })
        .collect();
    let refs: Vec<&ContainerRecreateRequest> = siblings.iter().map(|c| c.as_ref()).collect();
    let (picked, to_pend) = state::pick(&refs);
    for other in to_pend {
        if ObjectRef::from_obj(other) == ObjectRef::from_obj(obj.as_ref()) {
            set_phase(&ctx, other, CrrPhase::Pending).await?;
        }
    }
    let Some(crr) = picked else {
        return Ok(Action::await_change());
    };
    if ObjectRef::from_obj(crr) != ObjectRef::from_obj(obj.as_ref()) {
        // Not our turn; the picked request's own reconcile does the work.
        return Ok(Action::requeue(Duration::from_secs(10)));
    }
    // Use the freshest copy from the cache, not the (possibly older) trigger object.
    let crr = crr.clone();

    if state::phase(&crr) != Some(CrrPhase::Recreating) {
        set_phase(&ctx, &crr, CrrPhase::Recreating).await?;
        return Ok(Action::await_change());
    }
    match state::unready_grace(&crr, jiff::Timestamp::now()) {
        state::UnreadyGrace::NotAcknowledged => {
            tracing::info!(crr = %runner::object_key(&crr), "waiting for the manager to make the pod unready");
            return Ok(Action::requeue(RECHECK));
        }
        state::UnreadyGrace::Wait(left) => {
            tracing::info!(crr = %runner::object_key(&crr), left = ?left, "waiting for unready grace period");
            return Ok(Action::requeue(left + Duration::from_millis(100)));
        }
        state::UnreadyGrace::Done => {}
    }

    // The runtime must be ours: container IDs carry its name.
    let runtime_ok = crr.spec.containers.iter().all(|c| {
        c.status_context
            .as_ref()
            .and_then(|s| split_container_id(&s.container_id))
            .is_some_and(|(t, _)| t == ctx.cri.runtime_name())
    });
    if !runtime_ok {
        complete(&ctx, &crr, "failed to find runtime service: containers have no statusContext.containerID of this node's runtime").await?;
        return Ok(Action::await_change());
    }
    let Some(pod_uid) = crr.labels().get(keys::CRR_POD_UID_LABEL).cloned() else {
        complete(&ctx, &crr, "no pod uid label").await?;
        return Ok(Action::await_change());
    };

    let containers = ctx.cri.pod_containers(&pod_uid).await?;
    let mut states = state::current_states(
        &crr,
        &containers,
        ctx.cri.runtime_name(),
        jiff::Timestamp::now(),
    );
    let recorded = crr
        .status
        .as_ref()
        .map(|s| s.container_recreate_states.clone())
        .unwrap_or_default();
    if states != recorded {
        patch_states(&ctx, &crr, &states).await?;
        return Ok(Action::requeue(RECHECK));
    }

    loop {
        match state::next(&crr, &mut states, &containers) {
            Next::Kill(i) => {
                if kill(&ctx, &crr, &mut states, i, &containers, &pod_uid).await {
                    continue;
                }
                break;
            }
            Next::Complete => {
                if states != recorded {
                    patch_states(&ctx, &crr, &states).await?;
                    return Ok(Action::requeue(RECHECK));
                }
                complete(&ctx, &crr, "").await?;
                return Ok(Action::await_change());
            }
            Next::Wait => break,
        }
    }
    if states != recorded {
        patch_states(&ctx, &crr, &states).await?;
    }
    let min_started = crr
        .spec
        .strategy
        .as_ref()
        .map(|s| s.min_started_seconds)
        .unwrap_or(0);
    let wait = if min_started > 0 {
        Duration::from_secs(min_started as u64).min(RECHECK)
    } else {
        RECHECK
    };
    Ok(Action::requeue(wait))
}

/// Runs the duty until `shutdown` fires. Watches only active requests for this node.
pub async fn run(
    client: kube::Client,
    cri: CriClient,
    node: String,
    metrics: Metrics,
    events: Events,
    shutdown: CancellationToken,
) {
    let stored = apitypes::stored::<ContainerRecreateRequest>();
    let crrs = stored.api(client.clone(), None);
    let cfg = watcher::Config::default().labels(&format!(
        "{}={node},{}=true",
        keys::CRR_NODE_NAME_LABEL,
        keys::CRR_ACTIVE_LABEL
    ));
    let ctl = Controller::watching(
        NAME,
        stored.watch(crrs, cfg),
        Arc::new(metrics.clone()),
        shutdown,
    )
    .concurrency(CONCURRENCY);
    let ctx = Arc::new(Ctx {
        client,
        cri,
        store: ctl.store(),
        stored,
        metrics,
        events,
    });
    ctl.run(reconcile, ctx).await;
}
